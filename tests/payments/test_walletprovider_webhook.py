"""The wallet provider end to end: PayPal-signed deliveries through the real route
POST /api/webhooks/walletprovider and the shared machinery (event log, confirmation with
a fake PayPal API on loopback HTTPS, exactly-once fulfilment), checkout with
"provider": "walletprovider", a card and a wallet payment side by side, concurrent
deliveries on PostgreSQL, and simulate-payment run as an operator runs it."""

from __future__ import annotations

import concurrent.futures

import pytest
import requests
import webtest
from fakes.paypal import WALLET_ROUTE as ROUTE
from fakes.paypal import (
    body_of,
    capture_event,
    dispute_event,
    new_id,
    order_approved_event,
    refund_event,
    refused_url,
    signed,
)
from fakes.shop import counts, event_row, make_order, order_status
from fakes.smtp import free_port
from fakes.stripe_api import delivery as card_delivery
from fakes.stripe_api import event as card_event
from fakes.stripe_api import session_object
from helpers.app import ROOT, requires_postgresql, serve
from helpers.checkout import BILLING
from helpers.clients import new_client
from sqlalchemy import select

from cmsshop.models import Entitlement, Fulfilment, Invoice, License, Order, PaymentEvent


@pytest.fixture
def order(dbsession, catalogue, customer):
    return make_order(
        dbsession,
        customer,
        ("site-guard", "themes"),
        provider="walletprovider",
        checkout_id=new_id(),
    )


def paid_capture(paypal, order, value="68.00", currency="EUR", **fields):
    capture_id = new_id()
    paypal.add_capture(capture_id, order.number, value, currency, **fields)
    return capture_id


def test_valid_capture_fulfils_once(send, paypal, order, dbsession):
    capture_id = paid_capture(paypal, order)
    payload = capture_event(capture_id, order.number, "68.00")

    response = send(payload, status=200)

    assert response.json == {"received": True, "status": "processed"}
    assert ("GET", f"/v2/payments/captures/{capture_id}") in paypal.requests
    assert paypal.count("/v1/notifications/certs/") == 1
    assert order_status(dbsession, order.number) == "paid"
    fulfilment = dbsession.scalar(select(Fulfilment))
    assert (fulfilment.provider, fulfilment.payment_reference) == ("walletprovider", capture_id)
    assert (fulfilment.confirmed_amount, fulfilment.confirmed_currency) == (6800, "EUR")
    invoice = dbsession.scalar(select(Invoice))
    assert invoice.total == 6800 and invoice.order_id == order.id
    assert sorted(e.status for e in dbsession.scalars(select(Entitlement))) == ["active"] * 2
    assert [lic.status for lic in dbsession.scalars(select(License))] == ["active"]
    row = event_row(dbsession, payload["id"])
    assert row.provider == "walletprovider" and row.status == "processed"
    assert row.order_number == order.number and row.event_type == "PAYMENT.CAPTURE.COMPLETED"

    before = counts(dbsession)
    again = send(payload, status=200)  # PayPal redelivers: new transmission, same event
    assert again.json == {"received": True, "status": "duplicate"}
    assert counts(dbsession) == before
    assert event_row(dbsession, payload["id"]).attempts == 2
    assert paypal.count("/v1/notifications/certs/") == 1  # the certificate came from the cache


def test_second_event_for_the_same_capture_creates_nothing(send, paypal, order, dbsession):
    capture_id = paid_capture(paypal, order)
    send(capture_event(capture_id, order.number, "68.00"), status=200)
    before = counts(dbsession)
    other = capture_event(capture_id, order.number, "68.00")  # another event id
    assert send(other, status=200).json["status"] == "duplicate"
    assert counts(dbsession) == {**before, "events": before["events"] + 1}


def test_bad_signature_is_400_and_logged_rejected(send, paypal, order, dbsession, pki, cert_url):
    capture_id = paid_capture(paypal, order)
    payload = capture_event(capture_id, order.number, "68.00")
    response = send(payload, status=400, webhook_id="WH-SOMEONE-ELSE")
    assert response.json["code"] == "invalid_signature" and response.json["received"] is False
    assert order_status(dbsession, order.number) == "pending"
    dbsession.commit()
    rejected = dbsession.scalars(select(PaymentEvent)).all()
    assert [r.status for r in rejected] == ["rejected"]
    assert "signature does not match" in rejected[0].last_error
    assert not any(path.startswith("/v2/") for _, path in paypal.requests)


