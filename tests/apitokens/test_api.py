"""The API tokens' admin API, and what a token may do with the rest of the admin API."""

from __future__ import annotations

import datetime as dt
import hashlib

import pytest
from helpers.apitokens import bearer, future, iso, make_token
from helpers.clients import new_client
from sqlalchemy import select

from cmsshop.models import ApiToken, AuditEntry, User

LIST_FIELDS = {
    "id",
    "name",
    "prefix",
    "scopes",
    "createdAt",
    "createdBy",
    "expiresAt",
    "lastUsedAt",
    "lastUsedIp",
    "revokedAt",
    "status",
    "active",
}


def stored_rows(dbsession) -> list[ApiToken]:
    """Every token as the database holds it now (a new snapshot, fresh rows)."""
    dbsession.rollback()
    dbsession.expire_all()
    return list(dbsession.scalars(select(ApiToken)))


def test_create_answers_the_token_once_and_stores_only_its_hash(admin_app, admin, dbsession):
    expires = future(10)
    response = admin_app.post_json(
        "/api/admin/api-tokens",
        {"name": "Accounting export", "scopes": ["orders", "read"], "expiresAt": iso(expires)},
        status=201,
    )
    body = response.json
    value = body["token"]
    assert value.startswith("cms_") and len(value) == 47
    assert response.headers["Cache-Control"] == "private, no-store"
    assert set(body) == LIST_FIELDS | {"token"}
    assert body["scopes"] == ["orders", "read"]
    assert body["createdBy"] == {"id": admin.id, "email": admin.email}
    assert body["expiresAt"] == iso(expires)
    assert body["active"] is True and body["status"] == "active"
    assert body["prefix"] == value[:8] and body["lastUsedAt"] is None

    (row,) = stored_rows(dbsession)
    assert row.token_hash == hashlib.sha256(value.encode()).hexdigest()
    for column in ApiToken.__table__.columns:
        assert value not in str(getattr(row, column.key)), column.key

    listed = admin_app.get("/api/admin/api-tokens")
    assert listed.headers["Cache-Control"] == "private, no-store"
    (item,) = listed.json["items"]
    assert set(item) == LIST_FIELDS
    assert value not in listed.text and row.token_hash not in listed.text
    assert item["id"] == body["id"] and item["name"] == "Accounting export"


def test_a_new_token_works_at_once(admin_app, app):
    value = admin_app.post_json(
        "/api/admin/api-tokens", {"name": "Reader", "scopes": ["read"]}, status=201
    ).json["token"]
    client = new_client(app)
    assert client.get("/api/admin/legal", headers=bearer(value)).status_int == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "x", "scopes": ["read"], "extra": 1}, "body"),
        ({"name": "", "scopes": ["read"]}, "name"),
        ({"name": "   ", "scopes": ["read"]}, "name"),
        ({"name": "x" * 101, "scopes": ["read"]}, "name"),
        ({"name": 7, "scopes": ["read"]}, "name"),
        ({"scopes": ["read"]}, "name"),
        ({"name": "x"}, "scopes"),
        ({"name": "x", "scopes": []}, "scopes"),
        ({"name": "x", "scopes": "read"}, "scopes"),
        ({"name": "x", "scopes": ["root"]}, "scopes.0"),
        ({"name": "x", "scopes": [1]}, "scopes.0"),
        ({"name": "x", "scopes": ["read"] * 7}, "scopes"),
        ({"name": "x", "scopes": ["read"], "expiresAt": "2020-01-01T00:00:00Z"}, "expiresAt"),
        ({"name": "x", "scopes": ["read"], "expiresAt": "tomorrow"}, "expiresAt"),
        ({"name": "x", "scopes": ["read"], "expiresAt": "2030-01-01"}, "expiresAt"),
        ({"name": "x", "scopes": ["read"], "expiresAt": 1893456000}, "expiresAt"),
        ({"name": "x", "scopes": ["read"], "expiresAt": "2999-01-01T00:00:00Z"}, "expiresAt"),
    ],
)
def test_bad_bodies_are_refused_with_422(admin_app, dbsession, body, field):
    response = admin_app.post_json("/api/admin/api-tokens", body, status=422)
    assert response.json["code"] == "validation_failed"
    assert field in response.json["errors"], response.json
    assert stored_rows(dbsession) == []


def test_a_body_that_is_not_an_object_or_not_json_is_refused(admin_app):
    assert admin_app.post_json("/api/admin/api-tokens", ["read"], status=422).json["errors"]
    admin_app.post("/api/admin/api-tokens", "{", content_type="application/json", status=400)
    admin_app.post("/api/admin/api-tokens", "name=x", status=415)
    huge = {"name": "x", "scopes": ["read"], "pad": "y" * 3_000_000}
    admin_app.post_json("/api/admin/api-tokens", huge, status=413)


