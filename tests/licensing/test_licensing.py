"""The licensing routes through the real app: activation rules, seats, nonces, rate
limits, leases verified with real signatures, the error table, audit and 503s."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os

import pytest
from fakes.vault import fake_vault, remote_settings
from helpers.app import serve
from helpers.licensing import (
    IP,
    assert_error,
    call_body,
    count,
    http_post,
    lease_claims,
    make_license,
    make_product,
    new_nonce,
    post,
    race,
    runtime,
)
from sqlalchemy import func, select, update

from cmsshop.models import Activation, License, LicenseAuditEntry, LicenseNonce
from cmsshop.services.licensing.issuing import generate_license_key
from cmsshop.services.licensing.records import fingerprint_hash
from cmsshop.util import utcnow

# --- fixtures -------------------------------------------------------------------------------


# --- activation -----------------------------------------------------------------------------


def test_activate_answers_201_with_a_signed_lease(client, license, dbsession):
    body = call_body(license)
    response = post(client, "activate", body, 201)
    data = response.json
    assert response.headers["Cache-Control"] == "no-store"
    assert data["license"] == {
        "product": "site-guard-pro",
        "status": "active",
        "expiresAt": None,
        "maxActivations": 2,
        "activationsUsed": 1,
        "features": [],
    }
    activation = data["activation"]
    assert activation["domain"] == "customer-shop.com"
    assert activation["environment"] == "production"
    assert activation["lastValidatedAt"] is None
    assert activation["activatedAt"].endswith("Z")

    header, claims = lease_claims(client, data["lease"])
    assert header["alg"] == "EdDSA" and header["typ"] == "license-lease+jwt"
    assert header["kid"] == client.get("/api/license/jwks.json").json["keys"][0]["kid"]
    assert claims["iss"] == "http://localhost"
    assert claims["aud"] == "site-guard-pro"
    assert claims["sub"] == str(license.id)
    assert claims["act"] == activation["id"]
    assert claims["dom"] == "customer-shop.com"
    assert claims["fp"] == fingerprint_hash("install-0001")
    assert claims["nonce"] == body["nonce"]
    assert claims["env"] == "production"
    assert claims["lic"] == {
        "status": "active",
        "expiresAt": None,
        "maxActivations": 2,
        "activationsUsed": 1,
        "features": [],
    }
    assert claims["nbf"] == claims["iat"]
    assert claims["exp"] - claims["iat"] == 7 * 86400
    assert claims["iat"] < claims["refresh_after"] < claims["exp"]
    assert "deactivated" not in claims
    expires = dt.datetime.fromtimestamp(claims["exp"], dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert data["leaseExpiresAt"] == expires

    row = dbsession.scalar(select(Activation))
    assert row.fingerprint_sha256 == fingerprint_hash("install-0001") and row.active


def test_reactivating_the_same_installation_uses_no_new_seat(client, license, dbsession):
    first = post(client, "activate", call_body(license), 201).json
    again = post(client, "activate", call_body(license), 200).json
    assert again["activation"]["id"] == first["activation"]["id"]
    assert again["license"]["activationsUsed"] == 1
    assert lease_claims(client, again["lease"])[1]["act"] == first["activation"]["id"]
    assert count(dbsession, Activation) == 1


def test_form_encoded_bodies_work_like_json(client, license):
    body = call_body(license, domain="customer-shop.com")
    created = post(client, "activate", body, 201, form=True).json
    validated = post(client, "validate", call_body(license), 200, form=True).json
    assert validated["activation"]["id"] == created["activation"]["id"]
    assert lease_claims(client, validated["lease"])[1]["dom"] == "customer-shop.com"


def test_last_seat_then_limit_reached_with_counts_and_hints(client, dbsession, product):
    license = make_license(dbsession, product, max_activations=1)
    post(client, "activate", call_body(license), 201)
    response = post(client, "activate", call_body(license, fingerprint="install-0002"), 409)
    body = assert_error(response, 409, "activation_limit_reached")
    assert body["activationsUsed"] == 1 and body["maxActivations"] == 1
    assert any("deactivate" in hint.lower() for hint in body["hints"])
    assert count(dbsession, Activation) == 1


def test_zero_paid_seats_still_allows_staging(client, dbsession, product):
    license = make_license(dbsession, product, max_activations=0)
    post(client, "activate", call_body(license), 409)
    post(client, "activate", call_body(license, domain="staging.customer-shop.com"), 201)


def test_staging_and_local_sites_use_their_own_cap(make_lic_app, dbsession, product):
    client = runtime(make_lic_app(**{"cmsshop.license_staging_cap": "2"}))
    license = make_license(dbsession, product, max_activations=1)
    post(client, "activate", call_body(license), 201)
    staging = post(
        client,
        "activate",
        call_body(license, fingerprint="stage-install", domain="https://staging.customer-shop.com"),
        201,
    ).json
    assert staging["activation"]["environment"] == "staging"
    assert staging["license"]["activationsUsed"] == 1  # paid seats only
    local = post(
        client,
        "activate",
        call_body(license, fingerprint="laptop-install", domain="localhost:8080"),
        201,
    ).json
    assert local["activation"]["environment"] == "local"
    body = assert_error(
        post(
            client,
            "activate",
            call_body(license, fingerprint="ci-install", domain="shop.test"),
            409,
        ),
        409,
        "activation_limit_reached",
    )
    assert body["maxActivations"] == 2 and body["activationsUsed"] == 2
    assert body["environment"] == "local"
    # a .dev site is production, and the paid seat is taken
    post(
        client,
        "activate",
        call_body(license, fingerprint="dev-tld-install", domain="my-site.dev"),
        409,
    )


def test_the_client_cannot_choose_its_environment(client, license):
    body = call_body(license, environment="staging")
    response = post(client, "activate", body, 422)
    errors = assert_error(response, 422, "validation_failed")["errors"]
    assert "environment" in errors["body"]  # unknown fields are refused, never used


def test_configurable_staging_prefixes(make_lic_app, dbsession, product):
    client = runtime(make_lic_app(**{"cmsshop.license_staging_prefixes": "preview."}))
    license = make_license(dbsession, product, max_activations=1)
    preview = call_body(license, fingerprint="p-install", domain="preview.customer-shop.com")
    assert post(client, "activate", preview, 201).json["activation"]["environment"] == "staging"
    staging = call_body(license, fingerprint="s-install", domain="staging.customer-shop.com")
    assert post(client, "activate", staging, 201).json["activation"]["environment"] == "production"


def test_domain_is_normalised_and_moves_with_the_installation(client, license, dbsession):
    body = call_body(license, domain="HTTPS://WWW.Customer-Shop.COM.:443/shop?x=1")
    first = post(client, "activate", body, 201).json
    assert first["activation"]["domain"] == "customer-shop.com"
    post(client, "validate", call_body(license, domain="customer-shop.com"), 200)
    # the site moved: validating from the new domain is refused until activated there
    moved_body = call_body(license, domain="new-shop.com")
    assert_error(post(client, "validate", moved_body, 404), 404, "activation_not_found")
    moved = post(client, "activate", call_body(license, domain="new-shop.com"), 200).json
    assert moved["activation"]["id"] == first["activation"]["id"]
    assert moved["activation"]["domain"] == "new-shop.com"
    assert moved["license"]["activationsUsed"] == 1
    post(client, "validate", call_body(license, domain="https://new-shop.com/"), 200)


# --- validate / deactivate ------------------------------------------------------------------


def test_validate_refreshes_last_validated_at(client, license, dbsession):
    post(client, "activate", call_body(license), 201)
    body = call_body(license)
    data = post(client, "validate", body, 200).json
    assert data["activation"]["lastValidatedAt"] is not None
    assert lease_claims(client, data["lease"])[1]["nonce"] == body["nonce"]
    dbsession.expire_all()
    assert dbsession.scalar(select(Activation)).last_validated_at is not None


def test_validate_unknown_installation_is_404(client, license):
    post(client, "activate", call_body(license), 201)
    body = call_body(license, fingerprint="never-activated")
    assert_error(post(client, "validate", body, 404), 404, "activation_not_found")
    assert_error(post(client, "deactivate", body, 404), 404, "activation_not_found")


def test_deactivate_frees_the_seat_idempotently(client, dbsession, product):
    license = make_license(dbsession, product, max_activations=1)
    first = post(client, "activate", call_body(license), 201).json
    post(client, "activate", call_body(license, fingerprint="install-0002"), 409)

    gone = post(client, "deactivate", call_body(license), 200).json
    assert gone["deactivated"] is True
    assert gone["activation"]["id"] == first["activation"]["id"]
    assert gone["activation"]["active"] is False and gone["activation"]["deactivatedAt"]
    assert gone["license"]["activationsUsed"] == 0
    claims = lease_claims(client, gone["lease"])[1]
    assert claims["deactivated"] is True and claims["act"] == first["activation"]["id"]

    again = post(client, "deactivate", call_body(license), 200).json
    assert again["deactivated"] is True
    assert again["activation"]["deactivatedAt"] == gone["activation"]["deactivatedAt"]

    assert_error(post(client, "validate", call_body(license), 404), 404, "activation_not_found")
    post(client, "activate", call_body(license, fingerprint="install-0002"), 201)
    # the first installation comes back only if a seat is free
    post(client, "activate", call_body(license), 409)


def test_reactivation_after_deactivation_is_201(client, license):
    first = post(client, "activate", call_body(license), 201).json
    post(client, "deactivate", call_body(license), 200)
    back = post(client, "activate", call_body(license), 201).json
    assert back["activation"]["id"] == first["activation"]["id"]
    assert back["activation"]["active"] is True and back["activation"]["deactivatedAt"] is None


# --- license state --------------------------------------------------------------------------


def test_unknown_key_is_404(client, license):
    body = call_body(license, licenseKey="AAAAA-BBBBB-CCCCC-DDDDD-EEEEE")
    for action in ("activate", "validate", "deactivate"):
        assert_error(post(client, action, body, 404), 404, "license_not_found")


def test_key_is_case_and_space_insensitive(client, license):
    body = call_body(license, licenseKey=f"  {license.key.lower()} ")
    post(client, "activate", body, 201)


def test_key_of_another_product_is_403(client, license, dbsession):
    make_product(dbsession, "pixel-forge")
    body = call_body(license, product="pixel-forge")
    assert_error(post(client, "activate", body, 403), 403, "product_mismatch")
    body = call_body(license, product="no-such-product")
    assert_error(post(client, "activate", body, 403), 403, "product_mismatch")


@pytest.mark.parametrize(
    ("status", "code"),
    [
        ("suspended", "license_suspended"),
        ("revoked", "license_revoked"),
        ("expired", "license_expired"),
    ],
)
def test_license_states_are_403(client, license, dbsession, status, code):
    post(client, "activate", call_body(license), 201)
    dbsession.execute(update(License).where(License.id == license.id).values(status=status))
    dbsession.commit()
    for action in ("activate", "validate", "deactivate"):
        assert_error(post(client, action, call_body(license), 403), 403, code)


def test_past_expiry_is_expired_even_when_status_says_active(client, dbsession, product):
    past = utcnow() - dt.timedelta(minutes=1)
    license = make_license(dbsession, product, expires_at=past, status="active")
    body = assert_error(post(client, "activate", call_body(license), 403), 403, "license_expired")
    assert "expired" in body["message"]


def test_lease_never_outlives_the_license(client, dbsession, product):
    expires = (utcnow() + dt.timedelta(days=1)).replace(microsecond=0)
    license = make_license(dbsession, product, expires_at=expires)
    data = post(client, "activate", call_body(license), 201).json
    claims = lease_claims(client, data["lease"])[1]
    assert claims["exp"] == int(expires.timestamp())
    assert claims["lic"]["expiresAt"] == data["license"]["expiresAt"]
    assert data["license"]["expiresAt"] == expires.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_lease_lifetime_is_configurable(make_lic_app, license):
    client = runtime(make_lic_app(**{"cmsshop.license_lease_lifetime": "3600"}))
    claims = lease_claims(client, post(client, "activate", call_body(license), 201).json["lease"])[
        1
    ]
    assert claims["exp"] - claims["iat"] == 3600
    assert claims["refresh_after"] - claims["iat"] == 1800


# --- nonces ---------------------------------------------------------------------------------


def test_reused_nonce_is_409(client, license, dbsession, product):
    post(client, "activate", call_body(license), 201)
    body = call_body(license)
    post(client, "validate", body, 200)
    assert_error(post(client, "validate", body, 409), 409, "nonce_reused")
    assert_error(post(client, "deactivate", body, 409), 409, "nonce_reused")
    # nonces are per license
    other = make_license(dbsession, product)
    post(client, "activate", call_body(other, nonce=body["nonce"]), 201)


def test_nonce_older_than_the_window_may_come_back(client, license, dbsession):
    post(client, "activate", call_body(license), 201)
    body = call_body(license)
    post(client, "validate", body, 200)
    old = utcnow() - dt.timedelta(hours=25)
    dbsession.execute(update(LicenseNonce).values(seen_at=old))
    dbsession.commit()
    post(client, "validate", body, 200)
    post(client, "validate", body, 409)


def test_a_refused_call_does_not_burn_its_nonce(client, license):
    body = call_body(license)
    post(client, "validate", body, 404)  # not activated yet: rolled back, nonce not kept
    post(client, "activate", body, 201)


# --- rate limits ----------------------------------------------------------------------------


def test_rate_limit_per_ip(make_lic_app, license):
    app = make_lic_app(**{"cmsshop.license_rate_per_ip": "4/60"})
    client = runtime(app)
    post(client, "activate", call_body(license), 201)
    # malformed requests count too (after the fact: they are refused before parsing ends)
    client.post("/api/license/validate", b"{", status=400, content_type="application/json")
    post(client, "validate", call_body(license), 200)
    post(client, "validate", call_body(license), 200)
    response = post(client, "validate", call_body(license), 429)
    assert_error(response, 429, "rate_limited")
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    # another IP is not affected
    post(runtime(app, "198.51.100.9"), "validate", call_body(license), 200)


def test_rate_limit_per_license_across_ips(make_lic_app, license, dbsession, product):
    app = make_lic_app(**{"cmsshop.license_rate_per_license": "3/60"})
    post(runtime(app, "198.51.100.1"), "activate", call_body(license), 201)
    post(runtime(app, "198.51.100.2"), "validate", call_body(license), 200)
    post(runtime(app, "198.51.100.3"), "validate", call_body(license), 200)
    response = post(runtime(app, "198.51.100.4"), "validate", call_body(license), 429)
    assert_error(response, 429, "rate_limited")
    assert "Retry-After" in response.headers
    other = make_license(dbsession, product)
    post(runtime(app, "198.51.100.4"), "activate", call_body(other), 201)


def test_activation_churn_is_limited_but_validate_is_not(make_lic_app, license):
    client = runtime(make_lic_app(**{"cmsshop.license_rate_churn": "3/3600"}))
    post(client, "activate", call_body(license), 201)
    post(client, "deactivate", call_body(license), 200)
    post(client, "activate", call_body(license), 201)
    response = post(client, "deactivate", call_body(license), 429)
    assert_error(response, 429, "rate_limited")
    assert int(response.headers["Retry-After"]) <= 3600
    post(client, "validate", call_body(license), 200)


# --- hostile input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "content_type", "status", "code"),
    [
        (b'{"product": "x", "licenseKey"', "application/json", 400, "malformed_json"),
        (b"\xff\xfe{}", "application/json", 400, "malformed_json"),
        (b'{"product": NaN}', "application/json", 400, "malformed_json"),
        (b"[]", "application/json", 422, "validation_failed"),
        (b'"text"', "application/json", 422, "validation_failed"),
        (b"null", "application/json", 422, "validation_failed"),
        (b"{}", "application/json", 422, "validation_failed"),
        (b"product=x", "text/plain", 415, "unsupported_media_type"),
        (b"", "", 415, "unsupported_media_type"),
        (b"--b\r\n\r\n--b--", "multipart/form-data; boundary=b", 415, "unsupported_media_type"),
        (b"product=%ff%fe", "application/x-www-form-urlencoded", 400, "malformed_form"),
        (b"\xff=\xfe", "application/x-www-form-urlencoded", 400, "malformed_form"),
        (
            b"&".join(b"f%d=1" % i for i in range(50)),
            "application/x-www-form-urlencoded",
            400,
            "malformed_form",
        ),
        (b"", "application/x-www-form-urlencoded", 422, "validation_failed"),
    ],
)
def test_bad_bodies(client, raw, content_type, status, code):
    for action in ("activate", "validate", "deactivate"):
        response = client.post(
            f"/api/license/{action}", raw, status="*", headers={"Content-Type": content_type}
        )
        assert_error(response, status, code)
        assert "<html" not in response.text.lower()


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"product": 7}, "product"),
        ({"product": ""}, "product"),
        ({"licenseKey": None}, "licenseKey"),
        ({"licenseKey": ["A"]}, "licenseKey"),
        ({"licenseKey": "K" * 65}, "licenseKey"),
        ({"domain": "not a domain"}, "domain"),
        ({"domain": "http://"}, "domain"),
        ({"domain": {"host": "a.com"}}, "domain"),
        ({"domain": "x" * 3000}, "domain"),
        ({"fingerprint": "short"}, "fingerprint"),
        ({"fingerprint": "f" * 257}, "fingerprint"),
        ({"fingerprint": "line\nbreak-id"}, "fingerprint"),
        ({"fingerprint": 12345678}, "fingerprint"),
        ({"nonce": "too-short"}, "nonce"),
        ({"nonce": "has spaces in it....."}, "nonce"),
        ({"nonce": "a+b/c=" * 4}, "nonce"),
        ({"nonce": "n" * 129}, "nonce"),
        ({"nonce": True}, "nonce"),
        ({"extra": "field"}, "extra"),
    ],
)
def test_invalid_items_are_422_with_field_errors(client, license, overrides, field):
    body = call_body(license, **overrides)
    errors = assert_error(post(client, "activate", body, 422), 422, "validation_failed")["errors"]
    assert field in errors or "body" in errors


def test_missing_items_are_named(client):
    errors = assert_error(post(client, "activate", {}, 422), 422, "validation_failed")["errors"]
    assert set(errors) == {"product", "licenseKey", "domain", "fingerprint", "nonce"}


def test_form_field_given_twice_is_422(client, license):
    body = call_body(license)
    raw = "&".join(f"{k}={v}" for k, v in body.items()) + "&nonce=" + new_nonce()
    response = client.post(
        "/api/license/activate", raw, status=422, content_type="application/x-www-form-urlencoded"
    )
    assert "nonce" in assert_error(response, 422, "validation_failed")["errors"]


def test_huge_body_is_413(client, license):
    body = call_body(license, fingerprint="f" * (2 * 1024 * 1024))
    assert_error(post(client, "activate", body, 413), 413, "payload_too_large")


def test_wrong_method_is_405(client):
    response = client.get("/api/license/activate", status=405)
    assert_error(response, 405, "method_not_allowed")
    assert response.headers["Allow"] == "POST"
    assert_error(client.post("/api/license/jwks.json", status=405), 405, "method_not_allowed")


# --- JWKS, OpenAPI, module switch ----------------------------------------------------------


def test_jwks_is_public_and_cacheable(client):
    response = client.get("/api/license/jwks.json", status=200)
    (key,) = response.json["keys"]
    assert set(key) == {"kty", "crv", "x", "kid", "alg", "use"}
    assert "max-age" in response.headers["Cache-Control"]
    client.get("/api/license/jwks.json", headers={"If-None-Match": response.etag}, status=304)


def test_openapi_documents_the_routes(client):
    doc = client.get("/api/openapi.json").json
    for action in ("activate", "validate", "deactivate"):
        operation = doc["paths"][f"/api/license/{action}"]["post"]
        content = operation["requestBody"]["content"]
        assert set(content) == {"application/json", "application/x-www-form-urlencoded"}
        assert {"200", "403", "404", "409", "415", "422", "429", "503"} <= set(
            operation["responses"]
        )
    assert "201" in doc["paths"]["/api/license/activate"]["post"]["responses"]
    assert "/api/license/jwks.json" in doc["paths"]
    assert {"LicenseRequest", "LicenseResult", "LeaseKeySet"} <= set(doc["components"]["schemas"])


def test_module_disabled_is_json_404(make_lic_app, license):
    client = runtime(make_lic_app(**{"cmsshop.modules": "store"}))
    assert_error(post(client, "activate", call_body(license), 404), 404, "module_disabled")
    assert_error(client.get("/api/license/jwks.json", status=404), 404, "module_disabled")
    assert "/api/license/activate" not in client.get("/api/openapi.json").json["paths"]


# --- audit ----------------------------------------------------------------------------------


def test_every_call_is_audited(client, license, dbsession):
    post(client, "activate", call_body(license), 201)
    post(client, "validate", call_body(license), 200)
    post(client, "validate", call_body(license, fingerprint="stranger-01"), 404)
    post(client, "validate", call_body(license, licenseKey="AAAAA-BBBBB-CCCCC-DDDDD-EEEEE"), 404)
    post(client, "deactivate", {"licenseKey": 1}, 422)
    dbsession.expire_all()
    rows = dbsession.scalars(select(LicenseAuditEntry).order_by(LicenseAuditEntry.id)).all()
    assert [(r.action, r.outcome, r.status) for r in rows] == [
        ("activate", "activated", 201),
        ("validate", "validated", 200),
        ("validate", "activation_not_found", 404),
        ("validate", "license_not_found", 404),
        ("deactivate", "validation_failed", 422),
    ]
    ok = rows[1]
    assert ok.license_id == license.id and ok.activation_id is not None
    assert ok.fingerprint_sha256 == fingerprint_hash("install-0001")
    assert ok.domain == "customer-shop.com" and ok.environment == "production"
    assert ok.ip == IP and ok.created_at is not None and ok.request_id
    assert rows[2].license_id == license.id and rows[2].fingerprint_sha256 == fingerprint_hash(
        "stranger-01"
    )
    assert rows[3].license_id is None and len(rows[3].key_hint) == 16
    assert all("install-0001" not in (r.fingerprint_sha256 or "") for r in rows)


# --- signing unavailable --------------------------------------------------------------------


def _assert_signing_unavailable(response):
    assert_error(response, 503, "signing_unavailable")
    assert int(response.headers["Retry-After"]) == 30


def test_unreadable_key_is_503_and_nothing_is_kept(client, license, key_dir, dbsession):
    post(client, "activate", call_body(license), 201)
    (key_file,) = key_dir.iterdir()
    key_file.write_text("-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n")

    body = call_body(license)
    _assert_signing_unavailable(post(client, "validate", body, 503))
    _assert_signing_unavailable(
        post(client, "activate", call_body(license, fingerprint="install-0002"), 503)
    )
    _assert_signing_unavailable(post(client, "deactivate", call_body(license), 503))
    _assert_signing_unavailable(client.get("/api/license/jwks.json", status=503))
    assert count(dbsession, Activation) == 1
    activation = dbsession.scalar(select(Activation))
    assert activation.active and activation.last_validated_at is None
    assert count(dbsession, LicenseNonce) == 1  # the first activation's only
    outcomes = dbsession.scalars(select(LicenseAuditEntry.outcome)).all()
    assert outcomes.count("signing_unavailable") == 3

    # a new key: the same request now succeeds, its nonce was never stored
    os.remove(key_file)
    post(client, "validate", body, 200)


def test_production_without_a_key_is_503_not_a_new_key(make_lic_app, license, key_dir):
    production = {"cmsshop.environment": "production", "cmsshop.password_hashing": "default"}
    client = runtime(make_lic_app(**production))
    _assert_signing_unavailable(post(client, "activate", call_body(license), 503))
    assert not key_dir.exists()
    client = runtime(make_lic_app(**{"cmsshop.license_key_autocreate": "false"}))
    _assert_signing_unavailable(post(client, "activate", call_body(license), 503))
    assert not key_dir.exists()


def test_remote_signer_end_to_end_and_503_when_it_stops(make_lic_app, license, dbsession):
    with fake_vault() as vault:
        client = runtime(make_lic_app(**remote_settings(vault)))
        data = post(client, "activate", call_body(license), 201).json
        header, claims = lease_claims(client, data["lease"])
        assert claims["act"] == data["activation"]["id"]
        assert len(vault.requests) == 1
        vault.stop()
        body = call_body(license, fingerprint="install-0002")
        _assert_signing_unavailable(post(client, "activate", body, 503))
        _assert_signing_unavailable(post(client, "validate", call_body(license), 503))
    assert count(dbsession, Activation) == 1
    assert dbsession.scalar(select(Activation)).last_validated_at is None


def test_remote_signer_answering_with_another_key_is_503(make_lic_app, license, dbsession):
    with fake_vault("wrong-key") as vault:
        client = runtime(make_lic_app(**remote_settings(vault)))
        _assert_signing_unavailable(post(client, "activate", call_body(license), 503))
    assert count(dbsession, Activation) == 0


# --- races against a live server ------------------------------------------------------------


def test_concurrent_activations_for_the_last_seat_exactly_one_wins(lic_app, dbsession, product):
    license = make_license(dbsession, product, max_activations=1)
    bodies = [call_body(license, fingerprint=f"racer-{i:04d}") for i in range(6)]
    with serve(lic_app) as base:
        results = race(f"{base}/api/license/activate", bodies)
    statuses = sorted(status for status, _ in results)
    assert statuses == [201, 409, 409, 409, 409, 409], results
    assert {body["code"] for status, body in results if status == 409} == {
        "activation_limit_reached"
    }
    assert count(dbsession, Activation, Activation.active.is_(True)) == 1


def test_activate_plans_on_one_snapshot(client, lic_app, dbsession, product, engine):
    """The lock-free plan reads the license, the installation and the seats in use as of
    one moment. Here another process activates the same installation between the plan's
    look for it and its count of seats (it happened in a CI run of four racing
    reinstalls): on PostgreSQL's per-statement snapshots the plan saw no installation but
    a full license and answered 409; on one snapshot it plans an activation, and under the
    lock finds the installation already active (200). The other process writes just
    before the app's connection sends the count of seats (the one statement that sums
    activations by environment)."""
    from sqlalchemy import event

    from cmsshop.services.licensing.domains import normalise_domain

    license = make_license(dbsession, product, max_activations=1)
    body = call_body(license)
    concurrent: list[bool] = []

    def another_process_activates_first(conn, cursor, statement, *args):
        if not concurrent and "sum(CASE WHEN" in statement:
            concurrent.append(True)
            with engine.begin() as other:
                other.execute(
                    Activation.__table__.insert().values(
                        licence_id=license.id,
                        fingerprint=body["fingerprint"],
                        fingerprint_sha256=fingerprint_hash(body["fingerprint"]),
                        domain=normalise_domain(body["domain"]),
                        environment="production",
                        active=True,
                        activated_at=utcnow(),
                    )
                )

    app_engine = lic_app.registry["cmsshop.engine"]
    event.listen(app_engine, "before_cursor_execute", another_process_activates_first)
    try:
        data = post(client, "activate", body, 200).json
    finally:
        event.remove(app_engine, "before_cursor_execute", another_process_activates_first)
    assert concurrent and data["license"]["activationsUsed"] == 1
    assert count(dbsession, Activation) == 1


def test_concurrent_reinstalls_share_one_activation(lic_app, dbsession, product):
    license = make_license(dbsession, product, max_activations=1)
    bodies = [call_body(license) for _ in range(4)]
    with serve(lic_app) as base:
        results = race(f"{base}/api/license/activate", bodies)
    assert sorted(status for status, _ in results) == [200, 200, 200, 201], results
    assert len({body["activation"]["id"] for _, body in results}) == 1
    assert count(dbsession, Activation) == 1


def test_concurrent_replays_of_one_nonce_one_wins(lic_app, license):
    with serve(lic_app) as base:
        assert http_post(f"{base}/api/license/activate", call_body(license))[0] == 201
        body = call_body(license)
        results = race(f"{base}/api/license/validate", [body] * 4)
    assert sorted(status for status, _ in results) == [200, 409, 409, 409], results


def b64url_json(segment: str) -> dict:
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))


def test_validate_purges_old_rate_windows_like_every_counted_call(
    client, license, dbsession, monkeypatch
):
    """Validate counts its calls in its own statements (cmsshop.services.licensing.
    validation); it still drops rate windows older than a day now and then."""
    import random

    from sqlalchemy import text

    assert post(client, "activate", call_body(license)).status_code == 201
    dbsession.execute(
        text("INSERT INTO rate_counters (key, window_start, count) VALUES ('old:x', 0, 1)")
    )
    dbsession.commit()
    monkeypatch.setattr(random, "random", lambda: 0.0)  # "now and then" is now
    assert post(client, "validate", call_body(license)).status_code == 200
    dbsession.rollback()
    assert (
        dbsession.execute(text("SELECT count(*) FROM rate_counters WHERE key = 'old:x'")).scalar()
        == 0
    )


def test_validate_purges_old_nonces_now_and_then(client, license, dbsession, monkeypatch):
    """The purge rides in validate's last batch (its own prepared statement on
    PostgreSQL): old nonces go, the call's own stays."""
    import random

    from sqlalchemy import text

    assert post(client, "activate", call_body(license)).status_code == 201
    license_id = dbsession.execute(
        text("SELECT id FROM licences WHERE key = :key"), {"key": license.key}
    ).scalar_one()
    dbsession.execute(
        text(
            "INSERT INTO licence_nonces (licence_id, nonce, seen_at) "
            "VALUES (:id, 'old-nonce-0000000000', :at)"
        ),
        {"id": license_id, "at": dt.datetime(2020, 1, 1, tzinfo=dt.UTC)},
    )
    dbsession.commit()
    monkeypatch.setattr(random, "random", lambda: 0.0)  # "now and then" is now
    body = call_body(license)
    assert post(client, "validate", body).status_code == 200
    dbsession.rollback()
    nonces = dbsession.execute(text("SELECT nonce FROM licence_nonces")).scalars().all()
    assert "old-nonce-0000000000" not in nonces and body["nonce"] in nonces
    # Replaying the call's nonce is still refused after the purge.
    assert post(client, "validate", body).status_code == 409


