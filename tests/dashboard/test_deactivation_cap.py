"""The cap on seats a customer frees from the dashboard: at most
``cmsshop.license_self_deactivations_per_month`` per license in a rolling 30 days (429
``deactivation_limit_reached`` with Retry-After past it, nothing changed, the refusal
audited), counted under the license lock so racing requests cannot pass it."""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from helpers.account_data import activate
from helpers.app import serve
from helpers.clients import new_client
from sqlalchemy import select, update

from cmsshop.models import Activation, LicenseAuditEntry

LIMIT = 2
DAY = 86400


@pytest.fixture
def capped_app(make_app):
    return make_app(**{"cmsshop.license_self_deactivations_per_month": str(LIMIT)})


@pytest.fixture
def owner(capped_app, customer, account):
    client = new_client(capped_app)
    client.login(customer.email)
    return client


@pytest.fixture
def sites(capped_app, account) -> list[int]:
    """Three active production sites (the license has three seats)."""
    return [
        activate(capped_app, account.license.key, f"shop{n}.example.com", f"install-shop-0{n}")
        for n in range(3)
    ]


def deactivate(client, key, activation_id, status="*"):
    return client.post(
        f"/api/dashboard/licenses/{key}/activations/{activation_id}/deactivate", status=status
    )


def audit_outcomes(dbsession) -> list[tuple[str, int]]:
    dbsession.rollback()
    return [
        (row.outcome, row.status)
        for row in dbsession.scalars(
            select(LicenseAuditEntry)
            .where(LicenseAuditEntry.action == "customer_deactivate")
            .order_by(LicenseAuditEntry.id)
        )
    ]


def test_past_the_cap_is_429_with_retry_after_and_nothing_changes(owner, account, sites, dbsession):
    key = account.license.key
    for activation_id in sites[:LIMIT]:
        assert deactivate(owner, key, activation_id, 200).json["outcome"] == "deactivated"
    refused = deactivate(owner, key, sites[2], 429)
    body = refused.json
    assert body["code"] == "deactivation_limit_reached" and body["supportCode"]
    assert body["title"] == "Deactivation limit reached" and body["hints"]
    retry_after = int(refused.headers["Retry-After"])
    assert 30 * DAY - 120 <= retry_after <= 30 * DAY + 1
    dbsession.rollback()
    assert dbsession.get(Activation, sites[2]).active is True
    # The refusal is in the audit log; an inactive one still answers its idempotent 200.
    assert deactivate(owner, key, sites[0], 200).json["outcome"] == "already_inactive"
    assert audit_outcomes(dbsession) == [
        ("deactivated", 200),
        ("deactivated", 200),
        ("deactivation_limit_reached", 429),
        ("already_inactive", 200),
    ]


def test_deactivations_older_than_30_days_no_longer_count(owner, account, sites, dbsession):
    key = account.license.key
    for activation_id in sites[:LIMIT]:
        deactivate(owner, key, activation_id, 200)
    now = dt.datetime.now(dt.UTC)
    dbsession.rollback()  # a fresh snapshot (SQLite)
    oldest = dbsession.scalar(
        select(LicenseAuditEntry.id)
        .where(LicenseAuditEntry.action == "customer_deactivate")
        .order_by(LicenseAuditEntry.id)
    )
    dbsession.execute(
        update(LicenseAuditEntry)
        .where(LicenseAuditEntry.id == oldest)
        .values(created_at=now - dt.timedelta(days=29))
    )
    dbsession.commit()
    # One counted deactivation is 29 days old: it leaves the window in about a day.
    refused = deactivate(owner, key, sites[2], 429)
    assert DAY - 120 <= int(refused.headers["Retry-After"]) <= DAY + 1
    dbsession.execute(
        update(LicenseAuditEntry)
        .where(LicenseAuditEntry.id == oldest)
        .values(created_at=now - dt.timedelta(days=31))
    )
    dbsession.commit()
    assert deactivate(owner, key, sites[2], 200).json["outcome"] == "deactivated"


def test_the_cap_is_per_license_and_admins_and_runtimes_are_not_capped(
    capped_app, owner, account, sites, dbsession
):
    key = account.license.key
    for activation_id in sites[:LIMIT]:
        deactivate(owner, key, activation_id, 200)
    # The runtime of a site still running frees its own seat: not a dashboard deactivation.
    from helpers.account_data import RUNTIME_IP, license_call
    from helpers.licensing import runtime

    license_call(
        runtime(capped_app, RUNTIME_IP),
        "deactivate",
        key,
        "shop2.example.com",
        "install-shop-02",
        200,
    )
    dbsession.rollback()
    assert dbsession.get(Activation, sites[2]).active is False


def test_racing_deactivations_cannot_pass_the_cap(capped_app, owner, account, sites, dbsession):
    """Three requests at once for three active sites, with a cap of two: exactly two win."""
    key = account.license.key
    cookies = {cookie.name: cookie.value for cookie in owner.cookiejar}
    with serve(capped_app) as base_url:

        def post(activation_id):
            return requests.post(
                f"{base_url}/api/dashboard/licenses/{key}/activations/{activation_id}/deactivate",
                cookies=cookies,
                headers={"X-CSRF-Token": owner.csrf_token},
                timeout=30,
            )

        with ThreadPoolExecutor(max_workers=3) as pool:
            answers = list(pool.map(post, sites))
    assert sorted(a.status_code for a in answers) == [200, 200, 429]
    dbsession.rollback()
    active = dbsession.scalars(
        select(Activation.id).where(Activation.id.in_(sites), Activation.active.is_(True))
    ).all()
    assert len(active) == 1


def test_the_setting_is_checked_at_start_up(make_app):
    from pyramid.exceptions import ConfigurationError

    with pytest.raises(ConfigurationError, match="self_deactivations"):
        make_app(**{"cmsshop.license_self_deactivations_per_month": "0"})


def test_the_account_page_shows_the_refusal_as_a_page(capped_app, owner, account, sites):
    key = account.license.key
    for activation_id in sites[:LIMIT]:
        deactivate(owner, key, activation_id, 200)
    page = owner.get("/account/licenses", status=200)
    form = next(
        f for f in page.forms.values() if f.action.endswith(f"/activations/{sites[2]}/deactivate")
    )
    refused = form.submit(status=429)
    assert refused.content_type == "text/html"
    assert "30 days" in refused.text


def test_the_list_shows_site_fingerprint_first_and_last_seen(owner, account, sites):
    items = owner.get(f"/api/dashboard/licenses/{account.license.key}/activations").json["items"]
    shop = next(item for item in items if item["domain"] == "shop0.example.com")
    assert shop["fingerprint"] == "install-shop-00"
    assert shop["activatedAt"].endswith("Z") and "lastValidatedAt" in shop
