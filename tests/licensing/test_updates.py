"""POST /api/license/update-check: the newest release a license is entitled to, newer
than the runtime's version, by the product's version scheme, channel and the license's
expiry; a signed download URL that really downloads the file; the WordPress shape; the
admin side (scheme, requirements, duplicate versions); and the reference client."""

from __future__ import annotations

import datetime as dt
import hashlib
import os

import pytest
from helpers.account_data import (
    RELEASE_BYTES,
    RUNTIME_IP,
    activate,
    license_call,
    store_release,
)
from helpers.app import serve
from helpers.licensing import runtime
from helpers.purchases import openapi_validator
from sqlalchemy import select, update

from cmsshop.models import Entitlement, License, LicenseAuditEntry, Product, Release
from cmsshop.runtime import LicenseClient, LicenseError, UpdateRejected
from cmsshop.services.store.releases import ReleaseWriter, add_release

SITE = "shop.example.com"
FINGERPRINT = "install-shop-01"
PATH = "/api/license/update-check"


@pytest.fixture
def site(app, account):
    return activate(app, account.license.key, SITE, FINGERPRINT)


def add(dbsession, storage_dir, version, *, channel="stable", days_ago=0, **extra) -> Release:
    dbsession.rollback()  # a fresh snapshot: the app wrote since (SQLite cannot upgrade it)
    product = dbsession.scalar(select(Product).where(Product.slug == "site-guard"))
    upload = ReleaseWriter(str(storage_dir), max_bytes=1024 * 1024)
    upload.write(f"site-guard {version}\n".encode() * 50)
    release = add_release(
        dbsession,
        product,
        version=version,
        file_name=f"site-guard-{version}.zip",
        upload=upload,
        channel=channel,
        changelog=f"## {version}\n\n* fixed <script>x</script>",
        requirements=extra or None,
    )
    release.released_at = dt.datetime.now(dt.UTC) - dt.timedelta(days=days_ago)
    dbsession.commit()
    return release


def check(client, account, current="1.0", status=200, query="", **fields):
    body = {
        "product": "site-guard",
        "licenseKey": account.license.key,
        "domain": SITE,
        "fingerprint": FINGERPRINT,
        "currentVersion": current,
        **fields,
    }
    return client.post_json(PATH + query, body, status=status)


def test_offers_the_newest_release_with_a_download_url_that_works(
    app, account, site, dbsession, storage_dir
):
    add(dbsession, storage_dir, "2.10.0", days_ago=5, requires="6.0", requires_php="8.1")
    add(dbsession, storage_dir, "2.9.0", days_ago=1)  # newer date, lower version
    client = runtime(app, RUNTIME_IP)
    response = check(client, account, "2.0.0")
    assert response.headers["Cache-Control"] == "no-store"
    body = response.json
    openapi_validator(client, PATH, "post", "200").validate(body)
    assert body["status"] == "update_available" and body["licenseExpired"] is False
    release = body["release"]
    assert release["version"] == "2.10.0"  # by version, not by date and not as a string
    assert release["requires"] == {"platform": "6.0", "php": "8.1", "testedUpTo": None}
    assert "<h2>2.10.0</h2>" in release["changelogHtml"]
    assert "<script>" not in release["changelogHtml"]
    assert release["downloadUrl"].startswith("http://localhost/api/downloads/")
    downloaded = client.get(release["downloadUrl"].removeprefix("http://localhost"), status=200)
    assert len(downloaded.body) == release["size"]
    assert hashlib.sha256(downloaded.body).hexdigest() == release["sha256"]

    assert check(client, account, "2.10").json["status"] == "up_to_date"  # 2.10 == 2.10.0
    assert check(client, account, "3.0.dev1").json["release"] is None
    dbsession.rollback()
    outcomes = dbsession.scalars(
        select(LicenseAuditEntry.outcome)
        .where(LicenseAuditEntry.action == "update_check")
        .order_by(LicenseAuditEntry.id)
    ).all()
    assert outcomes == ["update_available", "up_to_date", "up_to_date"]


def test_beta_channel_sees_beta_releases_and_stable_does_not(
    app, account, site, dbsession, storage_dir
):
    add(dbsession, storage_dir, "2.1.0rc1", channel="beta")
    client = runtime(app, RUNTIME_IP)
    assert check(client, account, "2.0.0").json["status"] == "up_to_date"
    beta = check(client, account, "2.0.0", channel="beta").json
    assert beta["release"]["version"] == "2.1.0rc1" and beta["release"]["channel"] == "beta"
    add(dbsession, storage_dir, "2.1.0")  # the final release beats its candidate
    assert check(client, account, "2.0.0", channel="beta").json["release"]["version"] == "2.1.0"
    bad = check(client, account, "2.0.0", channel="nightly", status=422).json
    assert "channel" in bad["errors"]


