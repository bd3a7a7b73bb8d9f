"""Stripe-scheme verification of the card webhook: every rule, through the real route,
with signatures made by the stripe library."""

from __future__ import annotations

import json
import time

import pytest
import stripe
from fakes.shop import counts, event_row, make_order, order_status
from fakes.stripe_api import (
    PREVIOUS_SECRET,
    SECRET,
    delivery,
    event,
    session_object,
    sign,
)
from sqlalchemy import select

from cmsshop.models import PaymentEvent
from cmsshop.services.payments.base import NotConfigured, SignatureInvalid
from cmsshop.services.payments.cardprovider import CardProvider, compute_signature


@pytest.fixture
def paid_event(dbsession, catalogue, customer, fake_stripe):
    """A pending order, the provider's record of its paid session, and the event."""
    order = make_order(dbsession, customer)
    session = fake_stripe.add_session(session_object(order.number, order.total))
    return order, event("checkout.session.completed", session)


def test_valid_signature_from_the_stripe_library_is_accepted(webhook, paid_event, dbsession):
    order, payload = paid_event
    body, headers = delivery(payload)
    # The stripe library itself agrees the delivery is authentic.
    assert (
        stripe.Webhook.construct_event(body, headers["Stripe-Signature"], SECRET).id
        == payload["id"]
    )
    response = webhook(body, headers, status=200)
    assert response.json == {"received": True, "status": "processed"}
    assert order_status(dbsession, order.number) == "paid"


def test_our_signature_matches_the_stripe_library():
    body = b'{"id": "evt_1", "type": "x"}'
    timestamp = 1_700_000_000
    header = stripe.WebhookSignature.generate_signature_header(body.decode(), SECRET, timestamp)
    assert header == f"t={timestamp},v1={compute_signature(SECRET, timestamp, body)}"


def test_previous_secret_is_accepted_during_rotation(webhook, paid_event, dbsession):
    order, payload = paid_event
    body, headers = delivery(payload, secret=PREVIOUS_SECRET)
    assert webhook(body, headers, status=200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "paid"


def test_unknown_secret_is_rejected_and_logged_without_secret(webhook, paid_event, dbsession):
    order, payload = paid_event
    body, headers = delivery(payload, secret="whsec_someone_else_0123456789")
    response = webhook(body, headers, status=400)
    assert response.json["code"] == "invalid_signature"
    assert response.json["status"] == "rejected"
    row = dbsession.scalar(select(PaymentEvent).where(PaymentEvent.status == "rejected"))
    assert row is not None and "no v1 signature matches" in row.last_error
    for secret in (SECRET, PREVIOUS_SECRET):
        assert secret not in (row.last_error + row.payload + (row.headers or ""))
    assert row.event_id.startswith("unverified-")  # the claimed id is not trusted
    assert order_status(dbsession, order.number) == "pending"


def test_one_byte_body_change_is_rejected(webhook, paid_event, dbsession):
    order, payload = paid_event
    body, headers = delivery(payload)
    tampered = body.replace(b'"amount_total": 4900', b'"amount_total": 4901')
    assert len(tampered) == len(body) and tampered != body
    assert webhook(tampered, headers, status=400).json["code"] == "invalid_signature"
    flipped = body[:-2] + bytes([body[-2] ^ 1]) + body[-1:]
    assert webhook(flipped, headers, status=400).json["code"] == "invalid_signature"
    assert order_status(dbsession, order.number) == "pending"
    assert counts(dbsession)["fulfilments"] == 0


def test_stale_timestamp_is_rejected(webhook, paid_event, dbsession):
    order, payload = paid_event
    body, headers = delivery(payload, timestamp=int(time.time()) - 301)
    response = webhook(body, headers, status=400)
    assert response.json["code"] == "invalid_signature"
    row = dbsession.scalar(select(PaymentEvent).where(PaymentEvent.status == "rejected"))
    assert "tolerance" in row.last_error
    body, headers = delivery(payload, timestamp=int(time.time()) - 250)
    assert webhook(body, headers, status=200).json["status"] == "processed"


def test_timestamp_far_in_the_future_is_rejected(webhook, paid_event):
    _, payload = paid_event
    body, headers = delivery(payload, timestamp=int(time.time()) + 3600)
    assert webhook(body, headers, status=400).json["code"] == "invalid_signature"


def test_tolerance_is_configurable(make_app, card_settings, paid_event):
    import webtest

    app = webtest.TestApp(
        make_app(**card_settings, **{"cmsshop.cardprovider.signature_tolerance": "30"})
    )
    _, payload = paid_event
    body, headers = delivery(payload, timestamp=int(time.time()) - 60)
    app.post("/api/webhooks/cardprovider", body, headers=headers, status=400)


def test_several_v1_signatures_one_valid(webhook, paid_event):
    _, payload = paid_event
    body = json.dumps(payload).encode()
    t = int(time.time())
    good = compute_signature(SECRET, t, body)
    header = f"t={t},v1={'0' * 64},v1={good},v0={'1' * 64}"
    assert webhook(body, {"Stripe-Signature": header}, status=200).json["status"] == "processed"


def test_v0_signature_is_ignored(webhook, paid_event):
    _, payload = paid_event
    body = json.dumps(payload).encode()
    t = int(time.time())
    # A correct HMAC presented under the v0 scheme does not count.
    header = f"t={t},v0={compute_signature(SECRET, t, body)}"
    assert (
        webhook(body, {"Stripe-Signature": header}, status=400).json["code"] == "invalid_signature"
    )


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "garbage",
        "v1=" + "a" * 64,  # no timestamp
        "t=abc,v1=" + "a" * 64,
        "t=1,t=2,v1=" + "a" * 64,  # two timestamps
        "t=" + str(int(time.time())),  # no v1
        "t=" + str(int(time.time())) + ",v1=nothex",
        "t=1," + "v1=" + "a" * 64 * 100,
    ],
)
def test_malformed_headers_are_rejected(webhook, paid_event, header):
    _, payload = paid_event
    body = json.dumps(payload).encode()
    headers = {} if header is None else {"Stripe-Signature": header}
    assert webhook(body, headers, status=400).json["code"] == "invalid_signature"


