"""The store and checkout journey in a real Chromium: browse and search the products,
put a product in the cart with the buy button, register from the cart's "Log in" link
and come back to the cart, pay on the (fake) provider's hosted page and come back to
a return page that updates itself once the provider's webhook has made the order
paid; and, without provider keys, the development sandbox page. Every page passes
``check_page`` (axe-core, one <h1>, phone width)."""

from __future__ import annotations

from fakes.shop import order_status
from helpers.app import PASSWORD
from helpers.browser import check_page, log_in
from helpers.mail_links import verify_link
from helpers.notices import wait_for_notice
from sqlalchemy import select

from cmsshop.models import Order


def test_browse_register_buy_pay_and_come_back(new_page, hosted_shop, fake_stripe, dbsession):
    fake_stripe.hold_webhooks = True  # released once the pending page was seen
    page = new_page(hosted_shop)
    page.goto("/products")
    assert page.locator(".cards .card").count() == 3
    check_page(page, "store-products")

    page.get_by_label("Search products").fill("guard")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**/products?q=guard*")
    assert page.locator(".cards .card").count() == 1
    page.get_by_role("link", name="SiteGuard").click()
    page.wait_for_url("**/products/site-guard")
    check_page(page, "store-product")

    # Anonymous: the buy button puts the product in the cart; registering from the cart's
    # "Log in" link comes back to the cart, the product still in it.
    page.get_by_role("button", name="Buy SiteGuard").click()
    page.wait_for_url("**/cart")
    assert "SiteGuard" in page.locator("table.cart tbody").inner_text()
    page.locator("main").get_by_role("link", name="Log in").click()
    page.wait_for_url("**/login?next=/cart")
    page.locator("main").get_by_role("link", name="Register").click()
    page.get_by_label("Name (optional)").fill("Browser Buyer")
    page.get_by_label("Email").fill("buyer@example.com")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()
    # The link mailed to the address confirms it, logs in and comes back to the cart,
    # which is the customer's now: no address asked any more.
    page.wait_for_url("**/check-email?reason=register")
    page.goto(verify_link(dbsession, "buyer@example.com"))
    page.get_by_role("button", name="Confirm my email address").click()
    wait_for_notice(page, "email_verified")
    page.wait_for_url("**/cart")
    assert "SiteGuard" in page.locator("table.cart tbody").inner_text()
    assert page.get_by_label("E-mail address").count() == 0

    # On the provider's page, changing one's mind: nothing charged, back to the product.
    page.get_by_label("Country", exact=True).select_option("US")
    page.get_by_role("button", name="Pay EUR49.00").click()
    page.wait_for_url(f"{fake_stripe.url}/c/pay/*")
    page.get_by_role("link", name="Cancel and go back").click()
    page.wait_for_url("**/checkout/cancel?order=*")
    assert "nothing was charged" in page.locator("main").inner_text()
    check_page(page, "checkout-cancel")
    page.get_by_role("link", name="Back to SiteGuard").click()
    page.wait_for_url("**/products/site-guard")

    # Logged in, the buy button goes straight to the provider, with the billing details
    # given at the first checkout.
    assert page.get_by_label("Country", exact=True).input_value() == "US"
    page.get_by_label("Currency").select_option("USD")
    page.get_by_role("button", name="Buy SiteGuard").click()
    page.wait_for_url(f"{fake_stripe.url}/c/pay/*")
    page.get_by_role("button", name="Pay").click()
    page.wait_for_url("**/checkout/success?order=*")
    number = page.url.rsplit("=", 1)[1]
    # Back from the provider before its webhook: pending, and the page says so.
    assert page.get_by_role("heading", level=1).inner_text() == "Confirming your payment"
    assert order_status(dbsession, number) == "pending"
    check_page(page, "checkout-return-pending")

    fake_stripe.release_webhooks()
    assert fake_stripe.delivered == [("checkout.session.completed", 200)]
    # The page asks again every 5 s and reloads once the order is paid.
    page.get_by_role("heading", name="Thank you, your order is paid").wait_for(timeout=60_000)
    check_page(page, "checkout-return-paid")
    assert page.get_by_role("link", name="Your downloads").get_attribute("href") == (
        "/account/downloads"
    )
    dbsession.rollback()
    orders = {o.number: o for o in dbsession.scalars(select(Order))}
    assert orders[number].status == "paid" and orders[number].currency == "USD"
    assert sorted(o.status for o in orders.values()) == ["paid", "pending"]


def test_development_sandbox_page(page, catalogue, customer, dbsession):
    log_in(page, customer.email, "/products/themes")
    page.get_by_label("Country", exact=True).select_option("DE")
    page.get_by_role("button", name="Buy Theme Pack").click()
    page.wait_for_url("**/checkout/sandbox/*")
    number = page.url.rsplit("/", 1)[1]
    assert f"simulate-payment {number} --provider cardprovider" in page.locator("pre").inner_text()
    check_page(page, "checkout-sandbox")
    page.get_by_role("link", name="Go to the order's return page").click()
    page.wait_for_url(f"**/checkout/success?order={number}")
    check_page(page, "checkout-return-sandbox-pending")
    assert order_status(dbsession, number) == "pending"
