"""A refund as the buyer lives it, in a real Chromium, on the real app served by waitress
with the fake card provider on loopback:

a paid order of a licensed product and a download -> half of it refunded at the provider
-> the provider's signed charge.refunded webhook -> one refund e-mail, delivered by the
sender (outbox -> files), saying what came back, what is still paid and that nothing was
taken back -> the account's order page showing the refund -> the license still active,
held for the seller's review (a partial refund revokes nothing) -> the webhook again:
nothing more.

Every page passes ``check_page`` (one <h1>, axe-core, no sideways scrolling on a phone).
"""

from __future__ import annotations

from fakes.shop import make_order, order_status
from fakes.stripe_api import charge_object, event, session_object
from helpers.browser import check_page, log_in
from helpers.mail_links import mailed_text, mails_to
from sqlalchemy import select

from cmsshop.models import License, LicenseReview


def half_refunded_charge(intent: str, total: int, refund_id: str) -> dict:
    """The charge as Stripe sends it after refunding half of it: its refunds listed."""
    charge = charge_object(intent, total, total // 2)
    charge["refunds"] = {
        "object": "list",
        "data": [{"id": refund_id, "object": "refund", "amount": total // 2}],
    }
    return charge


def test_half_refunded_at_the_provider_the_buyer_is_told_and_sees_it(
    new_page, hosted_shop, fake_stripe, dbsession, customer
):
    order = make_order(dbsession, customer, ("site-guard", "themes"))
    number, total = order.number, order.total
    session = fake_stripe.add_session(session_object(number, total))
    assert fake_stripe.send_webhook(event("checkout.session.completed", session)) == 200
    assert order_status(dbsession, number) == "paid"

    # Half refunded at the provider; its webhook confirms.
    refunded = event(
        "charge.refunded", half_refunded_charge(session["payment_intent"], total, "re_half")
    )
    assert fake_stripe.send_webhook(refunded) == 200
    assert order_status(dbsession, number) == "paid"  # a partial refund revokes nothing

    # One refund e-mail, as it leaves the sender.
    assert [m.kind for m in mails_to(dbsession, customer.email, "refund")] == ["refund"]
    text = mailed_text(dbsession, customer.email, "refund")
    assert f"We have refunded EUR34.00 for order {number}." in text
    assert "Refunded in total: EUR34.00" in text and "Still paid: EUR34.00" in text
    assert "This is a partial refund: nothing has been taken back." in text
    assert f"/account/orders/{number}" in text

    # The buyer's order page shows it.
    page = new_page(hosted_shop)
    log_in(page, customer.email, f"/account/orders/{number}")
    refunds = page.locator("#refunds")
    shown = " ".join(refunds.inner_text().split())
    assert "Refunded EUR34.00" in shown and "Still paid EUR34.00" in shown
    assert "Nothing was taken back: your license stays active" in shown
    check_page(page, "refund-account-order")

    # The license: active, on the seller's review list.
    page.goto("/account/licenses")
    dbsession.rollback()
    (license,) = dbsession.scalars(select(License).where(License.user_id == customer.id))
    assert license.status == "active"
    review = dbsession.scalar(select(LicenseReview).where(LicenseReview.license_id == license.id))
    assert review is not None and review.resolved_at is None and review.refunded_amount == 3400
    assert license.key in page.locator("main").inner_text()
    check_page(page, "refund-account-licenses")

    # The provider delivers the same event again: nothing more is sent.
    assert fake_stripe.send_webhook(refunded) == 200
    assert len(mails_to(dbsession, customer.email, "refund")) == 1