def test_an_expired_license_sees_only_releases_published_before_its_expiry(
    app, account, site, dbsession, storage_dir
):
    add(dbsession, storage_dir, "2.1.0", days_ago=20)
    add(dbsession, storage_dir, "3.0.0", days_ago=2)
    dbsession.rollback()
    dbsession.execute(
        update(License)
        .where(License.id == account.license.id)
        .values(expires_at=dt.datetime.now(dt.UTC) - dt.timedelta(days=10))
    )
    dbsession.commit()
    client = runtime(app, RUNTIME_IP)
    body = check(client, account, "2.0.0").json
    assert body["licenseExpired"] is True and body["release"]["version"] == "2.1.0"
    assert check(client, account, "2.1.0").json["status"] == "up_to_date"
    # validate refuses the expired license as before.
    expired = license_call(client, "validate", account.license.key, SITE, FINGERPRINT, 403)
    assert expired.json["code"] == "license_expired"


@pytest.mark.parametrize(
    ("status", "code"), [("suspended", "license_suspended"), ("revoked", "license_revoked")]
)
def test_suspended_and_revoked_licenses_are_refused(app, account, site, dbsession, status, code):
    dbsession.rollback()
    dbsession.execute(update(License).where(License.id == account.license.id).values(status=status))
    dbsession.commit()
    assert check(runtime(app, RUNTIME_IP), account, "1.0", status=403).json["code"] == code


def test_unknown_keys_products_and_installations_are_refused(app, account, site, dbsession):
    client = runtime(app, RUNTIME_IP)
    unknown = check(client, account, licenseKey="AAAAA-BBBBB-CCCCC-DDDDD-EEEEE", status=404)
    assert unknown.json["code"] == "license_not_found"
    assert check(client, account, product="pixel-forge", status=403).json["code"] in (
        "product_mismatch",
    )
    stranger = check(client, account, fingerprint="never-activated-01", status=404)
    assert stranger.json["code"] == "activation_not_found"
    moved = check(client, account, domain="other.example.com", status=404)
    assert moved.json["code"] == "activation_not_found"
    license_call(client, "deactivate", account.license.key, SITE, FINGERPRINT, 200)
    assert check(client, account, status=404).json["code"] == "activation_not_found"


@pytest.mark.parametrize(
    "change",
    [
        {"currentVersion": "latest"},
        {"currentVersion": ""},
        {"currentVersion": 2},
        {"currentVersion": "1" * 51},
        {"channel": ["stable"]},
        {"fingerprint": "short"},
        {"nonce": "not a nonce!"},
    ],
)
def test_bad_fields_are_422(app, account, site, change):
    body = check(runtime(app, RUNTIME_IP), account, status=422, **change).json
    assert body["code"] == "validation_failed" and body["errors"]


def test_malformed_bodies_are_4xx_json(app, account, site):
    client = runtime(app, RUNTIME_IP)
    for body, content_type in (
        (b'{"product": "site-guard", "licenseKey": ', "application/json"),
        (b"[1, 2]", "application/json"),
        (b"\xff\xfe", "application/x-www-form-urlencoded"),
        (b"product=site-guard", "text/plain"),
    ):
        response = client.post(PATH, body, headers={"Content-Type": content_type}, status="*")
        assert 400 <= response.status_int < 500 and response.content_type == "application/json"
    assert check(client, account, query="?format=xml", status=422).json["errors"]["format"]


def test_a_form_post_works_like_json(app, account, site):
    form = {
        "product": "site-guard",
        "licenseKey": account.license.key,
        "domain": SITE,
        "fingerprint": FINGERPRINT,
        "currentVersion": "1.0",
    }
    body = runtime(app, RUNTIME_IP).post(PATH, form, status=200).json
    assert body["release"]["version"] == "2.0.0"


def test_semver_products_compare_by_semver(app, admin_app, account, site, dbsession, storage_dir):
    admin_app.patch_json("/api/admin/products/site-guard", {"versionScheme": "semver"}, status=200)
    add(dbsession, storage_dir, "2.1.0-beta.2", channel="beta")
    add(dbsession, storage_dir, "2.1.0-beta.11", channel="beta")
    client = runtime(app, RUNTIME_IP)
    beta = check(client, account, "2.1.0-beta.2", channel="beta").json
    assert beta["release"]["version"] == "2.1.0-beta.11"
    assert check(client, account, "2.0", status=422).json["errors"]["currentVersion"]


