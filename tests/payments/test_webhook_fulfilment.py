"""The card webhook end to end: confirmation with a fake provider API on loopback,
exactly-once fulfilment, the other event types and the state machine."""

from __future__ import annotations

import datetime as dt

import pytest
import webtest
from fakes.shop import counts, event_row, make_order, order_status
from fakes.stripe_api import (
    charge_object,
    closed_port_url,
    delivery,
    dispute_object,
    event,
    intent_object,
    session_object,
)
from helpers.payments import send
from sqlalchemy import select

from cmsshop.models import Entitlement, Fulfilment, Invoice, License, Order


def paid_session(fake_stripe, order, **kwargs):
    return fake_stripe.add_session(session_object(order.number, order.total, **kwargs))


def test_completed_checkout_fulfils_once(webhook, fake_stripe, order, dbsession):
    session = paid_session(fake_stripe, order)
    payload = event("checkout.session.completed", session)
    response = send(webhook, payload, 200)
    assert response.json == {"received": True, "status": "processed"}
    # Confirmed with the provider API, not taken from the event.
    assert ("GET", f"/v1/checkout/sessions/{session['id']}") in fake_stripe.requests

    dbsession.commit()
    dbsession.expire_all()
    paid = dbsession.scalar(select(Order).where(Order.number == order.number))
    assert paid.status == "paid" and paid.paid_at is not None
    assert paid.payment_reference == session["payment_intent"]
    invoice = dbsession.scalar(select(Invoice).where(Invoice.order_id == paid.id))
    year = dt.datetime.now(dt.UTC).year
    assert invoice.number == f"INV-{year}-000001"
    assert invoice.total == 4900 + 1900 and invoice.currency == "EUR"
    assert [line["product"] for line in invoice.lines] == ["site-guard", "themes"]
    entitlements = dbsession.scalars(select(Entitlement)).all()
    assert sorted(e.status for e in entitlements) == ["active", "active"]
    licenses = dbsession.scalars(select(License)).all()
    assert len(licenses) == 1  # themes is not a licensed product
    license = licenses[0]
    assert license.max_activations == 3 and license.status == "active"
    assert license.expires_at is not None
    assert len(license.key) == 29 and license.key.count("-") == 4
    row = event_row(dbsession, payload["id"])
    assert row.status == "processed" and row.order_number == order.number
    assert row.processed_at is not None and row.attempts == 1

    before = counts(dbsession)
    again = send(webhook, payload, 200)
    assert again.json == {"received": True, "status": "duplicate"}
    assert counts(dbsession) == before
    assert event_row(dbsession, payload["id"]).attempts == 2


def test_second_event_for_the_same_payment_creates_nothing(webhook, fake_stripe, order, dbsession):
    session = paid_session(fake_stripe, order)
    send(webhook, event("checkout.session.completed", session), 200)
    before = counts(dbsession)
    intent = fake_stripe.add_intent(
        intent_object(order.number, order.total, pi=session["payment_intent"])
    )
    payload = event("payment_intent.succeeded", intent)
    assert send(webhook, payload, 200).json["status"] == "duplicate"
    after = counts(dbsession)
    assert after == {**before, "events": before["events"] + 1}
    assert event_row(dbsession, payload["id"]).status == "duplicate"


def test_payment_intent_event_alone_fulfils(webhook, fake_stripe, order, dbsession):
    intent = fake_stripe.add_intent(intent_object(order.number, order.total))
    assert (
        send(webhook, event("payment_intent.succeeded", intent), 200).json["status"] == "processed"
    )
    assert order_status(dbsession, order.number) == "paid"
    fulfilment = dbsession.scalar(select(Fulfilment))
    assert fulfilment.payment_reference == intent["id"]


def test_payment_intent_without_order_reference_is_ignored(webhook, catalogue):
    payload = event("payment_intent.succeeded", intent_object(None, 100))
    assert send(webhook, payload, 200).json["status"] == "ignored"


def test_unpaid_completed_session_is_ignored(webhook, fake_stripe, order, dbsession):
    session = paid_session(fake_stripe, order, payment_status="unpaid")
    payload = event("checkout.session.completed", session)
    assert send(webhook, payload, 200).json["status"] == "ignored"
    assert order_status(dbsession, order.number) == "pending"
    assert event_row(dbsession, payload["id"]).status == "ignored"


