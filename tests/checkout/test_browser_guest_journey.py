"""A guest's whole purchase in a real Chromium, on the real app served by waitress with
the fake card provider's hosted page at the edge:

never logged in -> 2 seat packs of a licensed product and a second product in the cart
-> a mistyped discount code, then the right one -> the discounted total -> an e-mail
address -> pay on the provider's page -> the return page, "paid" once the provider's
signed webhook arrives -> one receipt, whose set-password link -> a password, logged in
on the order -> both products' downloads and one license for 2 x its seats.

Every page passes ``check_page`` (one <h1>, axe-core, no sideways scrolling on a phone).
"""

from __future__ import annotations

from fakes.shop import order_status
from helpers.browser import DESKTOP, check_page
from helpers.checkout import delivered, redemption_statuses
from helpers.coupons import make_coupon
from helpers.mail_links import mailed_link, mails_to
from helpers.notices import wait_for_notice
from sqlalchemy import select

from cmsshop.models import License, Order, User

GUEST = "guest.buyer@example.com"
NEW_PASSWORD = "a long new password"
# The narrowest common phone (check_page's own phone width is a little wider).
NARROW_PHONE = {"width": 375, "height": 812}


def assert_cart_fits_a_phone(page) -> None:
    """At 375 px neither the page nor the cart's table scrolls sideways: the amounts and
    the total are in view without scrolling the table."""
    page.set_viewport_size(NARROW_PHONE)
    try:
        overflow = page.evaluate(
            """() => [document.documentElement, document.querySelector("table.cart").parentElement]
                .map((e) => e.scrollWidth - e.clientWidth)"""
        )
        assert overflow[0] <= 1 and overflow[1] <= 1, f"wider than a phone by {overflow} px"
        assert page.locator("#cart-total").is_visible()
    finally:
        page.set_viewport_size(DESKTOP)


