"""Refunds through the admin JSON API (/api/admin/orders/{number}/refunds): the provider's
refund API called once per idempotency key, the refund recorded before the call, the
grants changed only by the provider's confirming event, exactly once."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from fakes.shop import order_status
from fakes.stripe_api import delivery
from helpers.app import serve
from helpers.clients import new_client
from helpers.purchases import http_login
from helpers.refunds import card_paid_order, grant_states, refund_rows, wallet_paid_order


@pytest.fixture
def card_admin(card_app, admin):
    client = new_client(card_app)
    client.login(admin.email)
    return client


def post_refund(client, number, body, key="k-1", status="*"):
    headers = {"Idempotency-Key": key} if key else {}
    return client.post_json(
        f"/api/admin/orders/{number}/refunds", body, headers=headers, status=status
    )


def test_full_refund_is_recorded_then_confirmed_by_the_event_once(
    card_admin, webhook, dbsession, catalogue, customer, fake_stripe
):
    order = card_paid_order(dbsession, customer, fake_stripe)
    situation = card_admin.get(f"/api/admin/orders/{order.number}/refunds").json
    assert situation["refundable"] is True and situation["remaining"] == order.total

    made = post_refund(card_admin, order.number, {"full": True, "reason": "asked"}, status=201)
    refund = made.json["refund"]
    assert refund["amount"] == order.total and refund["full"] is True
    assert refund["status"] == "succeeded"  # the fake's card refunds succeed at once
    assert refund["providerRefundId"].startswith("re_")
    assert len(fake_stripe.refunds) == 1
    # Nothing revoked yet: only the provider's event changes the grants.
    assert order_status(dbsession, order.number) == "paid"
    assert grant_states(dbsession, order)["licenses"] == ["active"]

    again = post_refund(card_admin, order.number, {"full": True}, status=200)
    assert again.json["created"] is False and again.json["refund"]["id"] == refund["id"]
    assert len(fake_stripe.refund_calls) == 1  # the same key: the provider not asked again

    payload = fake_stripe.refund_event(refund["providerRefundId"])
    body, headers = delivery(payload)
    assert webhook(body, headers).json["status"] == "processed"
    body, headers = delivery(fake_stripe.refund_event(refund["providerRefundId"]))
    webhook(body, headers)  # a second event for the same refund
    assert order_status(dbsession, order.number) == "refunded"
    states = grant_states(dbsession, order)
    assert states["entitlements"] == ["revoked", "revoked"] and states["licenses"] == ["revoked"]
    rows = refund_rows(dbsession, order)
    assert [(r.status, r.requested_by is not None) for r in rows] == [("succeeded", True)]
    assert rows[0].confirmed_at is not None

    refused = post_refund(card_admin, order.number, {"amount": 100}, key="k-2", status=409)
    assert refused.json["code"] == "order_not_refundable"


def test_partial_refunds_hold_licenses_and_cannot_exceed_what_is_left(
    card_admin, webhook, dbsession, catalogue, customer, fake_stripe
):
    order = card_paid_order(dbsession, customer, fake_stripe)  # 49.00 + 19.00
    lines = card_admin.get(f"/api/admin/orders/{order.number}/refunds").json["lines"]
    themes = next(line for line in lines if line["name"] == "Theme Pack")
    by_line = post_refund(
        card_admin, order.number, {"lines": [{"item": themes["item"]}]}, key="a", status=201
    ).json["refund"]
    assert by_line["amount"] == 1900 and by_line["lines"] == [
        {"item": themes["item"], "amount": 1900}
    ]
    again_line = post_refund(
        card_admin, order.number, {"lines": [{"item": themes["item"]}]}, key="b", status=422
    )
    assert again_line.json["code"] == "validation_failed"  # nothing left of that line
    too_much = post_refund(card_admin, order.number, {"amount": 4901}, key="c", status=422)
    assert too_much.json["code"] == "refund_exceeds_remaining"
    for bad in ({"amount": 0}, {"amount": -5}, {}, {"full": True, "amount": 5}):
        post_refund(card_admin, order.number, bad, key="d", status=422)
    post_refund(card_admin, order.number, {"amount": 5}, key=None, status=422)
    assert len(fake_stripe.refunds) == 1 and len(refund_rows(dbsession, order)) == 1

    body, headers = delivery(fake_stripe.refund_event(by_line["providerRefundId"]))
    assert webhook(body, headers).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "paid"
    states = grant_states(dbsession, order)
    assert states["licenses"] == ["active"] and states["reviews"] == 1  # held for review

    rest = post_refund(card_admin, order.number, {"amount": 4900}, key="e", status=201)
    body, headers = delivery(fake_stripe.refund_event(rest.json["refund"]["providerRefundId"]))
    webhook(body, headers)
    assert order_status(dbsession, order.number) == "refunded"
    assert [r.status for r in refund_rows(dbsession, order)] == ["succeeded", "succeeded"]


def test_provider_down_or_refusing_changes_nothing_and_a_retry_works(
    card_admin, dbsession, catalogue, customer, fake_stripe
):
    order = card_paid_order(dbsession, customer, fake_stripe)
    fake_stripe.refund_fail_with = 500
    down = post_refund(card_admin, order.number, {"amount": 1000}, key="x1", status=503)
    assert down.json["code"] == "refund_provider_unavailable"
    assert down.json["refund"]["status"] == "failed" and "500" in down.json["refund"]["error"]
    assert "fake refund outage" in down.json["message"]
    fake_stripe.refund_fail_with = None
    # The provider is asked to refund more than it holds (another refund made there).
    fake_stripe.create_refund({"payment_intent": order.payment_reference, "amount": "6000"}, None)
    refused = post_refund(card_admin, order.number, {"amount": 1000}, key="x2", status=502)
    assert refused.json["code"] == "refund_refused"
    assert (
        "amount_too_large" in refused.json["refund"]["error"]
        or "greater" in (refused.json["refund"]["error"])
    )
    assert order_status(dbsession, order.number) == "paid"
    assert grant_states(dbsession, order)["licenses"] == ["active"]
    ok = post_refund(card_admin, order.number, {"amount": 800}, key="x3", status=201)
    assert ok.json["refund"]["status"] == "succeeded"
    assert [r.status for r in refund_rows(dbsession, order)] == ["failed", "failed", "succeeded"]


def test_unpaid_order_is_not_refundable(card_admin, dbsession, catalogue, customer, order):
    situation = card_admin.get(f"/api/admin/orders/{order.number}/refunds").json
    assert situation["refundable"] is False and "pending" in situation["notRefundableBecause"]
    refused = post_refund(card_admin, order.number, {"full": True}, status=409)
    assert refused.json["code"] == "order_not_refundable"
    card_admin.get("/api/admin/orders/NOPE-1/refunds", status=404)


def test_a_refund_made_at_the_provider_gets_its_row_and_events_match_by_amount(
    card_admin, webhook, dbsession, catalogue, customer, fake_stripe
):
    order = card_paid_order(dbsession, customer, fake_stripe)
    fake_stripe.refund_status = "pending"
    ours = post_refund(card_admin, order.number, {"amount": 1000}, status=201).json["refund"]
    assert ours["status"] == "pending"
    # At the provider's dashboard: 5.00 more, no row of ours.
    _, theirs = fake_stripe.create_refund(
        {"payment_intent": order.payment_reference, "amount": "500"}, None
    )
    # Events without the refunds list (Stripe's newer API versions): matched by the
    # cumulative amount refunded.
    body, headers = delivery(fake_stripe.refund_event(theirs["id"], list_refunds=False))
    assert webhook(body, headers).json["status"] == "processed"
    rows = refund_rows(dbsession, order)
    assert [(r.amount, r.status, r.requested_by is None) for r in rows] == [
        (1000, "succeeded", False),
        (500, "succeeded", True),
    ]
    body, headers = delivery(fake_stripe.refund_event(theirs["id"], list_refunds=False))
    webhook(body, headers)  # again: nothing more
    assert len(refund_rows(dbsession, order)) == 2
    situation = card_admin.get(f"/api/admin/orders/{order.number}/refunds").json
    assert situation["remaining"] == order.total - 1500
    assert grant_states(dbsession, order)["licenses"] == ["active"]


def test_two_concurrent_refund_posts_make_one_provider_refund(
    card_app, admin, dbsession, catalogue, customer, fake_stripe
):
    order = card_paid_order(dbsession, customer, fake_stripe)
    barrier = threading.Barrier(2)
    with serve(card_app) as base:
        sessions = [http_login(base, admin.email) for _ in range(2)]
        url = f"{base}/api/admin/orders/{order.number}/refunds"

        def post(session):
            barrier.wait(timeout=30)
            return session.post(
                url, json={"full": True}, headers={"Idempotency-Key": "double"}, timeout=60
            )

        with ThreadPoolExecutor(max_workers=2) as pool:
            answers = list(pool.map(post, sessions))
    assert sorted(a.status_code for a in answers) == [200, 201], [a.text for a in answers]
    assert len({a.json()["refund"]["id"] for a in answers}) == 1
    assert len([c for c in fake_stripe.refund_calls if "params" in c]) == 1
    assert len(fake_stripe.refunds) == 1
    assert len(refund_rows(dbsession, order)) == 1


def test_wallet_refund_by_amount_then_paypal_event(
    wallet_app, admin, send, dbsession, catalogue, customer, paypal
):
    client = new_client(wallet_app)
    client.login(admin.email)
    order = wallet_paid_order(dbsession, customer, paypal)
    made = post_refund(client, order.number, {"amount": 2000, "reason": "late"}, status=201)
    refund = made.json["refund"]
    assert refund["status"] == "succeeded" and refund["provider"] == "walletprovider"
    call = paypal.refund_calls[0]
    assert call["body"]["amount"] == {"currency_code": "EUR", "value": "20.00"}
    assert call["requestId"] and call["capture"] == order.payment_reference
    post_refund(client, order.number, {"amount": 2000}, status=200)  # same key
    assert len(paypal.refund_calls) == 1
    too_much = post_refund(client, order.number, {"amount": 6000}, key="more", status=422)
    assert too_much.json["code"] == "refund_exceeds_remaining"

    paypal.refund_fail_status = 503
    down = post_refund(client, order.number, {"amount": 100}, key="down", status=503)
    assert "503" in down.json["refund"]["error"]
    paypal.refund_fail_status = None

    assert (
        send(paypal.refund_event_of(refund["providerRefundId"]), status=200).json["status"]
        == "processed"
    )
    rows = refund_rows(dbsession, order)
    assert [r.status for r in rows] == ["succeeded", "failed"]
    states = grant_states(dbsession, order)
    assert states["licenses"] == ["active"] and states["reviews"] == 1  # partial: review

    rest = post_refund(client, order.number, {"full": True}, key="rest", status=201)
    assert rest.json["refund"]["amount"] == order.total - 2000
    send(paypal.refund_event_of(rest.json["refund"]["providerRefundId"]), status=200)
    assert order_status(dbsession, order.number) == "refunded"
    assert grant_states(dbsession, order)["licenses"] == ["revoked"]
