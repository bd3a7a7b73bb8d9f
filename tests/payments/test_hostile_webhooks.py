"""Hostile webhook traffic: unsigned deliveries must not grow the database
without bound, and a correctly signed event the database cannot store must be logged
and answered 4xx (so the provider stops retrying) instead of failing with a 500."""

from __future__ import annotations

import hashlib
import json

import pytest
import webtest
from fakes.paypal import WALLET_ROUTE, body_of, capture_event, new_id, signed
from fakes.shop import counts, make_order, order_status
from fakes.stripe_api import delivery, event, session_object, sign
from helpers.clients import new_client, page_client
from sqlalchemy import func, select

from cmsshop.models import PaymentEvent

CARD_ROUTE = "/api/webhooks/cardprovider"
KIB = 1024
MIB = 1024 * KIB
# Everything a rejected row may hold, whatever the caller sent (payload, headers, error).
MAX_STORED_PER_REJECTED = 6 * KIB


def stored_bytes(row: PaymentEvent) -> int:
    """The bytes a row's caller-controlled text columns take."""
    return sum(
        len((value or "").encode("utf-8"))
        for value in (row.payload, row.headers, row.last_error, row.event_id, row.event_type)
    )


def rejected_rows(dbsession) -> list[PaymentEvent]:
    dbsession.commit()  # a fresh snapshot
    return list(dbsession.scalars(select(PaymentEvent).where(PaymentEvent.status == "rejected")))


def big_body(size: int) -> bytes:
    """A JSON body of exactly ``size`` bytes, shaped like an event."""
    head = b'{"id": "evt_forged", "type": "checkout.session.completed", "pad": "'
    return head + b"x" * (size - len(head) - 2) + b'"}'


# --- class 2: rejected deliveries are bounded ---------------------------------------------


@pytest.mark.parametrize("size", [60 * KIB, MIB - 64], ids=["60KiB", "1MiB"])
def test_a_burst_of_unsigned_deliveries_stores_at_most_a_few_kib_each(card_app, dbsession, size):
    """200 forged deliveries up to the body limit from 200 addresses, so the per-address
    limit does not hide anything: together they add well under 1 MiB."""
    body = big_body(size)
    for index in range(200):
        client = page_client(card_app, REMOTE_ADDR=f"10.1.{index // 250}.{index % 250 + 1}")
        response = client.post(
            CARD_ROUTE, body, headers={"Stripe-Signature": sign(b"other")}, status=400
        )
        assert response.json["code"] == "invalid_signature"
    rows = rejected_rows(dbsession)
    assert len(rows) == 200
    assert max(stored_bytes(row) for row in rows) <= MAX_STORED_PER_REJECTED
    assert sum(stored_bytes(row) for row in rows) <= MIB
    row = rows[0]
    assert row.payload_sha256 == hashlib.sha256(body).hexdigest()
    assert f"{len(body)} bytes" in row.last_error
    assert row.payload == body[:512].decode()  # an excerpt, not the body


def test_rejected_delivery_keeps_only_allow_listed_headers_each_capped(card_app, dbsession):
    body = b'{"id": "evt_x", "type": "checkout.session.completed"}'
    headers = {
        "Stripe-Signature": "t=1,v1=" + "a" * (20 * KIB),
        "Content-Type": "application/json",
        "User-Agent": "Stripe/1.0 " + "u" * (20 * KIB),
        "X-Padding": "p" * (20 * KIB),
        "X-Forwarded-Host": "evil.example",
        "Cookie": "session=secret-cookie",
        "Authorization": "Bearer secret-token",
    }
    headers.update({f"X-Extra-{i}": "y" * 1000 for i in range(40)})
    webtest.TestApp(card_app).post(CARD_ROUTE, body, headers=headers, status=400)
    [row] = rejected_rows(dbsession)
    kept = json.loads(row.headers)
    assert {name.lower() for name in kept} == {"stripe-signature", "content-type", "user-agent"}
    assert len(kept["stripe-signature"]) == 1024 and len(kept["user-agent"]) == 200
    assert "secret" not in row.headers
    assert stored_bytes(row) <= MAX_STORED_PER_REJECTED


def test_rejected_wallet_delivery_is_bounded_too(wallet_app, dbsession, pki, cert_url):
    body = big_body(MIB - 64)
    headers = signed(pki, cert_url, b"another body")  # a real signature, of other bytes
    headers["X-Padding"] = "p" * (64 * KIB)
    webtest.TestApp(wallet_app).post(WALLET_ROUTE, body, headers=headers, status=400)
    [row] = rejected_rows(dbsession)
    assert stored_bytes(row) <= MAX_STORED_PER_REJECTED
    assert "paypal-transmission-sig" in {name.lower() for name in json.loads(row.headers)}
    assert "x-padding" not in row.headers.lower()


def test_small_rejected_delivery_is_kept_whole_for_reprocess(card_app, dbsession):
    body = json.dumps(event("checkout.session.completed", {"id": "cs_1"})).encode()
    forged = {"Stripe-Signature": sign(body, "whsec_other_0123456789")}
    webtest.TestApp(card_app).post(CARD_ROUTE, body, headers=forged, status=400)
    [row] = rejected_rows(dbsession)
    assert row.payload == body.decode()
    assert row.event_type == "checkout.session.completed"


