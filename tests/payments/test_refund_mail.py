"""The buyer's refund e-mail: queued by the provider's confirming refund event (Stripe
charge.refunded, PayPal PAYMENT.CAPTURE.REFUNDED) in its transaction, once per refund
(repeated and out-of-order deliveries send nothing more), saying what was refunded, what
is left paid and what was taken back; and the account's order page showing it."""

from __future__ import annotations

import pytest
from fakes.paypal import capture_event, new_id, refund_event
from fakes.shop import make_order, order_status
from fakes.stripe_api import charge_object, event, session_object
from helpers.clients import logged_in
from helpers.outbox import rows
from helpers.payments import send as send_card
from sqlalchemy import select

from cmsshop.models import License

# --- Stripe ---------------------------------------------------------------------------------


def card_paid(webhook, fake_stripe, order) -> str:
    session = fake_stripe.add_session(session_object(order.number, order.total))
    send_card(webhook, event("checkout.session.completed", session), 200)
    return session["payment_intent"]


def charge(pi: str, total: int, refunds: list[tuple[str, int]] | None) -> dict:
    """A charge after ``refunds`` [(id, amount)] (oldest first), listed newest first as
    Stripe does; None: refunded in full, by an API version whose events leave the list
    out."""
    refunded = total if refunds is None else sum(amount for _, amount in refunds)
    obj = charge_object(pi, total, refunded)
    if refunds is not None:
        obj["refunds"] = {
            "object": "list",
            "data": [
                {"id": rid, "object": "refund", "amount": amount, "status": "succeeded"}
                for rid, amount in reversed(refunds)
            ],
        }
    return obj


def refund_mails(dbsession):
    return [row for row in rows(dbsession) if row.kind == "refund"]


