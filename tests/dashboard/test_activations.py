"""A customer frees a seat of their license from the dashboard (JSON routes): the list of
active activations, deactivation (idempotent, audited as the customer), the product
runtime's next validate failing, and nobody else's license reachable."""

from __future__ import annotations

import pytest
from helpers.account_data import RUNTIME_IP, activate, license_call, make_account
from helpers.licensing import deactivate_path, runtime
from helpers.purchases import openapi_validator
from sqlalchemy import select

from cmsshop.models import Activation, LicenseAuditEntry
from cmsshop.services.licensing.records import fingerprint_hash

SHOP = "shop.example.com"
OLD_SHOP = "old-shop.example.com"


@pytest.fixture
def sites(app, account):
    """Two active production sites and one deactivated by its own runtime."""
    ids = {
        "shop": activate(app, account.license.key, SHOP, "install-shop-01"),
        "old": activate(app, account.license.key, OLD_SHOP, "install-old-01"),
        "gone": activate(app, account.license.key, "gone.example.com", "install-gone-01"),
    }
    license_call(
        runtime(app, RUNTIME_IP),
        "deactivate",
        account.license.key,
        "gone.example.com",
        "install-gone-01",
        200,
    )
    return ids


def activations_path(key: str) -> str:
    return f"/api/dashboard/licenses/{key}/activations"


def test_lists_the_active_activations_of_the_customers_license(customer_app, account, sites):
    response = customer_app.get(activations_path(account.license.key))
    assert response.headers["Cache-Control"] == "private, no-store"
    body = response.json
    assert body["total"] == 2 and (body["page"], body["perPage"]) == (1, 20)
    by_domain = {item["domain"]: item for item in body["items"]}
    assert set(by_domain) == {SHOP, OLD_SHOP}
    shop = by_domain[SHOP]
    assert shop["id"] == sites["shop"] and shop["active"] is True
    assert shop["environment"] == "production" and shop["deactivatedAt"] is None
    assert shop["activatedAt"].endswith("Z")
    openapi_validator(
        customer_app, "/api/dashboard/licenses/{key}/activations", "get", "200"
    ).validate(body)
    # The key as a customer may paste it: lower case, spaces around.
    pasted = f" {account.license.key.lower()} "
    assert customer_app.get(activations_path(pasted)).json["total"] == 2


def test_deactivate_frees_the_seat_and_validate_then_fails(
    app, customer_app, account, sites, dbsession
):
    key = account.license.key
    path = deactivate_path(key, sites["old"])
    body = customer_app.post(path).json
    assert body["outcome"] == "deactivated"
    assert body["activation"]["id"] == sites["old"] and body["activation"]["active"] is False
    assert body["activation"]["deactivatedAt"].endswith("Z")
    assert (body["activationsUsed"], body["maxActivations"]) == (1, 3)
    openapi_validator(
        customer_app, "/api/dashboard/licenses/{key}/activations/{id}/deactivate", "post", "200"
    ).validate(body)

    listed = customer_app.get(activations_path(key)).json["items"]
    assert [item["domain"] for item in listed] == [SHOP]
    client = runtime(app, RUNTIME_IP)
    failed = license_call(client, "validate", key, OLD_SHOP, "install-old-01", 404)
    assert failed.json["code"] == "activation_not_found"
    # The other site keeps working, and the freed seat can be taken by a new one.
    license_call(client, "validate", key, SHOP, "install-shop-01", 200)
    activate(app, account.license.key, "new-shop.example.com", "install-new-01")

    dbsession.rollback()
    assert dbsession.get(Activation, sites["old"]).active is False


def test_deactivation_is_audited_with_the_customer_as_actor(
    customer_app, account, sites, dbsession
):
    customer_app.post(
        deactivate_path(account.license.key, sites["old"]),
        headers={"X-Request-ID": "dashboard-req-1"},
    )
    dbsession.rollback()
    entry = dbsession.scalar(
        select(LicenseAuditEntry)
        .where(LicenseAuditEntry.action == "customer_deactivate")
        .order_by(LicenseAuditEntry.id)
    )
    assert (entry.outcome, entry.status) == ("deactivated", 200)
    assert entry.license_id == account.license.id and entry.activation_id == sites["old"]
    assert entry.domain == OLD_SHOP and entry.environment == "production"
    assert entry.fingerprint_sha256 == fingerprint_hash("install-old-01")
    assert entry.product == "site-guard" and len(entry.key_hint) == 16
    assert entry.ip == "127.0.0.1" and entry.request_id == "dashboard-req-1"