@pytest.mark.parametrize("limit", [1, 3])
def test_rejected_deliveries_are_rate_limited_per_address(
    make_app, card_settings, limit, dbsession
):
    app = make_app(**card_settings, **{"cmsshop.webhooks.rejected_per_ip": str(limit)})
    attacker = page_client(app, REMOTE_ADDR="203.0.113.9")
    forged = {"Stripe-Signature": sign(b"other")}
    for _ in range(limit):
        attacker.post(CARD_ROUTE, big_body(4 * KIB), headers=forged, status=400)
    for _ in range(3):
        refused = attacker.post(CARD_ROUTE, big_body(64 * KIB), headers=forged, status=429)
        assert refused.json["code"] == "rate_limited"
        assert int(refused.headers["Retry-After"]) >= 1
        assert refused.content_type == "application/json"
    assert len(rejected_rows(dbsession)) == limit  # nothing written past the limit
    # Another address is not affected.
    page_client(app, REMOTE_ADDR="198.51.100.7").post(CARD_ROUTE, b"{}", headers=forged, status=400)
    assert len(rejected_rows(dbsession)) == limit + 1


def test_a_limited_address_still_gets_its_valid_deliveries_through(
    make_app, card_settings, dbsession, catalogue, customer, fake_stripe
):
    """Only rejected deliveries count: a provider address that sent a few bad ones (a
    secret being rotated) is not locked out of real payments."""
    app = make_app(**card_settings, **{"cmsshop.webhooks.rejected_per_ip": "1"})
    client = page_client(app, REMOTE_ADDR="192.0.2.10")
    forged = {"Stripe-Signature": sign(b"other")}
    client.post(CARD_ROUTE, b"{}", headers=forged, status=400)
    client.post(CARD_ROUTE, b"{}", headers=forged, status=429)
    order = make_order(dbsession, customer)
    session = fake_stripe.add_session(session_object(order.number, order.total))
    body, headers = delivery(event("checkout.session.completed", session))
    assert client.post(CARD_ROUTE, body, headers=headers, status=200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "paid"


# --- class 7: verified events the database cannot store -------------------------------------

UNSTORABLE = {"nul": "\x00", "lone surrogate": "\ud800"}


@pytest.mark.parametrize("bad", UNSTORABLE.values(), ids=UNSTORABLE.keys())
@pytest.mark.parametrize("where", ["type", "id", "order"])
def test_signed_card_event_with_unstorable_text_is_logged_and_422(
    webhook, dbsession, catalogue, customer, fake_stripe, bad, where
):
    order = make_order(dbsession, customer)
    session = fake_stripe.add_session(session_object(order.number, order.total))
    payload = event("checkout.session.completed", session)
    if where == "type":
        payload["type"] += bad
    elif where == "id":
        payload["id"] += bad
    elif where == "order":
        session["client_reference_id"] = order.number + bad
        session["metadata"] = {"orderNumber": order.number + bad}
    body, headers = delivery(payload)
    for _ in range(2):  # the provider's redelivery gets the same answer
        response = webhook(body, headers, status=422)
        assert response.json["code"] == "unprocessable_event"
    dbsession.commit()  # a fresh snapshot
    rows = list(dbsession.scalars(select(PaymentEvent)))
    assert len(rows) == 1
    assert rows[0].status == "ignored" and "unprocessable" in rows[0].last_error
    assert rows[0].attempts == 2
    assert rows[0].payload_sha256 == hashlib.sha256(body).hexdigest()
    assert order_status(dbsession, order.number) == "pending"
    assert counts(dbsession)["fulfilments"] == 0


@pytest.mark.parametrize("bad", UNSTORABLE.values(), ids=UNSTORABLE.keys())
def test_unstorable_text_in_a_field_nobody_reads_does_not_block_the_payment(
    webhook, dbsession, catalogue, customer, fake_stripe, bad
):
    """The body is stored as its (escaped, valid) text; only the fields we store or act
    on must be storable, so a payment is not lost over a customer's odd description."""
    order = make_order(dbsession, customer)
    session = fake_stripe.add_session(session_object(order.number, order.total))
    payload = event("checkout.session.completed", session)
    payload["data"]["object"]["description"] = f"a{bad}b"
    body, headers = delivery(payload)
    assert webhook(body, headers, status=200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "paid"


@pytest.mark.parametrize("bad", UNSTORABLE.values(), ids=UNSTORABLE.keys())
@pytest.mark.parametrize("where", ["event_type", "id", "custom_id"])
def test_signed_wallet_event_with_unstorable_text_is_logged_and_422(
    wallet_app, dbsession, catalogue, customer, pki, cert_url, paypal, bad, where
):
    order = make_order(dbsession, customer, provider="walletprovider", checkout_id=new_id())
    payload = capture_event(new_id(), order.number, "10.00")
    if where == "custom_id":
        payload["resource"]["custom_id"] = order.number + bad
        payload["resource"]["invoice_id"] = order.number + bad
    else:
        payload[where] += bad
    body = body_of(payload)
    client = webtest.TestApp(wallet_app)
    response = client.post(WALLET_ROUTE, body, headers=signed(pki, cert_url, body), status=422)
    assert response.json["code"] == "unprocessable_event"
    dbsession.commit()  # a fresh snapshot
    [row] = dbsession.scalars(select(PaymentEvent))
    assert row.status == "ignored" and "unprocessable" in row.last_error
    assert row.provider == "walletprovider"
    assert order_status(dbsession, order.number) == "pending"


def test_event_log_still_lists_an_unprocessable_event(card_app, admin, webhook, dbsession):
    card_admin = new_client(card_app)
    card_admin.login(admin.email)
    payload = event("checkout.session.completed\x00", {"id": "cs_1"})
    webhook(*delivery(payload), status=422)
    items = card_admin.get("/api/admin/payment-events").json["items"]
    assert [item["status"] for item in items] == ["ignored"]
    assert "\x00" not in json.dumps(items, ensure_ascii=False)
    assert dbsession.scalar(select(func.count()).select_from(PaymentEvent)) == 1
