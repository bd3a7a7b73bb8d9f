"""Refunding a subscription's payment from the console (the admin API): a wallet
provider's (PayPal) payment is a v1 sale, refunded through PayPal's sales API, in full or
in part, once per idempotency key; its PAYMENT.SALE.REFUNDED then confirms that refund
(one refund row, one credit note) and a full one takes that period back."""

from __future__ import annotations

import pytest
from fakes.shop import order_status
from helpers.clients import new_client
from helpers.subscriptions import GRACE, state
from sqlalchemy import func, select

from cmsshop.models import CreditNote, Order, Refund


@pytest.fixture
def wallet_admin(wallet_app, admin):
    client = new_client(wallet_app)
    client.login(admin.email)
    return client


def post_refund(client, number, body, key="k-1", status="*"):
    return client.post_json(
        f"/api/admin/orders/{number}/refunds", body, headers={"Idempotency-Key": key}, status=status
    )


def count(dbsession, model, *where) -> int:
    dbsession.rollback()
    return dbsession.scalar(select(func.count()).select_from(model).where(*where))


def wallet_renewal(wallet_subscribed, paypal, send, dbsession):
    """A paid renewal of the PayPal subscription: (its order, its sale id, the first
    period's end)."""
    number, sub_id = wallet_subscribed
    first_paid_through = state(dbsession, number)[0].paid_through
    (sale_event,) = paypal.renew(sub_id)
    assert send(sale_event, status=200).json["status"] == "processed"
    periods = state(dbsession, number)[2]
    renewal = dbsession.get(Order, periods[1].order_id)
    return renewal, sale_event["resource"]["id"], first_paid_through


def test_a_wallet_renewal_is_refunded_in_full_through_paypal_sales_api(
    wallet_subscribed, wallet_admin, paypal, send, dbsession
):
    number, _ = wallet_subscribed
    renewal, sale_id, first_paid_through = wallet_renewal(
        wallet_subscribed, paypal, send, dbsession
    )
    made = post_refund(wallet_admin, renewal.number, {"full": True, "reason": "asked"}, status=201)
    refund = made.json["refund"]
    assert (refund["status"], refund["amount"], refund["full"]) == ("succeeded", 4900, True)
    (call,) = paypal.refund_calls
    assert call["sale"] == sale_id and call["requestId"]
    assert call["body"] == {"amount": {"total": "49.00", "currency": "EUR"}, "description": "asked"}
    assert refund["providerRefundId"] in paypal.sale_refunds
    # The same key: the same refund, PayPal not asked again.
    again = post_refund(wallet_admin, renewal.number, {"full": True}, status=200)
    assert again.json["refund"]["id"] == refund["id"] and len(paypal.refund_calls) == 1
    # Nothing taken back before PayPal's event; its event takes the period back, once.
    assert state(dbsession, number)[2][1].refunded_at is None
    event = paypal.sale_refund_event_of(refund["providerRefundId"])
    assert [send(event, status=200).json["status"] for _ in range(2)] == [
        "processed",
        "duplicate",
    ]
    subscription, license, periods = state(dbsession, number)
    assert [p.refunded_at is not None for p in periods] == [False, True]
    assert subscription.paid_through == first_paid_through
    assert license.expires_at == first_paid_through + GRACE
    assert order_status(dbsession, renewal.number) == "refunded"
    rows = list(dbsession.scalars(select(Refund).where(Refund.order_id == renewal.id)))
    assert [(r.status, r.requested_by is not None, r.confirmed_at is not None) for r in rows] == [
        ("succeeded", True, True)
    ]
    assert count(dbsession, CreditNote) == 1
    refused = post_refund(wallet_admin, renewal.number, {"amount": 100}, key="k-2", status=409)
    assert refused.json["code"] == "order_not_refundable"


