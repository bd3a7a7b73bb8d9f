"""The webhook endpoints' admin API: the secret shown once, strict bodies, the refused
URLs of production, the delivery log and redelivery, and who may call it."""

from __future__ import annotations

import datetime as dt

import pytest
from helpers.app import TEST_SECRET
from helpers.clients import new_client
from sqlalchemy import select

from cmsshop.models import WebhookDelivery, WebhookEndpoint, WebhookEvent
from cmsshop.services.webhooks import signing

BASE = "/api/admin/webhooks"
BODY = {"url": "http://127.0.0.1:9/hook", "eventTypes": ["order.paid", "license.created"]}


def create(admin_app, **fields):
    return admin_app.post_json(BASE, {**BODY, **fields}, status=201).json


def stored(dbsession, endpoint_id):
    dbsession.rollback()
    dbsession.expire_all()
    return dbsession.get(WebhookEndpoint, endpoint_id)


def test_create_answers_the_secret_once_and_stores_it_encrypted(admin_app, dbsession):
    response = admin_app.post_json(BASE, {**BODY, "description": "ERP"}, status=201)
    body = response.json
    assert response.headers["Cache-Control"] == "private, no-store"
    secret = body["secret"]
    assert secret.startswith("whsec_")
    assert body["eventTypes"] == ["order.paid", "license.created"]
    assert body["enabled"] is True and body["description"] == "ERP"
    assert body["secretHint"] == f"whsec_…{secret[-4:]}"
    row = stored(dbsession, body["id"])
    assert secret not in row.secret_encrypted
    assert signing.decrypt_secret(TEST_SECRET, row.secret_encrypted) == secret
    shown = admin_app.get(f"{BASE}/{body['id']}").json
    assert "secret" not in shown and secret not in admin_app.get(BASE).text
    assert shown["secretHint"] == body["secretHint"]


@pytest.mark.parametrize(
    "body",
    [
        {"url": "http://127.0.0.1:9/hook"},
        {**BODY, "eventTypes": []},
        {**BODY, "eventTypes": ["order.shipped"]},
        {**BODY, "eventTypes": "order.paid"},
        {**BODY, "eventTypes": ["webhook.test"]},
        {**BODY, "url": ""},
        {**BODY, "url": "ftp://example.com/x"},
        {**BODY, "url": "http://user:pw@127.0.0.1/x"},
        {**BODY, "url": "x" * 3000},
        {**BODY, "enabled": "yes"},
        {**BODY, "secret": "whsec_mine"},
        {**BODY, "description": "a\x00b"},
        [BODY],
    ],
)
def test_hostile_bodies_are_422(admin_app, dbsession, body):
    response = admin_app.post_json(BASE, body, status=422)
    assert response.json["code"] == "validation_failed"
    assert dbsession.scalar(select(WebhookEndpoint.id)) is None


def test_not_json_and_malformed(admin_app):
    admin_app.post(BASE, "url=x", content_type="application/x-www-form-urlencoded", status=415)
    admin_app.post(BASE, b"{", content_type="application/json", status=400)


def test_production_refuses_private_and_plain_http_urls(make_app, admin, settings):
    app = make_app(**{"cmsshop.webhooks.allow_private_addresses": "false"})
    client = new_client(app)
    client.login(admin.email)
    for url in (
        "https://127.0.0.1/hook",
        "https://10.0.0.5/hook",
        "https://[::1]/hook",
        "https://169.254.169.254/latest",
        "https://localhost/hook",
        "http://93.184.216.34/hook",
    ):
        response = client.post_json(BASE, {**BODY, "url": url}, status=422)
        assert "url" in response.json["errors"], url
    client.post_json(BASE, {**BODY, "url": "https://93.184.216.34/hook"}, status=201)


def test_patch_changes_fields_and_reenabling_clears_failures(admin_app, dbsession):
    endpoint_id = create(admin_app)["id"]
    changed = admin_app.patch_json(
        f"{BASE}/{endpoint_id}", {"enabled": False, "eventTypes": ["ticket.created"]}
    ).json
    assert changed["enabled"] is False and changed["disabledReason"]
    assert changed["eventTypes"] == ["ticket.created"]
    row = stored(dbsession, endpoint_id)
    row.failing_since = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    dbsession.commit()
    again = admin_app.patch_json(f"{BASE}/{endpoint_id}", {"enabled": True}).json
    assert again["enabled"] is True
    assert again["failingSince"] is None and again["disabledAt"] is None
    assert again["disabledReason"] is None
    admin_app.patch_json(f"{BASE}/{endpoint_id}", {"url": 5}, status=422)
    admin_app.patch_json(f"{BASE}/{endpoint_id}", {"eventTypes": []}, status=422)
    admin_app.patch_json(f"{BASE}/{endpoint_id}", {"nope": 1}, status=422)


