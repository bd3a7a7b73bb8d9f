"""Feature flags: set on a product, copied onto its licenses when a payment is fulfilled,
changed per license by an admin (audited), and signed into every lease (``lic.features``)
so a runtime can switch features on offline."""

from __future__ import annotations

import secrets

import pytest
from fakes.shop import make_order
from fakes.stripe_api import delivery, event, session_object
from helpers.licensing import lease_claims
from helpers.store import create_published
from sqlalchemy import select

from cmsshop.models import License, LicenseAuditEntry, Product
from cmsshop.services.licensing.features import (
    MAX_FEATURES,
    FeaturesInvalid,
    normalise_features,
    parse_feature_text,
)
from cmsshop.services.licensing.issuing import generate_license_key

PRODUCT = "site-guard-pro"


def test_names_are_sorted_unique_and_checked_one_by_one():
    assert normalise_features(["support", "pro", "pro"]) == ["pro", "support"]
    assert normalise_features([]) == []
    assert parse_feature_text(" pro,support  beta.2, ") == ["beta.2", "pro", "support"]
    with pytest.raises(FeaturesInvalid) as bad:
        normalise_features(["ok", "Pro", 7, "-x", "a" * 41, "white space", "é"])
    assert set(bad.value.errors) == {"1", "2", "3", "4", "5", "6"}
    with pytest.raises(FeaturesInvalid):
        normalise_features([f"f{i}" for i in range(MAX_FEATURES + 1)])
    assert len(normalise_features([f"f{i}" for i in range(MAX_FEATURES)])) == MAX_FEATURES


# --- the product and fulfilment --------------------------------------------------------------


def test_admin_sets_a_products_features_and_the_store_shows_them(admin_app, testapp, dbsession):
    created = create_published(
        admin_app,
        dbsession,
        {
            "slug": "guard",
            "name": "Guard",
            "licensing": {"licensed": True, "features": ["support", "pro", "pro"]},
        },
    ).json
    assert created["licensing"]["features"] == ["pro", "support"]
    patched = admin_app.patch_json(
        "/api/admin/products/guard", {"licensing": {"maxActivations": 2}}, status=200
    ).json
    assert patched["licensing"]["features"] == ["pro", "support"]  # untouched by PATCH
    cleared = admin_app.patch_json(
        "/api/admin/products/guard", {"licensing": {"features": []}}, status=200
    ).json
    assert cleared["licensing"]["features"] == []
    public = testapp.get("/api/store/products/guard", status=200).json
    assert public["licensing"]["features"] == []


@pytest.mark.parametrize(
    "features",
    ["pro", [1], ["Pro"], ["ok", None], [f"f{i}" for i in range(MAX_FEATURES + 1)], ["x" * 41]],
)
def test_bad_product_features_are_422_and_nothing_is_created(admin_app, dbsession, features):
    body = {"slug": "guard", "name": "Guard", "licensing": {"licensed": True, "features": features}}
    response = admin_app.post_json("/api/admin/products", body, status=422).json
    assert response["code"] == "validation_failed"
    assert "licensing.features" in response["errors"]
    assert dbsession.scalar(select(Product).where(Product.slug == "guard")) is None


def test_a_paid_order_copies_the_products_features_onto_the_license(
    webhook, fake_stripe, catalogue, customer, dbsession
):
    product = catalogue["site-guard"]
    product.features = ["pro", "support"]
    dbsession.commit()
    order = make_order(dbsession, customer, ("site-guard",))
    session = fake_stripe.add_session(session_object(order.number, order.total))
    body, headers = delivery(event("checkout.session.completed", session))
    assert webhook(body, headers, status=200).json["status"] == "processed"
    dbsession.rollback()  # a fresh snapshot (SQLite)
    dbsession.expire_all()
    license = dbsession.scalar(select(License))
    assert license.features == ["pro", "support"]
    # A later change of the product leaves the issued license as it was sold.
    product = dbsession.get(Product, product.id)
    product.features = ["pro"]
    dbsession.commit()
    dbsession.rollback()  # a fresh snapshot (SQLite)
    dbsession.expire_all()
    assert dbsession.scalar(select(License)).features == ["pro", "support"]


# --- the lease -------------------------------------------------------------------------------


@pytest.fixture
def license(dbsession):
    product = Product(
        slug=PRODUCT, name="SiteGuard Pro", licensed=True, published=True, features=["pro"]
    )
    dbsession.add(product)
    dbsession.flush()
    license = License(
        key=generate_license_key(), product_id=product.id, max_activations=2, features=["pro"]
    )
    dbsession.add(license)
    dbsession.commit()
    return license