@pytest.mark.parametrize(
    "tamper",
    [
        "one_byte",
        "hex_crc",
        "sha1",
        "missing_header",
        "bad_base64",
        "disallowed_host",
        "signed_truncated_json",
        "signed_empty_body",
    ],
)
def test_tampered_deliveries_are_rejected(wallet_app, paypal, pki, cert_url, order, tamper):
    import zlib

    from cryptography.hazmat.primitives import hashes

    capture_id = paid_capture(paypal, order)
    body = body_of(capture_event(capture_id, order.number, "68.00"))
    headers = signed(pki, cert_url, body)
    if tamper == "one_byte":
        body = body.replace(b'"68.00"', b'"69.00"')
    elif tamper == "hex_crc":
        headers = signed(pki, cert_url, body, crc=format(zlib.crc32(body), "x"))
    elif tamper == "sha1":
        headers = signed(pki, cert_url, body, algorithm_header="SHA1withRSA", digest=hashes.SHA1())
    elif tamper == "missing_header":
        del headers["PAYPAL-TRANSMISSION-ID"]
    elif tamper == "bad_base64":
        headers["PAYPAL-TRANSMISSION-SIG"] = "not*base64"
    elif tamper == "signed_truncated_json":
        body = body[:-7]
        headers = signed(pki, cert_url, body)
    elif tamper == "signed_empty_body":
        body = b""
        headers = signed(pki, cert_url, body)
    elif tamper == "disallowed_host":
        headers = signed(pki, cert_url.replace("localhost", "127.0.0.1"), body)
    paypal.reset()  # count only what this delivery causes
    paypal.serve_cert(pki.signing.chain_pem)
    client = webtest.TestApp(wallet_app)
    response = client.post(ROUTE, body, headers=headers, status=400)
    assert response.json["code"] == "invalid_signature"
    if tamper in ("sha1", "missing_header", "bad_base64", "disallowed_host"):
        assert paypal.requests == []  # refused before any request
    assert not any(path.startswith("/v2/") for _, path in paypal.requests)


def test_unknown_order_answers_409_until_it_exists(send, paypal, dbsession, catalogue, customer):
    number = "ORD-LATER-00001"
    capture_id = new_id()
    paypal.add_capture(capture_id, number, "49.00", "EUR")
    payload = capture_event(capture_id, number, "49.00")
    response = send(payload, status=409)
    assert response.json["code"] == "pending_order"
    assert event_row(dbsession, payload["id"]).status == "pending_order"
    make_order(dbsession, customer, ("site-guard",), number=number, provider="walletprovider")
    assert send(payload, status=200).json["status"] == "processed"
    assert order_status(dbsession, number) == "paid"


def test_provider_api_down_answers_503_and_nothing_is_paid(
    make_app, wallet_settings, pki, cert_url, paypal, order, dbsession
):
    capture_id = paid_capture(paypal, order)
    payload = capture_event(capture_id, order.number, "68.00")
    body = body_of(payload)
    down = webtest.TestApp(
        make_app(**{**wallet_settings, "cmsshop.walletprovider.api_base": refused_url()})
    )
    response = down.post(ROUTE, body, headers=signed(pki, cert_url, body), status=503)
    assert response.json["code"] == "confirm_failed"
    assert order_status(dbsession, order.number) == "pending"
    assert event_row(dbsession, payload["id"]).status == "confirm_failed"

    paypal.fail_status = 500  # up, but failing
    up = webtest.TestApp(make_app(**wallet_settings))
    assert up.post(ROUTE, body, headers=signed(pki, cert_url, body), status=503)
    assert counts(dbsession)["fulfilments"] == 0

    paypal.fail_status = None  # PayPal redelivers once we are reachable again
    ok = up.post(ROUTE, body, headers=signed(pki, cert_url, body), status=200)
    assert ok.json["status"] == "processed"
    assert order_status(dbsession, order.number) == "paid"


def test_certificate_host_down_answers_503(make_app, wallet_settings, pki, paypal, order):
    url = refused_url()
    settings = {**wallet_settings, "cmsshop.walletprovider.cert_hosts": url.split("//")[1]}
    body = body_of(capture_event(new_id(), order.number, "68.00"))
    client = webtest.TestApp(make_app(**settings))
    response = client.post(ROUTE, body, headers=signed(pki, url + "/cert", body), status=503)
    assert response.json["code"] == "verification_unavailable"


