"""The store and checkout journey in a real Chromium: browse and search the products,
register from the buy button, pay on the (fake) provider's hosted page and come back to
a return page that updates itself once the provider's webhook has made the order
paid; and, without provider keys, the development sandbox page. Every page passes
``check_page`` (axe-core, one <h1>, phone width)."""

from __future__ import annotations

from fakes.shop import order_status
from helpers.app import PASSWORD
from helpers.browser import check_page
from helpers.mail_links import verify_link
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

    # Anonymous: the buy button asks to log in, and registering comes back here.
    page.get_by_role("button", name="Buy SiteGuard").click()
    page.wait_for_url("**/login?next=%2Fproducts%2Fsite-guard")
    page.locator("main").get_by_role("link", name="Register").click()
    page.get_by_label("Name (optional)").fill("Browser Buyer")
    page.get_by_label("Email").fill("buyer@example.com")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()
    # The link mailed to the address confirms it, logs in and comes back to the product.
    page.wait_for_url("**/check-email?reason=register")
    page.goto(verify_link(dbsession, "buyer@example.com"))
    page.get_by_role("button", name="Confirm my email address").click()
    page.wait_for_url("**/products/site-guard?notice=email_verified")

    # On the provider's page, changing one's mind: nothing charged, back to the product.
    page.get_by_role("button", name="Buy SiteGuard").click()
    page.wait_for_url(f"{fake_stripe.url}/c/pay/*")
    page.get_by_role("link", name="Cancel and go back").click()
    page.wait_for_url("**/checkout/cancel?order=*")
    assert "nothing was charged" in page.locator("main").inner_text()
    check_page(page, "checkout-cancel")
    page.get_by_role("link", name="Back to SiteGuard").click()
    page.wait_for_url("**/products/site-guard")

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
    page.goto("/products/themes")
    page.get_by_role("button", name="Buy Theme Pack").click()
    page.wait_for_url("**/login?next=%2Fproducts%2Fthemes")
    page.get_by_label("Email").fill(customer.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/products/themes")
    page.get_by_role("button", name="Buy Theme Pack").click()
    page.wait_for_url("**/checkout/sandbox/*")
    number = page.url.rsplit("/", 1)[1]
    assert f"simulate-payment {number} --provider cardprovider" in page.locator("pre").inner_text()
    check_page(page, "checkout-sandbox")
    page.get_by_role("link", name="Go to the order's return page").click()
    page.wait_for_url(f"**/checkout/success?order={number}")
    check_page(page, "checkout-return-sandbox-pending")
    assert order_status(dbsession, number) == "pending"