def test_a_guest_buys_two_products_with_a_coupon_and_sets_a_password_from_the_receipt(
    new_page, hosted_shop, fake_stripe, dbsession
):
    make_coupon(dbsession, "LAUNCH20", percent_off=20)
    fake_stripe.hold_webhooks = True  # released once the pending page was seen
    page = new_page(hosted_shop)

    # Two seat packs of SiteGuard (3 sites each), then the Theme Pack, into the cart.
    page.goto("/products/site-guard")
    check_page(page, "guest-product")
    page.get_by_label("Quantity").fill("2")
    page.get_by_role("button", name="Add to cart").click()
    page.wait_for_url("**/cart")
    page.goto("/products/themes")
    assert page.get_by_label("Quantity").count() == 0  # a download is bought once
    page.get_by_role("button", name="Add to cart").click()
    page.wait_for_url("**/cart")
    lines = page.locator("table.cart tbody tr")
    assert lines.count() == 2
    assert "EUR49.00 each" in lines.nth(0).inner_text()
    assert "One license for 6 sites" in lines.nth(0).inner_text()
    assert page.get_by_label("Quantity of SiteGuard").input_value() == "2"
    assert page.locator("#cart-total").inner_text() == "EUR117.00"  # 2 x 49.00 + 19.00

    # A mistyped code: said beside the field, the cart unchanged.
    page.get_by_label("Code", exact=True).fill("LAUNCH2O")
    page.get_by_role("button", name="Apply").click()
    error = page.locator("#f-code-error")
    error.wait_for()
    assert error.inner_text().strip()
    assert page.get_by_label("Code", exact=True).input_value() == "LAUNCH2O"
    assert page.locator("#cart-total").inner_text() == "EUR117.00"
    check_page(page, "guest-cart-coupon-error")
    assert_cart_fits_a_phone(page)

    # The right code, typed in lower case: 20 % off the whole order.
    page.get_by_label("Code", exact=True).fill(" launch20 ")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url("**/cart")
    assert "Code LAUNCH20 applied: −EUR23.40." in page.locator("main").inner_text()
    assert page.locator("#cart-total").inner_text() == "EUR93.60"
    check_page(page, "guest-cart-coupon")
    assert_cart_fits_a_phone(page)

    # Pay with an e-mail address alone, on the provider's page: charged the discounted total.
    page.get_by_label("E-mail address").fill(GUEST)
    page.get_by_label("Name (optional)").fill("Guest Buyer")
    page.get_by_label("Country", exact=True).select_option("FR")
    page.get_by_role("button", name="Pay EUR93.60").click()
    page.wait_for_url(f"{fake_stripe.url}/c/pay/*")
    assert "93.60 EUR" in page.locator("main").inner_text()
    page.get_by_role("button", name="Pay").click()
    page.wait_for_url("**/checkout/success?order=*")
    number = page.url.rsplit("=", 1)[1]
    assert page.get_by_role("heading", level=1).inner_text() == "Confirming your payment"
    assert "Once the payment is confirmed, your receipt goes to the e-mail address" in (
        page.locator("main").inner_text()
    )
    assert order_status(dbsession, number) == "pending"
    check_page(page, "guest-return-pending")

    fake_stripe.release_webhooks()
    assert fake_stripe.delivered == [("checkout.session.completed", 200)]
    # The page asks again every 5 s and reloads once the order is paid.
    page.get_by_role("heading", name="Thank you, your order is paid").wait_for(timeout=60_000)
    shown = page.locator("main").inner_text()
    assert "Your receipt is on its way to the e-mail address you gave" in shown
    assert "SiteGuard × 2" in shown and "Theme Pack" in shown and "EUR93.60" in shown
    assert "The prices include the discount of code LAUNCH20: −EUR23.40." in shown
    # This browser is nobody's session: no links into an account.
    assert page.get_by_role("link", name="Your downloads").count() == 0
    check_page(page, "guest-return-paid")

    dbsession.rollback()
    order = dbsession.scalar(select(Order).where(Order.number == number))
    owner = dbsession.get(User, order.user_id)
    assert (order.status, order.total, order.discount, order.guest) == ("paid", 9360, 2340, True)
    assert owner.email == GUEST and owner.password_hash == ""
    assert [(item.product_slug, item.quantity) for item in order.items] == [
        ("site-guard", 2),
        ("themes", 1),
    ]
    assert delivered(dbsession, number) == {
        "fulfilments": 1,
        "invoices": 1,
        "entitlements": 2,
        "licenses": 1,
        "receipts": 1,
    }
    assert redemption_statuses(dbsession, "LAUNCH20") == ["redeemed"]
    # Exactly one message for the address: the receipt with the set-password link.
    (receipt,) = mails_to(dbsession, GUEST)
    assert receipt.kind == "receipt_set_password"

    # The receipt's link (the sender issues its token as it sends): set a password,
    # logged in on the order.
    page.goto(mailed_link(dbsession, GUEST, "receipt_set_password", "/set-password"))
    assert GUEST in page.locator("main").inner_text()
    check_page(page, "guest-set-password")
    page.get_by_label("Password").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Set password and see my order").click()
    wait_for_notice(page, "password_set")
    page.wait_for_url(f"**/account/orders/{number}")
    assert page.get_by_role("heading", level=1).inner_text() == f"Order {number}"
    items = page.locator("main table tbody tr")
    assert items.count() == 2
    assert items.nth(0).locator("td").nth(0).inner_text() == "SiteGuard"
    assert items.nth(0).locator("td").nth(1).inner_text() == "2"
    assert "LAUNCH20" in page.locator("main table tfoot").inner_text()
    check_page(page, "guest-order")

    # Both products' downloads, and one license valid on 2 x 3 sites.
    page.goto("/account/downloads")
    downloads = page.locator("main table tbody").inner_text()
    assert "SiteGuard" in downloads and "Theme Pack" in downloads
    page.goto("/account/licenses")
    dbsession.rollback()
    (license,) = dbsession.scalars(select(License).where(License.user_id == owner.id))
    assert license.max_activations == 6
    assert page.locator("section.license").count() == 1
    facts = page.locator("section.license .facts").inner_text()
    assert license.key in facts and "0 of 6" in facts
    check_page(page, "guest-licenses")