def test_a_wallet_renewal_refunded_in_part_then_too_much_is_refused(
    wallet_subscribed, wallet_admin, paypal, send, dbsession
):
    number, _ = wallet_subscribed
    renewal, sale_id, _ = wallet_renewal(wallet_subscribed, paypal, send, dbsession)
    made = post_refund(wallet_admin, renewal.number, {"amount": 1000}, status=201).json["refund"]
    assert paypal.refund_calls[0]["body"]["amount"] == {"total": "10.00", "currency": "EUR"}
    too_much = post_refund(wallet_admin, renewal.number, {"amount": 3901}, key="k-2", status=422)
    assert too_much.json["code"] == "refund_exceeds_remaining"
    assert len(paypal.refund_calls) == 1  # refused before PayPal is asked
    assert send(paypal.sale_refund_event_of(made["providerRefundId"]), status=200)
    periods = state(dbsession, number)[2]
    assert [p.refunded_at for p in periods] == [None, None]  # partial: nothing taken back
    assert order_status(dbsession, renewal.number) == "paid"
    rest = post_refund(wallet_admin, renewal.number, {"full": True}, key="k-3", status=201)
    assert rest.json["refund"]["amount"] == 3900
    assert paypal.sale_refunded_of(sale_id) == 49
    last = send(paypal.sale_refund_event_of(rest.json["refund"]["providerRefundId"]), status=200)
    assert last.json["status"] == "processed", last.json
    assert order_status(dbsession, renewal.number) == "refunded"
    assert count(dbsession, CreditNote) == 2


def test_a_sale_paypal_already_refunded_is_refused_and_changes_nothing(
    wallet_subscribed, wallet_admin, paypal, send, dbsession
):
    number, _ = wallet_subscribed
    renewal, sale_id, _ = wallet_renewal(wallet_subscribed, paypal, send, dbsession)
    assert paypal._refund_sale(sale_id, {})[0] == 201  # refunded at PayPal, no event yet
    refused = post_refund(wallet_admin, renewal.number, {"full": True}, status=502)
    assert refused.json["code"] == "refund_refused"
    assert "TRANSACTION_ALREADY_REFUNDED" in refused.json["message"]
    assert refused.json["refund"]["status"] == "failed"
    assert order_status(dbsession, renewal.number) == "paid"
    assert state(dbsession, number)[2][1].refunded_at is None
    assert count(dbsession, CreditNote) == 0


def test_paypal_down_refunds_nothing_and_a_later_request_does(
    wallet_subscribed, wallet_admin, paypal, send, dbsession
):
    renewal, sale_id, _ = wallet_renewal(wallet_subscribed, paypal, send, dbsession)
    paypal.refund_fail_status = 503
    down = post_refund(wallet_admin, renewal.number, {"full": True}, status=503)
    assert down.json["code"] == "refund_provider_unavailable"
    assert {"code", "title", "message", "hints", "supportCode"} <= set(down.json)
    assert down.json["refund"]["status"] == "failed" and "503" in down.json["refund"]["error"]
    assert paypal.sale_refunds == {} and order_status(dbsession, renewal.number) == "paid"
    paypal.refund_fail_status = None
    made = post_refund(wallet_admin, renewal.number, {"full": True}, key="k-2", status=201)
    assert made.json["refund"]["status"] == "succeeded"
    assert paypal.sale_refunded_of(sale_id) == 49


def test_a_refund_paypal_leaves_pending_is_confirmed_by_its_event_and_a_failed_one_refused(
    wallet_subscribed, wallet_admin, paypal, send, dbsession
):
    renewal, _, _ = wallet_renewal(wallet_subscribed, paypal, send, dbsession)
    paypal.sale_refund_state = "failed"
    failed = post_refund(wallet_admin, renewal.number, {"amount": 100}, status=502)
    assert failed.json["code"] == "refund_refused" and "failed" in failed.json["message"]
    paypal.sale_refund_state = "pending"
    made = post_refund(wallet_admin, renewal.number, {"full": True}, key="k-2", status=201)
    assert made.json["refund"]["status"] == "pending"
    send(paypal.sale_refund_event_of(made.json["refund"]["providerRefundId"]), status=200)
    assert order_status(dbsession, renewal.number) == "refunded"
    rows = dbsession.scalars(
        select(Refund).where(Refund.order_id == renewal.id).order_by(Refund.id)
    )
    assert [row.status for row in rows] == ["failed", "succeeded"]