def _checkouts(app) -> list:
    """Record each pool checkout of the app's engine (one per transaction on the hot path)."""
    from sqlalchemy import event

    seen: list = []
    event.listen(app.registry["cmsshop.engine"], "checkout", lambda *args: seen.append(1))
    return seen


def _statements(app) -> list[str]:
    """The SQL text of every statement on SQLite connections checked out from now on."""
    from sqlalchemy import event

    seen: list[str] = []

    def trace(dbapi_connection, record, proxy):
        dbapi_connection.set_trace_callback(seen.append)

    def untrace(dbapi_connection, record):
        dbapi_connection.set_trace_callback(None)

    engine = app.registry["cmsshop.engine"]
    event.listen(engine, "checkout", trace)
    event.listen(engine, "checkin", untrace)
    return seen


def test_sqlite_validate_with_a_local_signer_is_one_transaction(make_lic_app, license, engine):
    """SQLite and a signer in this process: counts, lookup, lease, nonce, touch and
    audit in one transaction; a refused call keeps its count, writes nothing else."""
    if engine.dialect.name != "sqlite":
        pytest.skip("SQLite's one-transaction validate")
    app = make_lic_app(**{"cmsshop.license_rate_per_ip": "4/60"})
    client = runtime(app)
    post(client, "activate", call_body(license), 201)
    checkouts = _checkouts(app)
    body = call_body(license)
    post(client, "validate", body, 200)
    assert len(checkouts) == 1
    # Refusals (a replayed nonce, an unknown installation) count once each...
    assert_error(post(client, "validate", body, 409), 409, "nonce_reused")
    other = call_body(license, fingerprint="install-never-activated")
    assert_error(post(client, "validate", other, 404), 404, "activation_not_found")
    # ...so the fifth call of the minute is refused before any work: its counts are all
    # it runs (the refusal path is the one a flood takes).
    statements = _statements(app)
    assert_error(post(client, "validate", call_body(license), 429), 429, "rate_limited")
    assert statements and any("rate_counters" in sql for sql in statements)
    assert not any("FROM licences" in sql for sql in statements), statements
    app.registry["cmsshop.engine"].dispose()
    with app.registry["cmsshop.engine"].connect() as conn:
        nonces = conn.scalar(select(func.count()).select_from(LicenseNonce))
        outcomes = conn.scalars(select(LicenseAuditEntry.outcome)).all()
        counted = conn.exec_driver_sql(
            "SELECT sum(count) FROM rate_counters WHERE key LIKE 'license.ip:%'"
        ).scalar()
    assert nonces == 2  # the activation's and the validated call's
    assert counted == 5
    assert sorted(outcomes) == sorted(
        ["activated", "validated", "nonce_reused", "activation_not_found", "rate_limited"]
    )