def test_lying_amount_puts_the_order_in_review(send, paypal, order, dbsession):
    """The event says 68.00, PayPal's API says 0.68: the API wins, nothing is delivered."""
    capture_id = paid_capture(paypal, order, value="0.68")
    payload = capture_event(capture_id, order.number, "68.00")
    assert send(payload, status=200).json["status"] == "needs_review"
    assert order_status(dbsession, order.number) == "needs_review"
    assert counts(dbsession)["entitlements"] == 0
    assert "amount 68 != order total 6800" in event_row(dbsession, payload["id"]).last_error


def test_capture_of_another_order_is_not_delivered(send, paypal, order, dbsession):
    capture_id = paid_capture(paypal, order, custom_id="ORD-OTHER-00000")
    assert send(capture_event(capture_id, order.number, "68.00"), status=200).json["status"] == (
        "needs_review"
    )
    assert counts(dbsession)["entitlements"] == 0


def test_capture_not_completed_at_paypal_is_409(send, paypal, order, dbsession):
    capture_id = paid_capture(paypal, order, status="PENDING")
    response = send(capture_event(capture_id, order.number, "68.00"), status=409)
    assert response.json["code"] == "payment_not_final"
    assert order_status(dbsession, order.number) == "pending"


def test_approval_and_pending_capture_are_not_payment(send, paypal, order, dbsession):
    paypal.add_order(order.provider_checkout_id, order.number, "68.00")
    approved = order_approved_event(order.provider_checkout_id, order.number, "68.00")
    assert send(approved, status=200).json["status"] == "processed"  # capture requested
    pending = capture_event(new_id(), order.number, event_type="PAYMENT.CAPTURE.PENDING")
    assert send(pending, status=200).json["status"] == "ignored"
    assert order_status(dbsession, order.number) == "pending"
    assert counts(dbsession)["fulfilments"] == 0
    assert event_row(dbsession, approved["id"]).status == "processed"