def test_deactivating_again_is_an_idempotent_200(customer_app, account, sites, dbsession):
    path = deactivate_path(account.license.key, sites["old"])
    first = customer_app.post(path).json
    again = customer_app.post(path).json
    assert again["outcome"] == "already_inactive"
    assert again["activation"]["deactivatedAt"] == first["activation"]["deactivatedAt"]
    # Deactivated by its own runtime before: the same answer, nothing changed.
    gone = customer_app.post(deactivate_path(account.license.key, sites["gone"])).json
    assert gone["outcome"] == "already_inactive" and gone["activationsUsed"] == 1
    dbsession.rollback()
    outcomes = dbsession.scalars(
        select(LicenseAuditEntry.outcome)
        .where(LicenseAuditEntry.action == "customer_deactivate")
        .order_by(LicenseAuditEntry.id)
    ).all()
    assert outcomes == ["deactivated", "already_inactive", "already_inactive"]


def test_another_customers_license_and_activations_are_404(
    app, customer_app, other_customer_app, other_customer, account, sites, dbsession, storage_dir
):
    key = account.license.key
    response = other_customer_app.get(activations_path(key), status=404)
    assert response.json["code"] == "license_not_found"
    response = other_customer_app.post(deactivate_path(key, sites["shop"]), status=404)
    assert response.json["code"] == "license_not_found"
    # Their own license, with an activation id of someone else's license.
    dbsession.rollback()  # a new snapshot: the app wrote since (SQLite cannot upgrade it)
    theirs = make_account(dbsession, other_customer, storage_dir, catalogue=False)
    response = other_customer_app.post(
        deactivate_path(theirs.license.key, sites["shop"]), status=404
    )
    assert response.json["code"] == "activation_not_found"
    dbsession.rollback()
    assert dbsession.get(Activation, sites["shop"]).active is True
    assert not dbsession.scalars(
        select(LicenseAuditEntry).where(LicenseAuditEntry.action == "customer_deactivate")
    ).all()


@pytest.mark.parametrize(
    "key", ["", "nope", "A" * 65, "%00", "AAAA%00BBBB", "%F0%9F%98%80", "x" * 5000]
)
def test_hostile_keys_are_404_never_500(customer_app, account, sites, key):
    for response in (
        customer_app.get(f"/api/dashboard/licenses/{key}/activations", status="*"),
        customer_app.post(deactivate_path(key, sites["shop"]), status="*"),
    ):
        assert response.status_int in (400, 404), response.text
        assert response.content_type == "application/json"


@pytest.mark.parametrize(
    "activation_id", ["0", "-1", "abc", "1.5", "99999999999999999999", "2147483648", "%00"]
)
def test_hostile_activation_ids_are_404(customer_app, account, sites, activation_id):
    response = customer_app.post(deactivate_path(account.license.key, activation_id), status="*")
    assert response.status_int in (400, 404), response.text
    assert response.content_type == "application/json"


def test_needs_login_and_the_csrf_token(testapp, customer_app, account, sites, dbsession):
    key = account.license.key
    assert testapp.get(activations_path(key), status=401).json["code"] == "not_authenticated"
    assert testapp.post(deactivate_path(key, sites["shop"]), status=401).json["code"] in (
        "not_authenticated",
        "csrf_failed",
    )
    for token in ("", "forged"):
        response = customer_app.post(
            deactivate_path(key, sites["shop"]), headers={"X-CSRF-Token": token}, status=403
        )
        assert response.json["code"] == "csrf_failed"
    customer_app.get(activations_path(key), status=200)
    dbsession.rollback()
    assert dbsession.get(Activation, sites["shop"]).active is True


def test_the_routes_are_in_the_openapi_document(testapp):
    paths = testapp.get("/api/openapi.json").json["paths"]
    listed = paths["/api/dashboard/licenses/{key}/activations"]["get"]
    assert {p["name"] for p in listed["parameters"]} >= {"key", "page", "perPage"}
    post = paths["/api/dashboard/licenses/{key}/activations/{id}/deactivate"]["post"]
    assert "X-CSRF-Token" in {p["name"] for p in post["parameters"]}
    assert {"200", "404", "403", "401"} <= set(post["responses"])