def test_signed_body_that_is_not_a_json_event_is_rejected(webhook, catalogue):
    for body in (b"\xff\xfe not utf-8", b"[1, 2]", b'{"type": "x"}', b"{truncated"):
        t = int(time.time())
        headers = {"Stripe-Signature": f"t={t},v1={compute_signature(SECRET, t, body)}"}
        assert webhook(body, headers, status=400).json["code"] == "invalid_signature"


def test_non_utf8_garbage_is_logged_safely(webhook, dbsession, catalogue):
    body = b"\x00\xff" * 100
    webhook(body, {"Stripe-Signature": sign(b"other")}, status=400)
    row = dbsession.scalar(select(PaymentEvent).where(PaymentEvent.status == "rejected"))
    assert row is not None and "\x00" not in row.payload


def test_huge_body_is_refused(webhook, catalogue):
    body = b"{" + b" " * (1024 * 1024 + 10) + b"}"
    response = webhook(body, {"Stripe-Signature": sign(b"x")}, status=413)
    assert response.json["code"] == "payload_too_large"


def test_missing_secret_answers_503_not_configured(make_app, paid_event, dbsession):
    import webtest

    app = webtest.TestApp(make_app(**{"cmsshop.cardprovider.webhook_secrets": ""}))
    _, payload = paid_event
    body, headers = delivery(payload)
    response = app.post("/api/webhooks/cardprovider", body, headers=headers, status=503)
    assert response.json["code"] == "webhook_not_configured"
    assert "Retry-After" in response.headers
    assert counts(dbsession)["events"] == 0


def test_get_is_not_allowed(webhook, card_app):
    import webtest

    response = webtest.TestApp(card_app).get("/api/webhooks/cardprovider", status=405)
    assert response.json["code"] == "method_not_allowed"


def test_event_id_and_type_must_be_present():
    provider = CardProvider()
    config = {"webhookSecrets": [SECRET], "signatureTolerance": 300}
    for payload in (
        {"type": "x"},
        {"id": "evt_1"},
        {"id": 5, "type": "x"},
        {"id": "e" * 300, "type": "x"},
    ):
        body = json.dumps(payload).encode()
        with pytest.raises(SignatureInvalid):
            provider.verify({"Stripe-Signature": sign(body)}, body, config)
    with pytest.raises(NotConfigured):
        provider.verify({"Stripe-Signature": sign(b"{}")}, b"{}", {"webhookSecrets": []})


def test_rejected_event_is_visible_to_admin(webhook, paid_event, admin_app, dbsession):
    _, payload = paid_event
    body, headers = delivery(payload, secret="whsec_wrong_0123456789abcdef")
    webhook(body, headers, status=400)
    items = admin_app.get("/api/admin/payment-events?status=rejected").json["items"]
    assert len(items) == 1 and items[0]["type"] == "checkout.session.completed"
    assert event_row(dbsession, payload["id"]) is None  # logged under an id of its own