def test_sqlite_validate_with_a_remote_signer_signs_outside_the_transaction(
    make_lic_app, license, engine
):
    """A remote signer may be slow: its lease is signed between the counting
    transaction and the writing one, never while SQLite's write lock is held."""
    if engine.dialect.name != "sqlite":
        pytest.skip("SQLite's one-transaction validate")
    with fake_vault() as vault:
        app = make_lic_app(**remote_settings(vault))
        client = runtime(app)
        post(client, "activate", call_body(license), 201)
        checkouts = _checkouts(app)
        post(client, "validate", call_body(license), 200)
    assert len(checkouts) == 2


def test_sqlite_validate_with_a_remote_signer_refuses_429_before_the_lookup(
    make_lic_app, license, engine
):
    """The two-transaction path: a call past a limit commits its counts and reads no
    licence row (the refusal path is the one a flood takes)."""
    if engine.dialect.name != "sqlite":
        pytest.skip("SQLite's two-transaction validate")
    with fake_vault() as vault:
        app = make_lic_app(**remote_settings(vault), **{"cmsshop.license_rate_per_ip": "2/60"})
        client = runtime(app)
        post(client, "activate", call_body(license), 201)
        post(client, "validate", call_body(license), 200)
        statements = _statements(app)
        assert_error(post(client, "validate", call_body(license), 429), 429, "rate_limited")
    assert any("rate_counters" in sql for sql in statements)
    assert not any("FROM licences" in sql for sql in statements), statements