def test_a_partial_then_the_rest_at_stripe_each_told_once(webhook, fake_stripe, order, dbsession):
    pi = card_paid(webhook, fake_stripe, order)
    assert order.total == 6800
    first = event("charge.refunded", charge(pi, 6800, [("re_first", 3400)]))
    assert send_card(webhook, first, 200).json["status"] == "processed"
    [mail] = refund_mails(dbsession)
    assert mail.dedupe_key == "refund:cardprovider:re_first"
    assert mail.to_address == "alice@example.com" and mail.user_id == order.user_id
    assert mail.subject == f"Refund for order {order.number}"
    text = mail.text_body
    assert "We have refunded EUR34.00 for order" in text
    assert "Refund reference: re_first" in text
    assert "Refunded in total: EUR34.00" in text and "Still paid: EUR34.00" in text
    assert "partial refund: nothing has been taken back" in text
    assert "license stays active while the seller reviews the refund" in text
    assert "License key" not in text
    assert "We have refunded <strong>EUR34.00</strong>" in mail.html_body
    assert order_status(dbsession, order.number) == "paid"

    # The same event again, and the same refund in another event: nothing more.
    send_card(webhook, first, 200)
    send_card(webhook, event("charge.refunded", charge(pi, 6800, [("re_first", 3400)])), 200)
    assert len(refund_mails(dbsession)) == 1

    rest = event("charge.refunded", charge(pi, 6800, [("re_first", 3400), ("re_rest", 3400)]))
    assert send_card(webhook, rest, 200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "refunded"
    mails = refund_mails(dbsession)
    assert [m.dedupe_key for m in mails] == [
        "refund:cardprovider:re_first",
        "refund:cardprovider:re_rest",
    ]
    key = dbsession.scalar(select(License.key))
    text = mails[1].text_body
    assert "We have refunded EUR34.00" in text
    assert "Refunded in total: EUR68.00" in text and "Still paid: EUR0.00" in text
    assert "refunded in full, so what it gave you has been taken back" in text
    assert "Download: SiteGuard" in text and "Download: Theme Pack" in text
    assert f"License key {key} (SiteGuard)" in text
    assert f'<code style="font-size: 1rem;">{key}</code> (SiteGuard)' in mails[1].html_body

    # Out of order: the first refund's event once more, after the full refund.
    late = event("charge.refunded", charge(pi, 6800, [("re_first", 3400)]))
    assert send_card(webhook, late, 200).json["status"] == "duplicate"
    assert len(refund_mails(dbsession)) == 2


def test_a_full_refund_without_the_refund_list_is_keyed_by_its_event(
    webhook, fake_stripe, order, dbsession
):
    pi = card_paid(webhook, fake_stripe, order)
    full = event("charge.refunded", charge(pi, 6800, None))
    assert send_card(webhook, full, 200).json["status"] == "processed"
    [mail] = refund_mails(dbsession)
    assert mail.dedupe_key == f"refund:cardprovider:event:{full['id']}"
    assert "Your payment for order" in mail.text_body and "Refund reference" not in mail.text_body
    assert "Refunded in total: EUR68.00" in mail.text_body
    # A second event for the same refund (redelivered with a new id): the order is refunded.
    again = event("charge.refunded", charge(pi, 6800, None))
    assert send_card(webhook, again, 200).json["status"] == "duplicate"
    assert len(refund_mails(dbsession)) == 1


def test_a_refund_of_an_order_never_paid_tells_nothing(webhook, fake_stripe, order, dbsession):
    # Known to us (its payment reference), but pending: the state machine ignores it.
    order.payment_reference = "pi_never_paid"
    dbsession.commit()
    send_card(webhook, event("charge.refunded", charge("pi_never_paid", 6800, [("re_x", 6800)])))
    assert refund_mails(dbsession) == []


def test_a_refund_of_an_unlicensed_order_says_the_downloads_stay(
    webhook, fake_stripe, dbsession, catalogue, customer
):
    order = make_order(dbsession, customer, ("themes",))
    pi = card_paid(webhook, fake_stripe, order)
    send_card(webhook, event("charge.refunded", charge(pi, 1900, [("re_part", 900)])), 200)
    [mail] = refund_mails(dbsession)
    assert "Your downloads stay available." in mail.text_body
    assert "Still paid: EUR10.00" in mail.text_body


# --- PayPal ---------------------------------------------------------------------------------


@pytest.fixture
def wallet_order(dbsession, catalogue, customer):
    return make_order(
        dbsession, customer, ("site-guard", "themes"), provider="walletprovider",
        checkout_id=new_id(),
    )  # fmt: skip


def wallet_paid(send, paypal, order) -> str:
    capture_id = new_id()
    paypal.add_capture(capture_id, order.number, "68.00", "EUR")
    send(capture_event(capture_id, order.number, "68.00"), status=200)
    return capture_id


def paypal_refund(capture_id, order, own: str, total: str) -> dict:
    payload = refund_event(capture_id, order.number, own)
    payload["resource"]["seller_payable_breakdown"]["total_refunded_amount"]["value"] = total
    return payload


def test_paypal_partial_then_full_each_told_once(send, paypal, wallet_order, dbsession):
    order = wallet_order
    capture_id = wallet_paid(send, paypal, order)
    partial = paypal_refund(capture_id, order, "10.00", "10.00")
    assert send(partial, status=200).json["status"] == "processed"
    [mail] = refund_mails(dbsession)
    refund_id = partial["resource"]["id"]
    assert mail.dedupe_key == f"refund:walletprovider:{refund_id}"
    assert "We have refunded EUR10.00" in mail.text_body
    assert "Still paid: EUR58.00" in mail.text_body
    assert "nothing has been taken back" in mail.text_body
    send(partial, status=200)  # redelivered
    assert len(refund_mails(dbsession)) == 1

    rest = paypal_refund(capture_id, order, "58.00", "68.00")
    assert send(rest, status=200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "refunded"
    mails = refund_mails(dbsession)
    assert len(mails) == 2
    text = mails[1].text_body
    assert "We have refunded EUR58.00" in text and "Still paid: EUR0.00" in text
    assert "Download: SiteGuard" in text and "License key" in text
    # The partial refund's event again, after the full one: nothing more.
    send(paypal_refund(capture_id, order, "10.00", "10.00"), status=200)
    assert len(refund_mails(dbsession)) == 2


def test_paypal_full_refund_at_once(send, paypal, wallet_order, dbsession):
    capture_id = wallet_paid(send, paypal, wallet_order)
    send(paypal_refund(capture_id, wallet_order, "68.00", "68.00"), status=200)
    [mail] = refund_mails(dbsession)
    assert "We have refunded EUR68.00" in mail.text_body
    assert "refunded in full" in mail.text_body
    assert "<script" not in mail.html_body


# --- the account's order page ---------------------------------------------------------------


def test_the_account_order_page_shows_the_refunds(
    webhook, fake_stripe, order, dbsession, card_app, customer
):
    pi = card_paid(webhook, fake_stripe, order)
    send_card(webhook, event("charge.refunded", charge(pi, 6800, [("re_a", 3400)])), 200)
    pages = logged_in(card_app, customer)
    page = pages.get(f"/account/orders/{order.number}")
    refunds = page.html.select_one("#refunds")
    assert refunds is not None
    text = " ".join(refunds.get_text(" ").split())
    assert "EUR34.00" in text and "Still paid EUR34.00" in text
    assert "Nothing was taken back" in text

    send_card(
        webhook, event("charge.refunded", charge(pi, 6800, [("re_a", 3400), ("re_b", 3400)])), 200
    )
    page = pages.get(f"/account/orders/{order.number}")
    text = " ".join(page.html.select_one("#refunds").get_text(" ").split())
    assert "Still paid EUR0.00" in text
    assert "Refunded in full" in text
    assert "SiteGuard" in text and "Theme Pack" in text
