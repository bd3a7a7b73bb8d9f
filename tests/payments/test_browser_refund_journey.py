"""Refunds as the operator and the buyer live them, in a real Chromium, on the real app
served by waitress with the fake card provider (Stripe's API and its signed webhooks) on
loopback. Each: a paid order of a licensed product and a download, half of it refunded,
the provider's signed charge.refunded webhook confirming it -> one refund e-mail,
delivered by the sender (outbox -> files), saying what came back, what is still paid and
that nothing was taken back -> the buyer's order page showing the refund -> the license
still active, held for the seller's review (a partial refund revokes nothing) -> the
webhook again: nothing more.

- refunded at the provider (its dashboard): the event alone;
- the operator connects the card provider in the console (secret key and webhook
  signing secret, Test connection, the webhook URL to register), then refunds from the
  order's page, through its confirm step.

Every page passes ``check_page`` (one <h1>, axe-core, no sideways scrolling on a phone).
"""

from __future__ import annotations

from fakes.shop import make_order, order_status
from fakes.stripe_api import API_KEY, SECRET, charge_object, event, intent_object, session_object
from helpers.browser import check_page, log_in
from helpers.mail_links import mailed_text, mails_to
from helpers.notices import wait_for_notice
from sqlalchemy import select

from cmsshop.models import CreditNote, License, LicenseReview, Refund


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