# Which statement stored each validate's nonce, seen from the database: a statement-level
# trigger fires even when its INSERT stored no row. The app's statements are EXECUTEs of
# statements it PREPAREd, so the trigger looks up the text of the one EXECUTEd.
_NOTE_NONCE_WRITES = (
    "CREATE TABLE test_nonce_writes (id serial PRIMARY KEY, statement text, stored int)",
    "CREATE FUNCTION test_note_nonce_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "INSERT INTO test_nonce_writes (statement, stored) SELECT coalesce(("
    "SELECT string_agg(p.statement, '; ') FROM pg_prepared_statements AS p "
    "WHERE strpos(p.statement, 'INSERT INTO licence_nonces') > 0 "
    "AND current_query() ~ ('EXECUTE ' || p.name || '\\M')), current_query()), "
    "(SELECT count(*) FROM stored); RETURN NULL; END $$",
    "CREATE TRIGGER test_nonce_writes AFTER INSERT ON licence_nonces "
    "REFERENCING NEW TABLE AS stored FOR EACH STATEMENT EXECUTE FUNCTION test_note_nonce_write()",
)
_FORGET_NONCE_WRITES = (
    "DROP TRIGGER IF EXISTS test_nonce_writes ON licence_nonces",
    "DROP FUNCTION IF EXISTS test_note_nonce_write()",
    "DROP TABLE IF EXISTS test_nonce_writes",
)


def _nonce_writes(engine) -> list[tuple[str, int]]:
    """Each INSERT into the nonces that committed since the last call, in order: "one
    statement" when the same statement inserts the audit row, else "general", with the
    nonces it stored."""
    with engine.begin() as conn:
        rows = conn.exec_driver_sql(
            "DELETE FROM test_nonce_writes RETURNING id, statement, stored"
        ).all()
    return [
        (
            "one statement" if "INSERT INTO licence_audit_log" in row.statement else "general",
            row.stored,
        )
        for row in sorted(rows)
    ]


def test_postgresql_validate_writes_in_one_statement_unless_the_license_changed(
    make_lic_app, license, engine
):
    """PostgreSQL: after the counts and lookup, one statement stores the nonce, touch and
    audit row only if the license still reads the same; a replayed nonce or a license
    changed while the lease was signed writes nothing there and takes the general path
    (409, or a lease signed again for the new state)."""
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's one-statement write")
    # A remote signer, so that an admin can edit the license while its lease is signed
    # (PostgreSQL writes the same way whichever signer signs).
    with fake_vault() as vault:
        client = runtime(
            make_lic_app(**remote_settings(vault, **{"cmsshop.license_remote_timeout": "5"}))
        )
        post(client, "activate", call_body(license), 201)
        try:
            with engine.begin() as conn:
                for sql in _NOTE_NONCE_WRITES:
                    conn.exec_driver_sql(sql)
            body = call_body(license)
            post(client, "validate", body, 200)
            assert _nonce_writes(engine) == [("one statement", 1)]
            assert_error(post(client, "validate", body, 409), 409, "nonce_reused")
            # (The general path then found the nonce seen and rolled back, with its row.)
            assert _nonce_writes(engine) == [("one statement", 0)]

            # The license's flags change while the first lease is being signed.
            def an_admin_edits_the_features(signing_request: dict) -> None:
                vault.while_signing = None  # once: the lease signed again goes through
                with engine.begin() as conn:
                    conn.execute(
                        update(License).where(License.id == license.id).values(features=["sso"])
                    )

            vault.while_signing = an_admin_edits_the_features
            data = post(client, "validate", call_body(license), 200).json
            # (The general path's first try, for the old flags, rolled back with its row.)
            assert _nonce_writes(engine) == [("one statement", 0), ("general", 1)]
        finally:
            with engine.begin() as conn:
                for sql in _FORGET_NONCE_WRITES:
                    conn.exec_driver_sql(sql)
        assert lease_claims(client, data["lease"])[1]["lic"]["features"] == ["sso"]
    assert data["license"]["features"] == ["sso"]
    with engine.connect() as conn:
        outcomes = conn.scalars(select(LicenseAuditEntry.outcome)).all()
        nonces = conn.scalar(select(func.count()).select_from(LicenseNonce))
    assert sorted(outcomes) == ["activated", "nonce_reused", "validated", "validated"]
    assert nonces == 3


def test_validate_plans_its_statements_once_per_connection(client, license, engine):
    """On PostgreSQL the batches EXECUTE statements PREPAREd once per connection."""
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's prepared statements")
    from cmsshop.hotsql import _PREPARED

    assert post(client, "activate", call_body(license)).status_code == 201
    for _ in range(3):
        assert post(client, "validate", call_body(license)).status_code == 200
    names = set().union(*_PREPARED.values())
    assert len(names) >= 3  # counts and lookup, nonce and lookup, touch and audit
    # The app's connections really hold them: one of its pooled connections lists them.
    app_engine = client.app.registry["cmsshop.engine"]
    with app_engine.connect() as conn:
        held = set(conn.exec_driver_sql("SELECT name FROM pg_prepared_statements").scalars().all())
    assert held & names


def test_validate_prepares_again_when_the_session_lost_its_statements(client, license, engine):
    """DEALLOCATE ALL (an operator, a pooler) between two calls: the next call fails
    whole on its first attempt and succeeds on the retry, which prepares afresh."""
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's prepared statements")
    assert post(client, "activate", call_body(license)).status_code == 201
    assert post(client, "validate", call_body(license)).status_code == 200
    app_engine = client.app.registry["cmsshop.engine"]
    idle = [app_engine.raw_connection() for _ in range(app_engine.pool.checkedin())]
    for pooled in idle:
        pooled.driver_connection.execute("DEALLOCATE ALL")
    for pooled in idle:
        pooled.close()
    body = call_body(license)
    assert post(client, "validate", body).status_code == 200
    assert post(client, "validate", body).status_code == 409  # its nonce, stored once


def test_generated_keys_use_every_letter_at_every_place_and_never_repeat():
    from cmsshop.util import READABLE_ALPHABET

    keys = [generate_license_key() for _ in range(3000)]
    assert len(set(keys)) == len(keys)
    for key in keys[:50]:
        groups = key.split("-")
        assert [len(g) for g in groups] == [5] * 5
        assert set("".join(groups)) <= set(READABLE_ALPHABET)
    chars = ["".join(key.split("-")) for key in keys]
    # 125 random bits, five a letter: each of the 25 places takes all 32 letters (the
    # chance that one of them misses a letter in 3,000 keys is below 1e-38).
    for place in range(25):
        assert {c[place] for c in chars} == set(READABLE_ALPHABET), place