def test_approval_captures_once_and_the_capture_event_fulfils(send, paypal, order, dbsession):
    paypal_order = order.provider_checkout_id
    paypal.add_order(paypal_order, order.number, "68.00")
    approved = order_approved_event(paypal_order, order.number, "68.00")

    assert send(approved, status=200).json == {"received": True, "status": "processed"}
    key = f"cmsshop-capture-{paypal_order}"
    assert paypal.captures_of(paypal_order) == [{"order": paypal_order, "requestId": key}]
    assert len(paypal.captures) == 1
    # Approval is not payment, and neither is our capture request: no fulfilment yet.
    assert order_status(dbsession, order.number) == "pending"
    assert counts(dbsession)["fulfilments"] == 0
    row = event_row(dbsession, approved["id"])
    assert row.status == "processed" and row.order_number == order.number
    assert row.last_error == f"capture of {paypal_order} requested"

    # PayPal redelivers the same event: duplicate, no second capture request.
    assert send(approved, status=200).json["status"] == "duplicate"
    assert len(paypal.captures_of(paypal_order)) == 1

    # A second APPROVED event for the same PayPal order (another event id) while the
    # order is still pending: asked again with the same idempotency key, captured once.
    again = order_approved_event(paypal_order, order.number, "68.00")
    assert send(again, status=200).json["status"] == "processed"
    assert [c["requestId"] for c in paypal.captures_of(paypal_order)] == [key, key]
    assert len(paypal.captures) == 1

    # The capture's COMPLETED event (confirmed with the API) is what fulfils.
    capture_id = next(iter(paypal.captures))
    completed = capture_event(capture_id, order.number, "68.00")
    completed["resource"]["supplementary_data"]["related_ids"]["order_id"] = paypal_order
    assert send(completed, status=200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "paid"
    assert counts(dbsession)["fulfilments"] == 1

    # An approval arriving after the order is paid asks nothing.
    late = order_approved_event(paypal_order, order.number, "68.00")
    assert send(late, status=200).json["status"] == "ignored"
    assert "order is paid" in event_row(dbsession, late["id"]).last_error
    assert len(paypal.captures_of(paypal_order)) == 2


def test_approval_when_paypal_is_down_answers_503_and_is_retried(
    make_app, wallet_settings, pki, cert_url, paypal, order, dbsession
):
    paypal.add_order(order.provider_checkout_id, order.number, "68.00")
    payload = order_approved_event(order.provider_checkout_id, order.number, "68.00")
    body = body_of(payload)
    down = webtest.TestApp(
        make_app(**{**wallet_settings, "cmsshop.walletprovider.api_base": refused_url()})
    )
    response = down.post(ROUTE, body, headers=signed(pki, cert_url, body), status=503)
    assert response.json["code"] == "capture_failed"
    assert response.json["status"] == "confirm_failed"
    assert order_status(dbsession, order.number) == "pending"
    row = event_row(dbsession, payload["id"])
    assert row.status == "confirm_failed" and "could not capture" in row.last_error

    up = webtest.TestApp(make_app(**wallet_settings))
    paypal.fail_status = 500  # reachable, failing
    up.post(ROUTE, body, headers=signed(pki, cert_url, body), status=503)
    assert paypal.captures == {}
    paypal.fail_status = None  # PayPal redelivers
    ok = up.post(ROUTE, body, headers=signed(pki, cert_url, body), status=200)
    assert ok.json["status"] == "processed"
    assert len(paypal.captures) == 1
    assert order_status(dbsession, order.number) == "pending"  # COMPLETED will pay it
    assert counts(dbsession)["fulfilments"] == 0


def test_approval_for_an_order_that_is_not_pending_captures_nothing(send, paypal, order, dbsession):
    paypal.add_order(order.provider_checkout_id, order.number, "68.00")
    denied = capture_event(new_id(), order.number, event_type="PAYMENT.CAPTURE.DENIED")
    send(denied, status=200)
    assert order_status(dbsession, order.number) == "failed"
    approved = order_approved_event(order.provider_checkout_id, order.number, "68.00")
    assert send(approved, status=200).json["status"] == "ignored"
    assert "order is failed" in event_row(dbsession, approved["id"]).last_error
    # A PayPal order that is not this order's checkout is not captured either.
    other = order_approved_event(new_id(), order.number, "68.00")
    dbsession.execute(Order.__table__.update().where(Order.id == order.id).values(status="pending"))
    dbsession.commit()
    assert send(other, status=200).json["status"] == "ignored"
    assert paypal.capture_requests == []


def test_denied_capture_fails_the_order(send, order, dbsession):
    denied = capture_event(new_id(), order.number, event_type="PAYMENT.CAPTURE.DENIED")
    assert send(denied, status=200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "failed"


@pytest.mark.parametrize("kind", ["REFUNDED", "REVERSED"])
def test_refund_or_reversal_revokes(send, paypal, order, dbsession, kind):
    capture_id = paid_capture(paypal, order)
    send(capture_event(capture_id, order.number, "68.00"), status=200)
    refund = refund_event(capture_id, order.number, "68.00", kind=kind)
    assert send(refund, status=200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "refunded"
    assert {e.status for e in dbsession.scalars(select(Entitlement))} == {"revoked"}
    assert {lic.status for lic in dbsession.scalars(select(License))} == {"revoked"}
    # A late capture event never un-revokes.
    late = capture_event(capture_id, order.number, "68.00")
    assert send(late, status=200).json["status"] == "duplicate"
    assert order_status(dbsession, order.number) == "refunded"


def test_refund_found_by_capture_alone(send, paypal, order, dbsession):
    """Refund resources may carry no custom_id: the capture id from the ``up`` link
    finds the order through its fulfilment."""
    capture_id = paid_capture(paypal, order)
    send(capture_event(capture_id, order.number, "68.00"), status=200)
    refund = refund_event(capture_id, order.number, "68.00")
    del refund["resource"]["custom_id"], refund["resource"]["invoice_id"]
    assert send(refund, status=200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "refunded"


def test_partial_refund_keeps_the_order_and_a_full_one_revokes(send, paypal, order, dbsession):
    capture_id = paid_capture(paypal, order)
    send(capture_event(capture_id, order.number, "68.00"), status=200)
    partial = refund_event(capture_id, order.number, "10.00")
    # Revokes nothing; the order's license goes to the admin's review list.
    assert send(partial, status=200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "paid"
    assert {e.status for e in dbsession.scalars(select(Entitlement))} == {"active"}
    assert {lic.status for lic in dbsession.scalars(select(License))} == {"active"}
    row = event_row(dbsession, partial["id"])
    assert row.status == "processed"
    assert row.last_error == "partial refund: 1000 of 6800; licenses held for review"
    # A second partial refund: PayPal states the cumulative amount, now the whole total.
    rest = refund_event(capture_id, order.number, "58.00")
    rest["resource"]["seller_payable_breakdown"]["total_refunded_amount"]["value"] = "68.00"
    assert send(rest, status=200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "refunded"
    dbsession.expire_all()
    assert {e.status for e in dbsession.scalars(select(Entitlement))} == {"revoked"}
    assert {lic.status for lic in dbsession.scalars(select(License))} == {"revoked"}


def test_refund_in_another_currency_does_not_revoke(send, paypal, order, dbsession):
    capture_id = paid_capture(paypal, order)
    send(capture_event(capture_id, order.number, "68.00"), status=200)
    odd = refund_event(capture_id, order.number, "99.00", currency="USD")
    assert send(odd, status=200).json["status"] == "ignored"
    assert order_status(dbsession, order.number) == "paid"


def test_refund_for_an_unknown_capture_answers_409(send, catalogue):
    send(refund_event(new_id(), "ORD-NOPE-00000"), status=409)


def test_dispute_puts_on_hold_and_resolution_decides(send, paypal, order, dbsession):
    capture_id = paid_capture(paypal, order)
    send(capture_event(capture_id, order.number, "68.00"), status=200)
    dispute = dispute_event(capture_id, order.number, "68.00")
    assert send(dispute, status=200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "disputed"
    assert {e.status for e in dbsession.scalars(select(Entitlement))} == {"on_hold"}
    assert {lic.status for lic in dbsession.scalars(select(License))} == {"suspended"}

    won = dispute_event(capture_id, order.number, "68.00")
    won["event_type"] = "CUSTOMER.DISPUTE.RESOLVED"
    won["resource"]["dispute_outcome"] = {"outcome_code": "RESOLVED_SELLER_FAVOUR"}
    assert send(won, status=200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "paid"
    dbsession.expire_all()
    assert {e.status for e in dbsession.scalars(select(Entitlement))} == {"active"}


def test_dispute_found_by_seller_transaction_alone(send, paypal, order, dbsession):
    capture_id = paid_capture(paypal, order)
    send(capture_event(capture_id, order.number, "68.00"), status=200)
    dispute = dispute_event(capture_id, order.number)
    txn = dispute["resource"]["disputed_transactions"][0]
    del txn["custom"], txn["invoice_number"]
    assert send(dispute, status=200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "disputed"


def test_other_event_types_are_ignored(send, catalogue):
    from fakes.paypal import event

    payload = event("BILLING.PLAN.CREATED", {"id": "P-1"}, "plan")
    assert send(payload, status=200).json == {"received": True, "status": "ignored"}


def test_webhook_without_webhook_id_answers_503(make_app, wallet_settings, pki, cert_url):
    app = make_app(**{**wallet_settings, "cmsshop.walletprovider.webhook_id": ""})
    body = body_of(capture_event(new_id(), "ORD-X", "1.00"))
    response = webtest.TestApp(app).post(
        ROUTE, body, headers=signed(pki, cert_url, body), status=503
    )
    assert response.json["code"] == "webhook_not_configured"


def test_admin_saved_webhook_id_takes_over(
    wallet_app, admin, pki, cert_url, paypal, order, dbsession
):
    client = new_client(wallet_app)
    client.login(admin.email)
    client.put_json(
        "/api/admin/settings/payments", {"walletprovider": {"webhookId": "WH-SAVED"}}, status=200
    )
    capture_id = paid_capture(paypal, order)
    body = body_of(capture_event(capture_id, order.number, "68.00"))
    hook = webtest.TestApp(wallet_app)
    hook.post(ROUTE, body, headers=signed(pki, cert_url, body), status=400)
    response = hook.post(
        ROUTE, body, headers=signed(pki, cert_url, body, webhook_id="WH-SAVED"), status=200
    )
    assert response.json["status"] == "processed"
    shown = client.get("/api/admin/settings/payments").json["walletprovider"]
    assert shown["webhookId"] == "WH-SAVED" and shown["clientSecret"].startswith("****")
    assert "test-client-secret" not in str(shown)
    bad = client.put_json(
        "/api/admin/settings/payments", {"walletprovider": {"certHosts": ["com"]}}, status=422
    )
    assert "walletprovider.certHosts" in bad.json["errors"]


def test_rejected_delivery_is_reprocessed_once_the_webhook_id_is_fixed(
    make_app, wallet_settings, admin, pki, cert_url, paypal, order, dbsession
):
    """An operator typed the wrong Webhook ID: PayPal's delivery is rejected and kept; once
    fixed, reprocess re-verifies the stored delivery (its age no longer matters)."""
    app = make_app(**{**wallet_settings, "cmsshop.walletprovider.signature_tolerance": "60"})
    capture_id = paid_capture(paypal, order)
    body = body_of(capture_event(capture_id, order.number, "68.00"))
    old = "2020-01-01T00:00:00Z"  # long past any tolerance
    headers = signed(pki, cert_url, body, webhook_id="WH-REAL-ONE", transmission_time=old)
    webtest.TestApp(app).post(ROUTE, body, headers=headers, status=400)
    dbsession.commit()
    row = dbsession.scalar(select(PaymentEvent))
    assert row.status == "rejected"

    client = new_client(app)
    client.login(admin.email)
    client.put_json(
        "/api/admin/settings/payments", {"walletprovider": {"webhookId": "WH-REAL-ONE"}}
    )
    result = client.post(f"/api/admin/payment-events/{row.id}/reprocess", status=200).json
    assert result["status"] == "processed"
    assert order_status(dbsession, order.number) == "paid"
    # The same delivery sent again now is too old: refused, nothing changes.
    webtest.TestApp(app).post(ROUTE, body, headers=headers, status=400)
    assert counts(dbsession)["fulfilments"] == 1


def test_card_and_wallet_payments_in_one_run(
    make_app,
    wallet_settings,
    card_settings,
    fake_stripe,
    paypal,
    pki,
    cert_url,
    dbsession,
    catalogue,
    customer,
):
    """Two providers, two orders, one app: each paid through its own webhook."""
    app = make_app(**{**card_settings, **wallet_settings})
    client = webtest.TestApp(app)
    card_order = make_order(dbsession, customer, ("pixel-forge",), provider="cardprovider")
    wallet_order = make_order(
        dbsession, customer, ("site-guard",), provider="walletprovider", checkout_id=new_id()
    )

    session = fake_stripe.add_session(session_object(card_order.number, card_order.total))
    body, headers = card_delivery(card_event("checkout.session.completed", session))
    card = client.post("/api/webhooks/cardprovider", body, headers=headers, status=200)
    capture_id = paid_capture(paypal, wallet_order, value="49.00")
    wallet_body = body_of(capture_event(capture_id, wallet_order.number, "49.00"))
    wallet = client.post(ROUTE, wallet_body, headers=signed(pki, cert_url, wallet_body), status=200)

    assert card.json["status"] == wallet.json["status"] == "processed"
    assert order_status(dbsession, card_order.number) == "paid"
    assert order_status(dbsession, wallet_order.number) == "paid"
    fulfilments = {f.provider: f for f in dbsession.scalars(select(Fulfilment))}
    assert set(fulfilments) == {"cardprovider", "walletprovider"}
    assert fulfilments["walletprovider"].payment_reference == capture_id
    assert fulfilments["cardprovider"].payment_reference == session["payment_intent"]
    numbers = sorted(i.number for i in dbsession.scalars(select(Invoice)))
    assert [n[-6:] for n in numbers] == ["000001", "000002"]
    assert counts(dbsession)["licenses"] == 2
    # A wallet capture naming an order placed with the card provider is not delivered.
    card_pending = make_order(dbsession, customer, ("themes",), provider="cardprovider")
    capture = paid_capture(paypal, card_pending, value="19.00")
    stray = body_of(capture_event(capture, card_pending.number, "19.00"))
    response = client.post(ROUTE, stray, headers=signed(pki, cert_url, stray), status=200)
    assert response.json["status"] == "needs_review"
    assert order_status(dbsession, card_pending.number) == "needs_review"


# --- checkout ----------------------------------------------------------------------------------


@pytest.fixture
def buyer(wallet_app, customer, catalogue):
    client = new_client(wallet_app)
    client.login(customer.email)
    return client


def test_checkout_returns_the_paypal_approval_url(buyer, paypal, dbsession, send):
    response = buyer.post_json(
        "/api/store/checkout",
        {
            "billing": BILLING,
            "items": [{"product": "site-guard"}],
            "currency": "EUR",
            "provider": "walletprovider",
        },
        status=201,
    )
    body = response.json
    number = body["order"]["number"]
    assert body["order"]["provider"] == "walletprovider" and body["order"]["status"] == "pending"
    assert body["sandbox"] is False
    created = paypal.bodies[-1]
    assert created["path"] == "/v2/checkout/orders"
    unit = created["body"]["purchase_units"][0]
    assert unit["custom_id"] == unit["invoice_id"] == number
    assert unit["amount"]["value"] == "49.00" and unit["amount"]["currency_code"] == "EUR"
    paypal_order_id = next(iter(paypal.orders))
    assert body["redirectUrl"] == f"https://www.paypal.com/checkoutnow?token={paypal_order_id}"
    dbsession.commit()
    stored = dbsession.scalar(select(Order).where(Order.number == number))
    assert stored.provider_checkout_id == paypal_order_id

    # The buyer approves (not payment), we capture, the capture event pays.
    approved = order_approved_event(paypal_order_id, number, "49.00")
    assert send(approved, status=200).json["status"] == "processed"
    assert order_status(dbsession, number) == "pending"
    assert len(paypal.captures_of(paypal_order_id)) == 1
    capture = next(iter(paypal.captures.values()))
    payload = capture_event(capture["id"], number, "49.00")
    payload["resource"]["supplementary_data"]["related_ids"]["order_id"] = paypal_order_id
    assert send(payload, status=200).json["status"] == "processed"
    assert order_status(dbsession, number) == "paid"


def test_checkout_when_paypal_is_down_answers_503(buyer, paypal, dbsession):
    paypal.fail_status = 500
    response = buyer.post_json(
        "/api/store/checkout",
        {
            "billing": BILLING,
            "items": [{"product": "themes"}],
            "currency": "EUR",
            "provider": "walletprovider",
        },
        status=503,
    )
    assert response.json["code"] == "provider_unavailable"
    dbsession.commit()
    assert dbsession.scalar(select(Order.status)) == "cancelled"


def test_checkout_without_credentials_in_development_gives_the_sandbox(
    make_app, wallet_settings, customer, catalogue
):
    settings = {**wallet_settings, "cmsshop.walletprovider.client_secret": ""}
    client = new_client(make_app(**settings))
    client.login(customer.email)
    body = client.post_json(
        "/api/store/checkout",
        {"billing": BILLING, "items": [{"product": "themes"}], "provider": "walletprovider"},
        status=201,
    ).json
    assert body["sandbox"] is True and "/api/store/checkout/sandbox/" in body["redirectUrl"]


# --- concurrency (PostgreSQL) -----------------------------------------------------------------


@requires_postgresql
def test_concurrent_deliveries_fulfil_exactly_once(
    wallet_app, paypal, pki, cert_url, order, dbsession
):
    """The same event 12 times at once plus 4 other events for the same capture, each a
    separately signed delivery, over real HTTP against a multi-threaded server."""
    capture_id = paid_capture(paypal, order)
    same = capture_event(capture_id, order.number, "68.00")
    others = [capture_event(capture_id, order.number, "68.00") for _ in range(4)]
    payloads = [same] * 12 + others
    with serve(wallet_app) as url:

        def deliver(payload):
            body = body_of(payload)
            response = requests.post(
                url + ROUTE, data=body, headers=signed(pki, cert_url, body), timeout=60
            )
            return payload["id"], response.status_code, response.json().get("status")

        with concurrent.futures.ThreadPoolExecutor(max_workers=len(payloads)) as pool:
            results = list(pool.map(deliver, payloads))
    assert all(code == 200 for _, code, _ in results), results
    assert {status for _, _, status in results} <= {"processed", "duplicate"}
    # Deliveries of the winning event may all answer "processed" (it is that event's
    # outcome); every other event is a duplicate; the rows exist exactly once.
    winners = {event_id for event_id, _, status in results if status == "processed"}
    assert len(winners) == 1, results
    assert counts(dbsession) == {
        "paid": 1,
        "fulfilments": 1,
        "invoices": 1,
        "entitlements": 2,
        "licenses": 1,
        "events": 5,
    }
    fulfilment = dbsession.scalar(select(Fulfilment))
    winner = dbsession.scalar(select(PaymentEvent).where(PaymentEvent.event_id.in_(winners)))
    assert fulfilment.payment_event_id == winner.id and winner.status == "processed"
    statuses = sorted(r.status for r in dbsession.scalars(select(PaymentEvent)))
    assert statuses == ["duplicate"] * 4 + ["processed"]


def test_redeliveries_in_sequence_fulfil_exactly_once(send, paypal, order, dbsession):
    """The same guarantee without concurrency (runs on SQLite too)."""
    capture_id = paid_capture(paypal, order)
    payloads = [capture_event(capture_id, order.number, "68.00") for _ in range(3)]
    statuses = [send(p, status=200).json["status"] for p in payloads + payloads]
    assert statuses == ["processed"] + ["duplicate"] * 5
    assert counts(dbsession)["fulfilments"] == 1 and counts(dbsession)["invoices"] == 1


# --- simulate-payment ---------------------------------------------------------------------------


def test_simulate_payment_pays_through_the_real_route(
    make_app, tmp_path, database_url, storage_dir, dbsession, catalogue, customer, capsys
):
    """As in development: the cmsshop-admin command signs with the development PKI and
    serves the certificate itself; the running server verifies it in full (allow-list,
    TLS, chain, name, signature) before the order is paid."""
    port = free_port()
    ca_bundle = tmp_path / "walletprovider-dev" / "ca.pem"
    wallet = {
        "cmsshop.walletprovider.webhook_id": "WH-DEVELOPMENT",
        "cmsshop.walletprovider.cert_hosts": f"paypal.com localhost:{port}",
        "cmsshop.walletprovider.ca_bundle": str(ca_bundle),
        "cmsshop.payments.trust_verified_events": "true",
    }
    order = make_order(dbsession, customer, ("site-guard",), provider="walletprovider")
    ini = tmp_path / "dev.ini"
    ini.write_text(
        "[app:main]\nuse = egg:cmsshop\ncmsshop.environment = development\n"
        f"cmsshop.database_url = {database_url}\n"
        "cmsshop.secret = test-secret-0123456789-abcdefghijklmnopqrstuvwxyz\n"
        f"cmsshop.storage_dir = {storage_dir}\n"
        "cmsshop.modules = store webhooks.cardprovider webhooks.walletprovider\n"
        + "".join(f"{k} = {v}\n" for k, v in wallet.items())
        + f"\n[alembic]\nscript_location = {ROOT}/alembic\n"
    )
    from cmsshop.scripts.admin import main

    with serve(make_app(**wallet)) as url:
        code = main([str(ini), "simulate-payment", order.number, "--url", url])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    assert "-> 200" in out.out and '"processed"' in out.out
    assert order_status(dbsession, order.number) == "paid"
    assert ca_bundle.exists()


def test_queued_approval_and_capture_go_through_the_worker(
    make_app, wallet_settings, pki, cert_url, paypal, order, dbsession
):
    """Queued processing, the second provider: the approval and the capture's COMPLETED
    event are both answered 'queued'; the worker asks the capture once and then
    fulfils once, through the same state machine."""
    from cmsshop.services.payments.events.queue import process_due_events
    from cmsshop.services.payments.registry import REGISTRY_KEY

    app = make_app(**wallet_settings, **{"cmsshop.payments.webhook_processing": "queued"})
    client = webtest.TestApp(app)

    def post(payload):
        body = body_of(payload)
        return client.post(ROUTE, body, headers=signed(pki, cert_url, body), status=200).json

    def work():
        return process_due_events(app.registry, app.registry[REGISTRY_KEY])

    paypal_order = order.provider_checkout_id
    paypal.add_order(paypal_order, order.number, "68.00")
    approved = order_approved_event(paypal_order, order.number, "68.00")
    assert post(approved) == {"received": True, "status": "queued"}
    assert paypal.captures == {}  # nothing asked of PayPal in the request
    assert work() == {"processed": 1}
    assert len(paypal.captures_of(paypal_order)) == 1
    assert order_status(dbsession, order.number) == "pending"

    capture_id = next(iter(paypal.captures))
    completed = capture_event(capture_id, order.number, "68.00")
    completed["resource"]["supplementary_data"]["related_ids"]["order_id"] = paypal_order
    assert post(completed)["status"] == "queued"
    assert post(completed)["status"] == "queued"  # redelivered before the worker ran
    assert work() == {"processed": 1}
    assert order_status(dbsession, order.number) == "paid"
    assert counts(dbsession)["fulfilments"] == 1
    assert post(completed)["status"] == "duplicate"
    assert work() == {}