def test_async_success_fulfils(webhook, fake_stripe, order, dbsession):
    session = paid_session(fake_stripe, order)
    payload = event("checkout.session.async_payment_succeeded", session)
    assert send(webhook, payload, 200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "paid"


def test_unknown_order_answers_409_until_it_exists(
    webhook, fake_stripe, dbsession, catalogue, customer
):
    number = "ORD-LATER-00001"
    session = fake_stripe.add_session(session_object(number, 4900))
    payload = event("checkout.session.completed", session)
    response = send(webhook, payload, 409)
    assert response.json["code"] == "pending_order"
    assert response.json["received"] is True
    row = event_row(dbsession, payload["id"])
    assert row.status == "pending_order" and number in row.last_error
    make_order(dbsession, customer, number=number)
    assert send(webhook, payload, 200).json["status"] == "processed"
    assert order_status(dbsession, number) == "paid"
    assert event_row(dbsession, payload["id"]).attempts == 2


def test_provider_api_down_answers_503_and_nothing_is_paid(
    make_app, card_settings, fake_stripe, order, dbsession
):
    down = webtest.TestApp(
        make_app(**{**card_settings, "cmsshop.cardprovider.api_base": closed_port_url()})
    )
    session = paid_session(fake_stripe, order)
    payload = event("checkout.session.completed", session)
    body, headers = delivery(payload)
    response = down.post("/api/webhooks/cardprovider", body, headers=headers, status=503)
    assert response.json["code"] == "confirm_failed"
    assert response.json["status"] == "confirm_failed"
    assert order_status(dbsession, order.number) == "pending"
    assert counts(dbsession)["fulfilments"] == 0
    row = event_row(dbsession, payload["id"])
    assert row.status == "confirm_failed" and "APIConnectionError" in row.last_error

    # The provider retries once the API answers again: the payment is not lost.
    up = webtest.TestApp(make_app(**card_settings))
    body, headers = delivery(payload)
    assert (
        up.post("/api/webhooks/cardprovider", body, headers=headers).json["status"] == "processed"
    )
    assert order_status(dbsession, order.number) == "paid"


def test_provider_api_server_error_answers_503(webhook, fake_stripe, order, dbsession):
    session = paid_session(fake_stripe, order)
    fake_stripe.fail_with = 500
    payload = event("checkout.session.completed", session)
    assert send(webhook, payload, 503).json["code"] == "confirm_failed"
    assert order_status(dbsession, order.number) == "pending"
    fake_stripe.fail_with = None
    assert send(webhook, payload, 200).json["status"] == "processed"


def test_provider_api_with_a_wrong_key_answers_503(make_app, card_settings, fake_stripe, order):
    app = webtest.TestApp(
        make_app(**{**card_settings, "cmsshop.cardprovider.api_key": "sk_test_revoked0123456789"})
    )
    payload = event("checkout.session.completed", paid_session(fake_stripe, order))
    body, headers = delivery(payload)
    response = app.post("/api/webhooks/cardprovider", body, headers=headers, status=503)
    assert response.json["code"] == "confirm_failed"


def test_provider_lying_about_the_amount_puts_the_order_in_review(
    webhook, fake_stripe, order, dbsession
):
    # The event claims the full amount; the provider API (the truth) says 100.
    claimed = session_object(order.number, order.total)
    fake_stripe.add_session({**claimed, "amount_total": 100})
    payload = event("checkout.session.completed", claimed)
    response = send(webhook, payload, 200)
    assert response.json == {"received": True, "status": "needs_review"}
    assert order_status(dbsession, order.number) == "needs_review"
    assert counts(dbsession) | {"events": 0} == {
        "paid": 0,
        "fulfilments": 0,
        "invoices": 0,
        "entitlements": 0,
        "licenses": 0,
        "events": 0,
    }
    row = event_row(dbsession, payload["id"])
    assert row.status == "processed" and "amount 100 != order total 6800" in row.last_error
    # Redelivery changes nothing.
    assert send(webhook, payload, 200).json["status"] == "duplicate"
    assert order_status(dbsession, order.number) == "needs_review"


def test_currency_or_reference_mismatch_needs_review(
    webhook, fake_stripe, dbsession, catalogue, customer
):
    first = make_order(dbsession, customer)
    session = session_object(first.number, first.total)
    fake_stripe.add_session({**session, "currency": "usd"})
    assert (
        send(webhook, event("checkout.session.completed", session), 200).json["status"]
        == "needs_review"
    )
    second = make_order(dbsession, customer)
    session = session_object(second.number, second.total)
    fake_stripe.add_session({**session, "client_reference_id": "ORD-OTHER", "metadata": {}})
    assert (
        send(webhook, event("checkout.session.completed", session), 200).json["status"]
        == "needs_review"
    )
    assert order_status(dbsession, second.number) == "needs_review"


def test_provider_saying_not_paid_answers_409(webhook, fake_stripe, order, dbsession):
    claimed = session_object(order.number, order.total)
    fake_stripe.add_session({**claimed, "payment_status": "unpaid", "status": "open"})
    payload = event("checkout.session.completed", claimed)
    response = send(webhook, payload, 409)
    assert response.json["code"] == "payment_not_final"
    assert order_status(dbsession, order.number) == "pending"
    assert event_row(dbsession, payload["id"]).status == "confirm_failed"


def test_async_failure_then_late_success_needs_review(webhook, fake_stripe, order, dbsession):
    session = paid_session(fake_stripe, order)
    failed = event("checkout.session.async_payment_failed", {**session, "payment_status": "unpaid"})
    assert send(webhook, failed, 200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "failed"
    assert (
        send(webhook, event("checkout.session.async_payment_failed", session), 200).json["status"]
        == "duplicate"
    )
    # Money arriving for a failed order is never lost: a human looks at it.
    late = event("checkout.session.async_payment_succeeded", session)
    assert send(webhook, late, 200).json["status"] == "needs_review"
    assert order_status(dbsession, order.number) == "needs_review"
    assert counts(dbsession)["fulfilments"] == 0


def test_expired_session_cancels_a_pending_order(webhook, fake_stripe, order, dbsession):
    session = session_object(order.number, order.total, payment_status="unpaid")
    assert (
        send(webhook, event("checkout.session.expired", session), 200).json["status"] == "processed"
    )
    assert order_status(dbsession, order.number) == "cancelled"


def fulfilled(webhook, fake_stripe, order):
    session = paid_session(fake_stripe, order)
    send(webhook, event("checkout.session.completed", session), 200)
    return session["payment_intent"]


def grant_statuses(dbsession):
    dbsession.commit()
    dbsession.expire_all()
    return (
        sorted(e.status for e in dbsession.scalars(select(Entitlement))),
        sorted(li.status for li in dbsession.scalars(select(License))),
    )


def test_full_refund_revokes_and_a_late_paid_event_changes_nothing(
    webhook, fake_stripe, order, dbsession
):
    pi = fulfilled(webhook, fake_stripe, order)
    partial = event("charge.refunded", charge_object(pi, order.total, 100))
    # Revokes nothing; the order's license goes to the admin's review list.
    assert send(webhook, partial, 200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "paid"
    assert grant_statuses(dbsession) == (["active", "active"], ["active"])
    row = event_row(dbsession, partial["id"])
    assert (row.status, row.last_error) == (
        "processed",
        f"partial refund: 100 of {order.total}; licenses held for review",
    )
    refund = event("charge.refunded", charge_object(pi, order.total))
    assert send(webhook, refund, 200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "refunded"
    assert grant_statuses(dbsession) == (["revoked", "revoked"], ["revoked"])
    # States only move forward: a late "paid" event never un-revokes.
    intent = fake_stripe.add_intent(intent_object(order.number, order.total, pi=pi))
    assert (
        send(webhook, event("payment_intent.succeeded", intent), 200).json["status"] == "duplicate"
    )
    assert order_status(dbsession, order.number) == "refunded"
    assert grant_statuses(dbsession) == (["revoked", "revoked"], ["revoked"])
    assert (
        send(webhook, event("charge.refunded", charge_object(pi, order.total)), 200).json["status"]
        == "duplicate"
    )


def test_refund_for_an_unknown_payment_answers_409(webhook, catalogue):
    response = send(webhook, event("charge.refunded", charge_object("pi_unknown", 100)), 409)
    assert response.json["code"] == "pending_order"


def test_dispute_puts_on_hold_and_a_won_dispute_restores(webhook, fake_stripe, order, dbsession):
    pi = fulfilled(webhook, fake_stripe, order)
    assert (
        send(webhook, event("charge.dispute.created", dispute_object(pi)), 200).json["status"]
        == "processed"
    )
    assert order_status(dbsession, order.number) == "disputed"
    assert grant_statuses(dbsession) == (["on_hold", "on_hold"], ["suspended"])
    won = event("charge.dispute.closed", dispute_object(pi, "won"))
    assert send(webhook, won, 200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "paid"
    assert grant_statuses(dbsession) == (["active", "active"], ["active"])


def test_lost_dispute_revokes(webhook, fake_stripe, order, dbsession):
    pi = fulfilled(webhook, fake_stripe, order)
    send(webhook, event("charge.dispute.created", dispute_object(pi)), 200)
    lost = event("charge.dispute.closed", dispute_object(pi, "lost"))
    assert send(webhook, lost, 200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "refunded"
    assert grant_statuses(dbsession) == (["revoked", "revoked"], ["revoked"])


def test_other_event_types_are_ignored(webhook, catalogue, dbsession):
    payload = event("customer.created", {"id": "cus_1", "object": "customer"})
    assert send(webhook, payload, 200).json == {"received": True, "status": "ignored"}
    assert event_row(dbsession, payload["id"]).status == "ignored"


def test_event_without_object_is_ignored(webhook, catalogue):
    payload = event("checkout.session.completed", {})
    payload["data"] = "nonsense"
    assert send(webhook, payload, 200).json["status"] == "ignored"


def test_invoice_numbers_are_sequential_without_gaps(
    webhook, fake_stripe, dbsession, catalogue, customer
):
    numbers = []
    for _ in range(3):
        order = make_order(dbsession, customer, ("themes",))
        send(webhook, event("checkout.session.completed", paid_session(fake_stripe, order)), 200)
    # A payment that fails confirmation takes no number.
    failing = make_order(dbsession, customer, ("themes",))
    fake_stripe.fail_with = 503
    send(webhook, event("checkout.session.completed", paid_session(fake_stripe, failing)), 503)
    fake_stripe.fail_with = None
    order = make_order(dbsession, customer, ("themes",))
    send(webhook, event("checkout.session.completed", paid_session(fake_stripe, order)), 200)
    numbers = [n for (n,) in dbsession.execute(select(Invoice.sequence).order_by(Invoice.sequence))]
    assert numbers == [1, 2, 3, 4]


def test_trusted_verified_events_need_no_provider_api(
    make_app, card_settings, order, dbsession, fake_stripe
):
    app = webtest.TestApp(
        make_app(**{**card_settings, "cmsshop.payments.trust_verified_events": "true"})
    )
    payload = event("checkout.session.completed", session_object(order.number, order.total))
    body, headers = delivery(payload)
    assert (
        app.post("/api/webhooks/cardprovider", body, headers=headers).json["status"] == "processed"
    )
    assert fake_stripe.requests == []
    assert order_status(dbsession, order.number) == "paid"


def test_trusted_event_with_a_wrong_amount_still_needs_review(
    make_app, card_settings, order, dbsession
):
    app = webtest.TestApp(
        make_app(**{**card_settings, "cmsshop.payments.trust_verified_events": "true"})
    )
    payload = event("checkout.session.completed", session_object(order.number, 1))
    body, headers = delivery(payload)
    assert (
        app.post("/api/webhooks/cardprovider", body, headers=headers).json["status"]
        == "needs_review"
    )


def test_production_refuses_to_trust_verified_events():
    # The start-up check itself (building a production app here would switch the
    # process-wide password hasher to full cost for the rest of the suite).
    from pyramid.exceptions import ConfigurationError

    from cmsshop.modules.payments import check_production

    with pytest.raises(ConfigurationError, match="trust_verified_events"):
        check_production(
            {"cmsshop.environment": "production", "cmsshop.payments.trust_verified_events": True}
        )
    check_production(
        {"cmsshop.environment": "production", "cmsshop.payments.trust_verified_events": False}
    )
    check_production(
        {"cmsshop.environment": "development", "cmsshop.payments.trust_verified_events": True}
    )