def call(testapp, license, action, status=200):
    body = {
        "product": PRODUCT,
        "licenseKey": license.key,
        "domain": "https://customer-shop.com",
        "fingerprint": "install-0001",
        "nonce": secrets.token_urlsafe(24),
    }
    return testapp.post_json(f"/api/license/{action}", body, status=status).json


def admin_features(admin_app, license, features, status=200):
    return admin_app.post_json(
        f"/api/admin/licenses/{license.key}/features", {"features": features}, status=status
    ).json


def test_every_lease_signs_the_features_and_a_change_reaches_the_next_validate(
    testapp, admin_app, license, dbsession
):
    activated = call(testapp, license, "activate", 201)
    assert activated["license"]["features"] == ["pro"]
    assert lease_claims(testapp, activated["lease"])[1]["lic"]["features"] == ["pro"]

    detail = admin_features(admin_app, license, ["support", "pro"])
    assert detail["features"] == ["pro", "support"]
    validated = call(testapp, license, "validate")
    assert validated["license"]["features"] == ["pro", "support"]
    assert lease_claims(testapp, validated["lease"])[1]["lic"]["features"] == ["pro", "support"]

    admin_features(admin_app, license, [])
    cleared = call(testapp, license, "validate")
    assert lease_claims(testapp, cleared["lease"])[1]["lic"]["features"] == []
    gone = call(testapp, license, "deactivate")
    assert lease_claims(testapp, gone["lease"])[1]["lic"]["features"] == []

    audit = dbsession.scalars(
        select(LicenseAuditEntry.detail)
        .where(LicenseAuditEntry.action == "admin.features")
        .order_by(LicenseAuditEntry.id)
    ).all()
    assert audit[0].startswith("features pro -> pro, support (by ")
    assert audit[1].startswith("features pro, support -> none (by ")


@pytest.mark.parametrize(
    "body",
    [
        {"features": "pro"},
        {"features": [1]},
        {"features": ["PRO"]},
        {"features": [f"f{i}" for i in range(MAX_FEATURES + 1)]},
        {"features": ["x" * 10_000]},
        {"features": {"pro": True}},
    ],
)
def test_bad_license_features_are_422_and_change_nothing(admin_app, license, dbsession, body):
    response = admin_app.post_json(
        f"/api/admin/licenses/{license.key}/features", body, status=422
    ).json
    assert "features" in response["errors"]
    dbsession.rollback()  # a fresh snapshot (SQLite)
    dbsession.expire_all()
    assert dbsession.get(License, license.id).features == ["pro"]
    assert dbsession.scalar(select(LicenseAuditEntry.id)) is None


def test_the_same_features_again_or_none_given_are_refused(admin_app, license, dbsession):
    same = admin_features(admin_app, license, ["pro", "pro"], status=422)
    assert "already" in same["errors"]["features"]
    missing = admin_app.post_json(
        f"/api/admin/licenses/{license.key}/features", {}, status=422
    ).json
    assert "features" in missing["errors"]


def test_a_revoked_licenses_features_cannot_change(admin_app, license):
    admin_app.post_json(f"/api/admin/licenses/{license.key}/revoke", {}, status=200)
    refused = admin_features(admin_app, license, ["support"], status=409)
    assert refused["code"] == "license_action_refused"


def test_customers_cannot_set_features(customer_app, license):
    admin_features(customer_app, license, ["support"], status=403)


def test_the_admin_page_sets_and_clears_features(admin_app, license, dbsession):
    page = admin_app.get(f"/admin/licenses/{license.key}", status=200)
    form = next(f for f in page.forms.values() if f.action.endswith("/features"))
    assert form["features"].value == "pro"
    form["features"] = "pro, support beta"
    form.submit(status=303)
    dbsession.rollback()  # a fresh snapshot (SQLite)
    dbsession.expire_all()
    assert dbsession.get(License, license.id).features == ["beta", "pro", "support"]

    page = admin_app.get(f"/admin/licenses/{license.key}", status=200)
    assert "<code>beta</code>" in page.text
    form = next(f for f in page.forms.values() if f.action.endswith("/features"))
    form["features"] = "Not A Flag"
    refused = form.submit(status=422)
    assert 'aria-invalid="true"' in refused.text and "Not A Flag" in refused.text
    form["features"] = ""
    form.submit(status=303)
    dbsession.rollback()  # a fresh snapshot (SQLite)
    dbsession.expire_all()
    assert dbsession.get(License, license.id).features == []