def test_the_wordpress_shape(app, account, site, dbsession, storage_dir):
    add(dbsession, storage_dir, "2.2.0", requires="6.0", requires_php="8.1", tested="6.7")
    client = runtime(app, RUNTIME_IP)
    body = check(client, account, "2.0.0", query="?format=wordpress").json
    assert body["slug"] == "site-guard" and body["new_version"] == "2.2.0"
    assert body["package"].startswith("http://localhost/api/downloads/")
    assert (body["requires"], body["requires_php"], body["tested"]) == ("6.0", "8.1", "6.7")
    assert body["url"] == "http://localhost/products/site-guard"
    assert "<h2>2.2.0</h2>" in body["sections"]["changelog"]
    assert check(client, account, "2.2.0", query="?format=wordpress").json == {}


def test_no_download_url_when_downloads_are_on_hold(app, account, site, dbsession):
    dbsession.rollback()
    dbsession.execute(
        update(Entitlement)
        .where(Entitlement.order_item_id == account.license.order_item_id)
        .values(status="on_hold")
    )
    dbsession.commit()
    # On hold means a dispute, which suspends the license too; here only the download is.
    release = check(runtime(app, RUNTIME_IP), account, "1.0").json["release"]
    assert release["version"] == "2.0.0" and release["downloadUrl"] is None
    assert release["downloadUnavailable"]


# --- the admin side ---------------------------------------------------------------------------


def upload_release(admin_app, version, **fields):
    return admin_app.post(
        "/api/admin/products/site-guard/releases",
        {"version": version, **fields},
        upload_files=[("file", "guard.zip", RELEASE_BYTES)],
        status="*",
    )


def test_uploads_check_versions_by_the_products_scheme(admin_app, account, dbsession):
    same = upload_release(admin_app, "2.0")  # 2.0 is 2.0.0 under PEP 440
    assert same.status_int == 409 and same.json["code"] == "version_exists"
    bad = upload_release(admin_app, "2.1-banana")
    assert bad.status_int == 422 and "PEP 440" in bad.json["errors"]["version"]
    wrong = upload_release(admin_app, "2.1.0", requires="six")
    assert wrong.status_int == 422 and "requires" in wrong.json["errors"]
    created = upload_release(admin_app, "2.1.0", requires="6.0", requiresPhp="8.1", tested="6.7")
    assert created.status_int == 201
    dbsession.rollback()
    stored = dbsession.scalar(select(Release).where(Release.version == "2.1.0"))
    assert (stored.requires, stored.requires_php, stored.tested) == ("6.0", "8.1", "6.7")


def test_switching_the_scheme_is_refused_when_a_release_would_not_parse(
    admin_app, account, dbsession, storage_dir
):
    dbsession.rollback()
    store_release(dbsession, storage_dir, "site-guard", "2.1", b"x" * 10)
    refused = admin_app.patch_json(
        "/api/admin/products/site-guard", {"versionScheme": "semver"}, status=422
    ).json
    assert "2.1" in refused["errors"]["versionScheme"]
    assert admin_app.get("/api/admin/products/site-guard").json["versionScheme"] == "pep440"
    bad = admin_app.patch_json(
        "/api/admin/products/site-guard", {"versionScheme": "calver"}, status=422
    )
    assert "versionScheme" in bad.json["errors"]


# --- the reference client ---------------------------------------------------------------------


def test_the_client_checks_downloads_and_verifies_an_update(
    app, account, site, dbsession, storage_dir, tmp_path
):
    add(dbsession, storage_dir, "2.3.0")
    with serve(app) as base_url:
        jwks = runtime(app, RUNTIME_IP).get("/api/license/jwks.json").json
        client = LicenseClient(
            base_url,
            product="site-guard",
            license_key=account.license.key,
            domain=SITE,
            fingerprint=FINGERPRINT,
            pinned_keys=jwks,
        )
        update_ = client.check_for_update("2.0.0")
        assert update_.version == "2.3.0" and update_.size > 0
        target = str(tmp_path / "update.zip")
        client.download_update(update_, target)
        with open(target, "rb") as fh:
            assert hashlib.sha256(fh.read()).hexdigest() == update_.sha256
        assert client.check_for_update("2.3.0") is None

        # A file that is not the announced one is refused and nothing is kept.
        forged = type(update_)(**{**update_.__dict__, "sha256": "0" * 64})
        other = str(tmp_path / "forged.zip")
        with pytest.raises(UpdateRejected):
            client.download_update(forged, other)
        assert not os.path.exists(other) and not os.path.exists(other + ".part")
        elsewhere = type(update_)(
            **{**update_.__dict__, "download_url": "http://evil.example/update.zip"}
        )
        with pytest.raises(UpdateRejected):
            client.download_update(elsewhere, other)

        revoked = LicenseClient(
            base_url,
            product="site-guard",
            license_key="AAAAA-BBBBB-CCCCC-DDDDD-EEEEE",
            domain=SITE,
            fingerprint=FINGERPRINT,
            pinned_keys=jwks,
        )
        with pytest.raises(LicenseError) as refused:
            revoked.check_for_update("2.0.0")
        assert refused.value.code == "license_not_found"