def test_revoke_stops_the_token_and_is_idempotent(admin_app, admin, app, dbsession):
    token, value = make_token(dbsession, admin, ["read"])
    client = new_client(app)
    client.get("/api/admin/legal", headers=bearer(value), status=200)
    first = admin_app.delete(f"/api/admin/api-tokens/{token.id}", status=200).json
    assert first["revokedAt"] and first["active"] is False and first["status"] == "revoked"
    again = admin_app.delete(f"/api/admin/api-tokens/{token.id}", status=200).json
    assert again["revokedAt"] == first["revokedAt"]
    refused = client.get("/api/admin/legal", headers=bearer(value), status=401)
    assert refused.json["code"] == "invalid_api_token"
    assert refused.headers["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("raw", ["999999", "abc", "0", "-1", "99999999999"])
def test_revoking_an_unknown_token_is_404(admin_app, raw):
    response = admin_app.delete(f"/api/admin/api-tokens/{raw}", status=404)
    assert response.json["code"] == "api_token_not_found"


def test_token_management_needs_a_session(app, admin, dbsession):
    token, value = make_token(dbsession, admin, ["all"])
    client = new_client(app)
    for method, url, body in [
        ("get", "/api/admin/api-tokens", None),
        ("post", "/api/admin/api-tokens", {"name": "successor", "scopes": ["all"]}),
        ("delete", f"/api/admin/api-tokens/{token.id}", None),
    ]:
        if body is None:
            response = getattr(client, method)(url, headers=bearer(value), status=403)
        else:
            response = client.post_json(url, body, headers=bearer(value), status=403)
        assert response.json["code"] == "insufficient_scope"
        assert response.json["scope"] == "session"
    assert len(stored_rows(dbsession)) == 1
    assert stored_rows(dbsession)[0].revoked_at is None


def test_the_api_needs_an_admin(customer_app, testapp):
    customer_app.get("/api/admin/api-tokens", status=403)
    testapp.get("/api/admin/api-tokens", status=401)
    customer_app.post_json("/api/admin/api-tokens", {"name": "x", "scopes": ["read"]}, status=403)


def test_expired_and_revoked_tokens_are_401(app, admin, dbsession):
    _, expired = make_token(dbsession, admin, ["all"], name="old")
    row = stored_rows(dbsession)[0]
    row.expires_at = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    dbsession.commit()
    revoked_row, revoked = make_token(dbsession, admin, ["all"], name="revoked")
    revoked_row.revoked_at = dt.datetime.now(dt.UTC)
    dbsession.commit()
    client = new_client(app)
    for value in (expired, revoked, "cms_" + "x" * 43, "not-a-token", "cms_short"):
        response = client.get("/api/admin/legal", headers=bearer(value), status=401)
        assert response.json["code"] == "invalid_api_token"


@pytest.mark.parametrize("header", ["Basic dXNlcjpwYXNz", "Bearer", "Bearer   ", "cms_abc"])
def test_a_malformed_authorization_header_on_the_admin_api_is_401(app, header):
    response = new_client(app).get(
        "/api/admin/legal", headers={"Authorization": header}, status=401
    )
    assert response.json["code"] == "invalid_api_token"


def test_the_token_of_a_demoted_or_deleted_admin_stops_working(app, admin, make_user, dbsession):
    other = make_user("second@example.com", role="admin")
    _, value = make_token(dbsession, admin, ["all"])
    _, other_value = make_token(dbsession, other, ["all"])
    client = new_client(app)
    client.get("/api/admin/legal", headers=bearer(value), status=200)
    dbsession.get(User, admin.id).role = "customer"
    dbsession.get(User, other.id).deleted_at = dt.datetime.now(dt.UTC)
    dbsession.commit()
    for token in (value, other_value):
        response = client.get("/api/admin/legal", headers=bearer(token), status=401)
        assert response.json["code"] == "invalid_api_token"


def test_the_cookie_is_ignored_when_a_bearer_is_sent(admin_app, admin, dbsession):
    _, reader = make_token(dbsession, admin, ["read"])
    # The admin's own session would allow this publication; the token decides alone.
    response = admin_app.post_json(
        "/api/admin/legal/terms",
        {"title": "Terms", "body": "# Terms"},
        headers=bearer(reader),
        status=403,
    )
    assert response.json["code"] == "insufficient_scope" and response.json["scope"] == "settings"
    bad = admin_app.get("/api/admin/legal", headers=bearer("cms_" + "y" * 43), status=401)
    assert bad.json["code"] == "invalid_api_token"
    admin_app.get("/api/admin/legal", status=200)


def test_a_token_needs_no_csrf_token_and_a_session_still_does(app, admin_app, admin, dbsession):
    _, value = make_token(dbsession, admin, ["settings"])
    client = new_client(app)
    client.post_json(
        "/api/admin/legal/terms",
        {"title": "Terms", "body": "# One"},
        headers=bearer(value),
        status=201,
    )
    refused = admin_app.post_json(
        "/api/admin/legal/terms",
        {"title": "Terms", "body": "# Two"},
        headers={"X-CSRF-Token": "wrong"},
        status=403,
    )
    assert refused.json["code"] == "csrf_failed"


def test_the_header_means_nothing_outside_the_admin_api(app, customer_app, admin, dbsession):
    _, value = make_token(dbsession, admin, ["all"])
    anonymous = new_client(app)
    response = anonymous.get("/api/account/profile", headers=bearer(value), status=401)
    assert response.json["code"] == "not_authenticated"
    # A customer's own session works whatever Authorization header is sent along.
    customer_app.get("/api/account/profile", headers=bearer("garbage"), status=200)
    customer_app.get("/api/account/profile", headers=bearer(value), status=200)
    # The console pages are a session's too.
    assert anonymous.get("/admin/api-tokens", headers=bearer(value), status=303)


def test_last_use_time_and_address_are_kept(app, admin, dbsession):
    token, value = make_token(dbsession, admin, ["read"])
    assert token.last_used_at is None
    client = new_client(app)
    client.extra_environ["REMOTE_ADDR"] = "192.0.2.7"
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    client.get("/api/admin/legal", headers=bearer(value), status=200)
    (row,) = stored_rows(dbsession)
    assert row.last_used_ip == "192.0.2.7"
    assert row.last_used_at >= before
    client.extra_environ["REMOTE_ADDR"] = "198.51.100.9"
    client.get("/api/admin/legal", headers=bearer(value), status=200)
    assert stored_rows(dbsession)[0].last_used_ip == "198.51.100.9"


def test_the_list_shows_last_use(admin_app, admin, app, dbsession):
    _, value = make_token(dbsession, admin, ["read"])
    new_client(app).get("/api/admin/legal", headers=bearer(value), status=200)
    (item,) = admin_app.get("/api/admin/api-tokens").json["items"]
    assert item["lastUsedIp"] == "127.0.0.1" and item["lastUsedAt"].endswith("Z")


def test_each_token_is_rate_limited(make_app, admin, dbsession):
    app = make_app(**{"cmsshop.api_tokens.rate_limit": "2"})
    _, value = make_token(dbsession, admin, ["read"])
    _, other = make_token(dbsession, admin, ["read"], name="other")
    client = new_client(app)
    client.get("/api/admin/legal", headers=bearer(value), status=200)
    client.get("/api/admin/legal", headers=bearer(value), status=200)
    refused = client.get("/api/admin/legal", headers=bearer(value), status=429)
    assert refused.json["code"] == "rate_limited"
    assert int(refused.headers["Retry-After"]) >= 1
    # Another token has its own allowance.
    client.get("/api/admin/legal", headers=bearer(other), status=200)


def test_uploads_take_a_token_in_place_of_a_session(app, admin, dbsession):
    _, catalogue = make_token(dbsession, admin, ["catalogue"])
    _, reader = make_token(dbsession, admin, ["read"], name="reader")
    client = new_client(app)
    url = "/api/admin/products/no-such-product/images"
    # The body limit of an upload is decided from the headers, before the body is read.
    assert client.post(url, b"x", headers=bearer(catalogue), status=404).json["code"]
    refused = client.post(url, b"x", headers=bearer(reader), status=403)
    assert refused.json["scope"] == "catalogue"
    client.post(url, b"x", headers=bearer("cms_" + "z" * 43), status=401)


def test_creating_and_revoking_are_audited_without_the_token(admin_app, dbsession):
    value = admin_app.post_json(
        "/api/admin/api-tokens", {"name": "Audited", "scopes": ["read"]}, status=201
    ).json["token"]
    (row,) = stored_rows(dbsession)
    admin_app.delete(f"/api/admin/api-tokens/{row.id}", status=200)
    dbsession.rollback()
    entries = list(
        dbsession.scalars(select(AuditEntry).where(AuditEntry.object_type == "api_token"))
    )
    assert len(entries) >= 2, [(e.action, e.object_type) for e in entries]
    for entry in entries:
        assert entry.object_id == str(row.id)
        assert value not in str(entry.summary) and row.token_hash not in str(entry.summary)