def test_rotate_keeps_the_previous_secret_for_the_overlap(admin_app, dbsession):
    created = create(admin_app)
    rotated = admin_app.post_json(f"{BASE}/{created['id']}/rotate-secret", {"overlapHours": 48})
    assert rotated.headers["Cache-Control"] == "private, no-store"
    new = rotated.json["secret"]
    assert new != created["secret"] and rotated.json["previousSecretExpiresAt"]
    row = stored(dbsession, created["id"])
    assert signing.decrypt_secret(TEST_SECRET, row.secret_encrypted) == new
    assert signing.decrypt_secret(TEST_SECRET, row.previous_secret_encrypted) == created["secret"]
    hours = (row.previous_secret_expires_at - row.created_at).total_seconds() / 3600
    assert 47.9 < hours < 48.1
    immediate = admin_app.post_json(f"{BASE}/{created['id']}/rotate-secret", {"overlapHours": 0})
    assert immediate.json["previousSecretExpiresAt"] is None
    assert stored(dbsession, created["id"]).previous_secret_encrypted is None
    default = admin_app.post(f"{BASE}/{created['id']}/rotate-secret").json
    assert default["previousSecretExpiresAt"]
    for hours in (-1, 169, "24", None):
        admin_app.post_json(
            f"{BASE}/{created['id']}/rotate-secret", {"overlapHours": hours}, status=422
        )


def test_test_event_goes_to_this_endpoint_only_even_disabled(admin_app, dbsession):
    first = create(admin_app, enabled=False)["id"]
    other = create(admin_app)["id"]
    answer = admin_app.post(f"{BASE}/{first}/test", status=202).json
    assert answer["eventType"] == "webhook.test"
    dbsession.rollback()
    deliveries = list(dbsession.scalars(select(WebhookDelivery)))
    assert [d.endpoint_id for d in deliveries] == [first]
    assert other not in [d.endpoint_id for d in deliveries]
    event = dbsession.scalar(select(WebhookEvent))
    assert event.public_id == answer["eventId"]


def test_deliveries_log_and_redeliver(admin_app, dbsession):
    endpoint_id = create(admin_app)["id"]
    admin_app.post(f"{BASE}/{endpoint_id}/test", status=202)
    log = admin_app.get(f"{BASE}/{endpoint_id}/deliveries").json
    assert log["total"] == 1
    item = log["items"][0]
    assert item["eventType"] == "webhook.test" and item["status"] == "pending"
    assert item["attemptLog"] == []
    dbsession.rollback()
    row = dbsession.get(WebhookDelivery, item["id"])
    row.status, row.attempts = "failed", 9
    dbsession.commit()
    again = admin_app.post(
        f"{BASE}/{endpoint_id}/deliveries/{item['id']}/redeliver", status=202
    ).json
    assert again["status"] == "pending" and again["attempts"] == 0
    admin_app.get(f"{BASE}/{endpoint_id}/deliveries?perPage=0", status=422)
    admin_app.patch_json(f"{BASE}/{endpoint_id}", {"enabled": False})
    refused = admin_app.post(f"{BASE}/{endpoint_id}/deliveries/{item['id']}/redeliver", status=409)
    assert refused.json["code"] == "conflict"


def test_unknown_ids_are_404_with_their_codes(admin_app):
    endpoint_id = create(admin_app)["id"]
    for method, path in (
        ("get", f"{BASE}/999"),
        ("get", f"{BASE}/abc"),
        ("delete", f"{BASE}/999"),
        ("post", f"{BASE}/999/test"),
        ("post", f"{BASE}/999/rotate-secret"),
        ("get", f"{BASE}/999/deliveries"),
    ):
        response = getattr(admin_app, method)(path, status=404)
        assert response.json["code"] == "webhook_endpoint_not_found", path
    other = create(admin_app)["id"]
    admin_app.post(f"{BASE}/{other}/test", status=202)
    delivery_id = admin_app.get(f"{BASE}/{other}/deliveries").json["items"][0]["id"]
    for path in (
        f"{BASE}/{endpoint_id}/deliveries/{delivery_id}/redeliver",
        f"{BASE}/{endpoint_id}/deliveries/99999/redeliver",
    ):
        response = admin_app.post(path, status=404)
        assert response.json["code"] == "webhook_delivery_not_found"


def test_delete_removes_the_endpoint_and_its_log(admin_app, dbsession):
    endpoint_id = create(admin_app)["id"]
    admin_app.post(f"{BASE}/{endpoint_id}/test", status=202)
    assert admin_app.delete(f"{BASE}/{endpoint_id}").json == {"id": endpoint_id, "deleted": True}
    dbsession.rollback()
    assert dbsession.get(WebhookEndpoint, endpoint_id) is None
    assert dbsession.scalar(select(WebhookDelivery.id)) is None
    admin_app.get(f"{BASE}/{endpoint_id}", status=404)


def test_only_admins(app, customer_app, testapp, admin_app):
    endpoint_id = create(admin_app)["id"]
    anonymous = new_client(app)
    for client, status in ((customer_app, 403), (anonymous, 401)):
        client.get(BASE, status=status)
        client.get(f"{BASE}/{endpoint_id}", status=status)
        client.get(f"{BASE}/{endpoint_id}/deliveries", status=status)
    customer_app.post_json(BASE, BODY, status=403)
    customer_app.post(f"{BASE}/{endpoint_id}/rotate-secret", status=403)
    customer_app.post(f"{BASE}/{endpoint_id}/test", status=403)
    customer_app.delete(f"{BASE}/{endpoint_id}", status=403)