def test_the_operator_connects_the_provider_refunds_half_and_the_buyer_is_told(
    new_page, unconnected_shop, fake_stripe, dbsession, admin, customer
):
    hosted_shop = unconnected_shop
    console = new_page(hosted_shop)
    log_in(console, admin.email, "/admin/payments")

    # Not connected yet: a signed delivery cannot be verified, nothing is fulfilled.
    order = make_order(dbsession, customer, ("site-guard", "themes"))
    number, total = order.number, order.total
    session = fake_stripe.add_session(session_object(number, total))
    fake_stripe.add_intent(intent_object(number, total, pi=session["payment_intent"]))
    paid = event("checkout.session.completed", session)
    assert fake_stripe.send_webhook(paid) >= 400
    assert order_status(dbsession, number) == "pending"

    # The operator connects it: the secret key and the webhook signing secret, saved.
    card = console.locator("section", has=console.locator("#provider-cardprovider"))
    card.get_by_label("Secret key").fill(API_KEY)
    card.get_by_label("Webhook signing secrets").fill(SECRET)
    card.get_by_role("button", name="Save Card payments (Stripe)").click()
    wait_for_notice(console, "provider_saved")
    console.wait_for_url("**/admin/payments#provider-*")
    # Test connection names the account the key reaches.
    card = console.locator("section", has=console.locator("#provider-cardprovider"))
    card.get_by_role("button", name="Test connection").click()
    console.wait_for_load_state()
    result = console.locator("#test-cardprovider-result").inner_text()
    assert "Fake Shop GmbH" in result and "acct_fake0123456789" in result
    # The webhook URL to register at the provider is this shop's, ready to copy.
    shown_url = console.locator("#webhook-url-cardprovider").input_value()
    assert shown_url == fake_stripe.webhook_url
    assert console.get_by_role("button", name="Copy the URL").first.is_visible()
    assert API_KEY not in console.content() and SECRET not in console.content()
    check_page(console, "refund-journey-connected")

    # The buyer's order is paid: the provider's signed webhook, verified with the saved
    # secret and confirmed with the saved key.
    assert fake_stripe.send_webhook(paid) == 200
    assert order_status(dbsession, number) == "paid"

    # The operator refunds half of it from the order's page, through the confirm step.
    console.goto(f"/admin/orders/{number}")
    console.get_by_role("link", name="Refund").click()
    console.wait_for_url(f"**/admin/orders/{number}/refund")
    check_page(console, "refund-journey-form")
    console.get_by_label("An amount").check()
    console.get_by_label("Amount (EUR, e.g. 10.00)").fill("34.00")
    console.get_by_role("button", name="Review the refund").click()
    confirm = console.get_by_role("button", name="Confirm the refund of EUR34.00")
    confirm.wait_for()
    check_page(console, "refund-journey-confirm")
    assert fake_stripe.refunds == {}  # nothing refunded before the confirmation
    confirm.click()
    console.wait_for_url(f"**/admin/orders/{number}/refunds/*")
    check_page(console, "refund-journey-result")
    (refund,) = fake_stripe.refunds.values()
    assert refund["amount"] == total // 2

    # The provider's webhook confirms it.
    confirmed = fake_stripe.refund_event(refund["id"])
    assert fake_stripe.send_webhook(confirmed) == 200
    assert order_status(dbsession, number) == "paid"  # a partial refund revokes nothing
    dbsession.rollback()
    row = dbsession.scalar(select(Refund).where(Refund.provider_refund_id == refund["id"]))
    assert row.status == "succeeded" and row.confirmed_at is not None

    # One refund e-mail, as it leaves the sender.
    assert [m.kind for m in mails_to(dbsession, customer.email, "refund")] == ["refund"]
    text = mailed_text(dbsession, customer.email, "refund")
    assert f"We have refunded EUR34.00 for order {number}." in text
    assert f"Refund reference: {refund['id']}" in text
    assert "Refunded in total: EUR34.00" in text and "Still paid: EUR34.00" in text
    assert "This is a partial refund: nothing has been taken back." in text
    assert f"/account/orders/{number}" in text

    # The buyer's order page shows it.
    page = new_page(hosted_shop)
    log_in(page, customer.email, f"/account/orders/{number}")
    shown = " ".join(page.locator("#refunds").inner_text().split())
    assert "EUR34.00 refunded on" in shown
    assert "Refunded EUR34.00" in shown and "Still paid EUR34.00" in shown
    assert "Nothing was taken back: your license stays active" in shown
    check_page(page, "refund-journey-account-order")
    # The credit note correcting the invoice, linked from the e-mail and the order page.
    (note,) = dbsession.scalars(select(CreditNote).where(CreditNote.order_id == order.id))
    assert f"Credit note {note.number}" in text
    page.get_by_role("link", name=f"Credit note {note.number}").click()
    page.wait_for_url(f"**/account/credit-notes/{note.number}")
    assert "Total (EUR) -EUR34.00" in " ".join(page.locator("main").inner_text().split())
    check_page(page, "refund-journey-credit-note")
    page.goto(f"/account/orders/{number}")

    # The license: active, on the seller's review list.
    page.goto("/account/licenses")
    dbsession.rollback()
    (license,) = dbsession.scalars(select(License).where(License.user_id == customer.id))
    assert license.status == "active"
    review = dbsession.scalar(select(LicenseReview).where(LicenseReview.license_id == license.id))
    assert review is not None and review.resolved_at is None and review.refunded_amount == 3400
    assert license.key in page.locator("main").inner_text()
    check_page(page, "refund-journey-account-licenses")

    # The provider delivers the same event again: nothing more is sent.
    assert fake_stripe.send_webhook(confirmed) == 200
    assert len(mails_to(dbsession, customer.email, "refund")) == 1

    # The console: the order lists the credit note; it and the quarter's tax report.
    console.goto(f"/admin/orders/{number}")
    console.get_by_role("link", name=f"Credit note {note.number}").first.click()
    console.wait_for_url(f"**/admin/credit-notes/{note.number}")
    check_page(console, "refund-journey-admin-credit-note")
    console.goto("/admin/tax/report")
    assert console.locator("#sales").is_visible()
    check_page(console, "refund-journey-tax-report")
    console.get_by_role("link", name="Business and tax").click()
    console.wait_for_url("**/admin/tax/settings")
    assert console.locator("#identity-missing").is_visible()
    check_page(console, "refund-journey-tax-settings")
