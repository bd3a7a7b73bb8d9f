"""Offline activation: the runtime's request code, pasted by the license's owner into the
dashboard (JSON route and page), gives a lease file the runtime verifies offline; a code
that is damaged, tampered with, replayed or for someone else's license gets nothing."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json

import pytest
from helpers.account_data import activate, make_account
from helpers.app import serve
from helpers.clients import new_client
from helpers.licensing import OFFLINE_FINGERPRINT as FINGERPRINT
from helpers.licensing import OFFLINE_SITE as SITE
from helpers.licensing import offline_activation_path, offline_runtime
from sqlalchemy import func, select, update

from cmsshop.models import Activation, License, LicenseAuditEntry
from cmsshop.runtime import LeaseRejected, LicenseClient
from cmsshop.services.licensing.offline import checksum

make_runtime, path = offline_runtime, offline_activation_path


@pytest.fixture
def pinned(testapp):
    return testapp.get("/api/license/jwks.json").json


def code_with(fields: dict) -> str:
    payload = base64.urlsafe_b64encode(json.dumps(fields).encode()).rstrip(b"=").decode()
    return f"CMSOFF1.{payload}.{checksum(payload)}"


def activations(dbsession) -> int:
    dbsession.rollback()
    return dbsession.scalar(select(func.count()).select_from(Activation))


def test_the_whole_round_trip_works_offline(customer_app, account, pinned, tmp_path, dbsession):
    product = make_runtime(account, pinned, tmp_path)
    code = product.offline_request_code()
    assert code.startswith("CMSOFF1.")
    response = customer_app.post_json(path(account.license.key), {"requestCode": code})
    lease_file = response.json
    assert response.headers["Cache-Control"] == "private, no-store"
    assert lease_file["format"] == "cmsshop-offline-lease" and lease_file["version"] == 1
    assert lease_file["domain"] == "intranet.example.com"
    expires = dt.datetime.fromisoformat(lease_file["expiresAt"].replace("Z", "+00:00"))
    assert expires > dt.datetime.now(dt.UTC) + dt.timedelta(days=360)  # 365 days by default

    # A restart in between: the pending request survives in the state file.
    product = make_runtime(account, pinned, tmp_path)
    lease = product.install_offline_lease(json.dumps(lease_file))
    assert lease.claims["offline"] is True and lease.domain == "intranet.example.com"
    assert make_runtime(account, pinned, tmp_path).ensure_licensed().token == lease.token

    # The seat is taken like an online activation's, and the call is audited.
    dbsession.rollback()
    activation = dbsession.scalar(select(Activation))
    assert activation.domain == "intranet.example.com" and activation.active
    assert activation.environment == "production"
    entry = dbsession.scalar(
        select(LicenseAuditEntry).where(LicenseAuditEntry.action == "offline_activate")
    )
    assert (entry.outcome, entry.status, entry.activation_id) == ("activated", 201, activation.id)

    # The same code again: its nonce was used.
    replay = customer_app.post_json(
        path(account.license.key), {"requestCode": code}, status=409
    ).json
    assert replay["code"] == "nonce_reused"


def test_the_lease_never_outlives_the_license(customer_app, account, pinned, tmp_path, dbsession):
    ends = dt.datetime.now(dt.UTC) + dt.timedelta(days=20)
    dbsession.rollback()
    dbsession.execute(
        update(License).where(License.id == account.license.id).values(expires_at=ends)
    )
    dbsession.commit()
    code = make_runtime(account, pinned, tmp_path).offline_request_code()
    body = customer_app.post_json(path(account.license.key), {"requestCode": code}).json
    expires = dt.datetime.fromisoformat(body["expiresAt"].replace("Z", "+00:00"))
    assert abs((expires - ends).total_seconds()) < 2


def test_the_client_refuses_leases_not_made_for_its_code(customer_app, account, pinned, tmp_path):
    product = make_runtime(account, pinned, tmp_path)
    other = make_runtime(account, pinned, tmp_path, fingerprint="another-install-0002")
    theirs = customer_app.post_json(
        path(account.license.key), {"requestCode": other.offline_request_code()}
    ).json
    with pytest.raises(LeaseRejected):  # no code pending on this installation
        product.install_offline_lease(theirs)
    product.offline_request_code()
    with pytest.raises(LeaseRejected, match="installation"):  # another fingerprint
        product.install_offline_lease(theirs)
    old_code = product.offline_request_code()
    old = customer_app.post_json(path(account.license.key), {"requestCode": old_code}).json
    product.offline_request_code()  # a newer code: the older lease's nonce is stale
    with pytest.raises(LeaseRejected, match="nonce"):
        product.install_offline_lease(old)
    header, payload, signature = old["lease"].split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["lic"]["maxActivations"] = 999
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    with pytest.raises(LeaseRejected):
        product.install_offline_lease({"lease": f"{header}.{forged}.{signature}"})
    for junk in ("", "not json", "[]", '{"lease": 7}'):
        with pytest.raises(LeaseRejected):
            product.install_offline_lease(junk)
    assert product.lease is None


def test_an_online_lease_is_not_an_offline_lease(app, account, pinned, tmp_path, customer_app):
    product = make_runtime(account, pinned, tmp_path)
    code = product.offline_request_code()
    with serve(app) as base_url:
        online = LicenseClient(
            base_url,
            product="site-guard",
            license_key=account.license.key,
            domain=SITE,
            fingerprint=FINGERPRINT,
            pinned_keys=pinned,
        )
        online_lease = online.activate()
    assert "offline" not in online_lease.claims
    with pytest.raises(LeaseRejected):
        product.install_offline_lease({"lease": online_lease.token})
    customer_app.post_json(path(account.license.key), {"requestCode": code}, status=200)


def tampered_codes(account) -> list[str]:
    good = {
        "v": 1,
        "product": "site-guard",
        "key": account.license.key,
        "domain": SITE,
        "fp": FINGERPRINT,
        "nonce": "n" * 32,
    }
    valid = code_with(good)
    prefix, payload, check = valid.split(".")
    flipped = payload[:10] + ("A" if payload[10] != "A" else "B") + payload[11:]
    return [
        "",
        "hello",
        valid[:-3],  # truncated
        f"{prefix}.{payload[:-4]}.{check}",  # payload cut: the check fails
        f"{prefix}.{flipped}.{check}",  # one character changed
        f"CMSOFF2.{payload}.{check}",
        "CMSOFF1." + "A" * 5000 + ".AAAAAAAA",  # oversized
        code_with({**good, "v": 2}),
        code_with({**good, "fp": 12345678}),
        code_with({**good, "fp": "short"}),
        code_with({**good, "nonce": "bad nonce!"}),
        code_with({**good, "domain": "http://user:pw@x.com"}),
        code_with({k: v for k, v in good.items() if k != "nonce"}),
        code_with([1, 2, 3]),
        "CMSOFF1." + base64.urlsafe_b64encode(b"\xff\xfe" * 10).decode().rstrip("=") + ".AAAAAAAA",
    ]


def test_damaged_and_tampered_codes_are_422_and_change_nothing(customer_app, account, dbsession):
    for code in tampered_codes(account):
        response = customer_app.post_json(
            path(account.license.key), {"requestCode": code}, status="*"
        )
        assert response.status_int == 422, (code[:40], response.text)
        assert response.content_type == "application/json"
        assert set(response.json["errors"]) == {"requestCode"} or not code
    assert activations(dbsession) == 0


def test_someone_elses_license_or_a_code_for_another_key_gets_nothing(
    customer_app,
    other_customer_app,
    other_customer,
    account,
    pinned,
    tmp_path,
    dbsession,
    storage_dir,
):
    code = make_runtime(account, pinned, tmp_path).offline_request_code()
    stranger = other_customer_app.post_json(
        path(account.license.key), {"requestCode": code}, status=404
    )
    assert stranger.json["code"] == "license_not_found"
    dbsession.rollback()
    theirs = make_account(dbsession, other_customer, storage_dir, catalogue=False)
    # Their own license in the path, a code for the victim's key: refused.
    mixed = other_customer_app.post_json(
        path(theirs.license.key), {"requestCode": code}, status=422
    )
    assert "another license" in mixed.json["errors"]["requestCode"]
    wrong_product = code_with(
        {
            "v": 1,
            "product": "pixel-forge",
            "key": account.license.key,
            "domain": SITE,
            "fp": FINGERPRINT,
            "nonce": "p" * 32,
        }
    )
    refused = customer_app.post_json(
        path(account.license.key), {"requestCode": wrong_product}, status=403
    )
    assert refused.json["code"] == "product_mismatch"
    assert activations(dbsession) == 0


def test_seat_limits_and_license_state_apply(
    app, customer_app, account, pinned, tmp_path, dbsession
):
    for n in range(3):  # site-guard licenses have three seats
        activate(app, account.license.key, f"shop{n}.example.com", f"install-online-0{n}")
    code = make_runtime(account, pinned, tmp_path).offline_request_code()
    full = customer_app.post_json(path(account.license.key), {"requestCode": code}, status=409)
    assert full.json["code"] == "activation_limit_reached"
    dbsession.rollback()
    dbsession.execute(
        update(License).where(License.id == account.license.id).values(status="revoked")
    )
    dbsession.commit()
    code = make_runtime(account, pinned, tmp_path).offline_request_code()
    revoked = customer_app.post_json(path(account.license.key), {"requestCode": code}, status=403)
    assert revoked.json["code"] == "license_revoked"
    assert activations(dbsession) == 3


def test_needs_the_customer_and_the_csrf_token(testapp, customer_app, account, pinned, tmp_path):
    code = make_runtime(account, pinned, tmp_path).offline_request_code()
    testapp.post_json(path(account.license.key), {"requestCode": code}, status=401)
    forged = customer_app.post_json(
        path(account.license.key),
        {"requestCode": code},
        headers={"X-CSRF-Token": "forged"},
        status=403,
    )
    assert forged.json["code"] == "csrf_failed"
    bad = customer_app.post_json(path(account.license.key), {"requestCode": 7}, status=422)
    assert "requestCode" in bad.json["errors"]


def test_signing_unavailable_is_503_and_takes_no_seat(
    make_app, customer, account, pinned, tmp_path, dbsession
):
    app = make_app(
        **{
            "cmsshop.license_signer": "remote",
            "cmsshop.license_remote_url": "http://127.0.0.1:9/v1/transit/sign/leases",
            "cmsshop.license_remote_public_keys": base64.b64encode(b"k" * 32).decode(),
            "cmsshop.license_remote_timeout": "0.5",
            "cmsshop.license_remote_deadline": "1",
        }
    )
    client = new_client(app)
    client.login(customer.email)
    code = make_runtime(account, pinned, tmp_path).offline_request_code()
    response = client.post_json(path(account.license.key), {"requestCode": code}, status=503)
    assert response.json["code"] == "signing_unavailable"
    assert activations(dbsession) == 0


def offline_form(page):
    return next(f for f in page.forms.values() if f.action.endswith("/offline"))


def test_the_page_turns_a_code_into_a_lease_file(customer_app, account, pinned, tmp_path):
    licenses = customer_app.get("/account/licenses", status=200)
    link = f"/account/licenses/{account.license.key}/offline"
    assert link in licenses.text
    page = customer_app.get(link, status=200)
    form = offline_form(page)
    form["requestCode"] = "CMSOFF1.garbage"
    refused = form.submit(status=422)
    assert 'aria-invalid="true"' in refused.text and "request code" in refused.text
    product = make_runtime(account, pinned, tmp_path)
    form = offline_form(refused)
    code = product.offline_request_code()
    # Pasted wrapped over lines, as from an e-mail: still read.
    form["requestCode"] = "\n".join(code[i : i + 60] for i in range(0, len(code), 60))
    download = form.submit(status=200)
    assert download.content_type == "application/json"
    assert download.headers["Content-Disposition"].startswith("attachment; filename=")
    lease = product.install_offline_lease(download.body)
    assert lease.claims["offline"] is True
    assert hashlib.sha256(download.body).hexdigest()  # a real file body


def test_the_route_is_documented(testapp):
    paths = testapp.get("/api/openapi.json").json["paths"]
    post = paths["/api/dashboard/licenses/{key}/offline-activation"]["post"]
    assert {"200", "404", "409", "422"} <= set(post["responses"])
