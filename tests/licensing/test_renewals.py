"""Renewals and paid upgrades of licenses, bought through checkout and fulfilled through
the card webhook (a verified event plus the provider's confirmation): a renewal extends
from the current expiry (also within the grace period after it), an upgrade moves the
license to a higher tier for the price difference, each exactly once under duplicate and
concurrent deliveries."""

from __future__ import annotations

import datetime as dt
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from fakes.shop import order_status
from fakes.stripe_api import delivery, event, session_object
from helpers.account_data import paid_order
from helpers.app import requires_postgresql, serve
from helpers.checkout import BILLING
from helpers.license_changes import buy, fresh, order_of, pay, set_license
from helpers.payments import storm
from sqlalchemy import func, select

from cmsshop.models import (
    License,
    LicenseAuditEntry,
    LicenseChange,
    Order,
    OrderItem,
)

YEAR = dt.timedelta(days=365)


@pytest.fixture
def license(tiered_license) -> License:
    return tiered_license


@pytest.fixture
def buyer(card_buyer):
    return card_buyer


def changes(dbsession) -> int:
    dbsession.rollback()
    return dbsession.scalar(select(func.count()).select_from(LicenseChange))


def test_a_renewal_extends_from_the_current_expiry_exactly_once(
    buyer, webhook, fake_stripe, license, dbsession
):
    old = license.expires_at
    placed = buy(buyer, {"renew": license.key.lower()}).json["order"]
    order = order_of(dbsession, placed["number"])
    assert order.total == 4900 and [i.kind for i in order.items] == ["renewal"]
    assert order.items[0].target_license_id == license.id
    assert order.items[0].name.startswith("Renewal of SiteGuard")
    # Before the payment is confirmed nothing changes (a return page proves nothing).
    assert fresh(dbsession, License, license.id).expires_at == old

    answer, (body, headers), _ = pay(webhook, fake_stripe, order)
    assert answer["status"] == "processed"
    renewed = fresh(dbsession, License, license.id)
    assert renewed.expires_at == old + YEAR  # from the old expiry, not from today
    assert order_status(dbsession, order.number) == "paid"

    again = webhook(body, headers, status=200).json
    assert again["status"] == "duplicate"
    assert fresh(dbsession, License, license.id).expires_at == old + YEAR
    assert changes(dbsession) == 1
    audit = dbsession.scalar(select(LicenseAuditEntry).where(LicenseAuditEntry.action == "renewal"))
    assert "expiry" in audit.detail and order.number in audit.detail
    # A renewal grants no second license.
    assert dbsession.scalar(select(func.count()).select_from(License)) == 1


def test_a_license_expired_within_the_grace_period_renews_from_its_old_expiry(
    buyer, webhook, fake_stripe, license, dbsession
):
    expired_at = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(days=10)
    set_license(dbsession, license, expires_at=expired_at, status="expired")
    placed = buy(buyer, {"renew": license.key}).json["order"]
    pay(webhook, fake_stripe, order_of(dbsession, placed["number"]))
    renewed = fresh(dbsession, License, license.id)
    assert renewed.expires_at == expired_at + YEAR and renewed.status == "active"


def test_renewals_that_cannot_be_sold_are_422_naming_the_item(
    buyer, license, dbsession, other_customer, catalogue
):
    set_license(dbsession, license, expires_at=dt.datetime.now(dt.UTC) - dt.timedelta(days=31))
    late = buy(buyer, {"renew": license.key}, status=422).json
    assert "buy a new license" in late["errors"]["items.0.renew"]

    theirs = paid_order(dbsession, other_customer, ("site-guard",))
    their_key = dbsession.scalar(
        select(License.key)
        .join(OrderItem, OrderItem.id == License.order_item_id)
        .where(OrderItem.order_id == theirs.id)
    )
    stranger = buy(buyer, {"renew": their_key}, status=422).json
    assert stranger["errors"]["items.0.renew"] == "you have no license with this key"
    unknown = buy(buyer, {"renew": "NOPE"}, status=422).json
    assert unknown["errors"]["items.0.renew"] == stranger["errors"]["items.0.renew"]

    set_license(dbsession, license, expires_at=None)  # perpetual
    assert (
        "never expires"
        in buy(buyer, {"renew": license.key}, status=422).json["errors"]["items.0.renew"]
    )
    twice = buyer.post_json(
        "/api/store/checkout",
        {
            "billing": BILLING,
            "items": [{"renew": license.key}, {"upgrade": license.key, "to": "site-guard-agency"}],
        },
        status=422,
    ).json
    assert "twice" in twice["errors"]["items.1"]
    dbsession.rollback()
    assert dbsession.scalar(select(func.count()).select_from(Order)) == 2  # the paid ones only


@pytest.mark.parametrize(
    "item",
    [
        {"renew": "K", "product": "site-guard"},
        {"upgrade": "K"},
        {"renew": "K", "to": "site-guard"},
        {},
        {"renew": 5},
        {"renew": "K" * 65},
    ],
)
def test_malformed_items_are_422(buyer, license, item):
    body = buy(buyer, item, status=422).json
    assert body["code"] == "validation_failed"


def test_an_upgrade_charges_the_difference_and_moves_the_license(
    buyer, webhook, fake_stripe, license, dbsession, tiers
):
    placed = buy(buyer, {"upgrade": license.key, "to": "site-guard-agency"}).json["order"]
    order = order_of(dbsession, placed["number"])
    assert order.total == 12900 - 4900 and order.items[0].kind == "upgrade"
    old_expiry = license.expires_at
    assert pay(webhook, fake_stripe, order)[0]["status"] == "processed"
    upgraded = fresh(dbsession, License, license.id)
    assert upgraded.product_id == tiers["agency"].id and upgraded.max_activations == 10
    assert upgraded.features == ["agency", "pro"] and upgraded.expires_at == old_expiry
    # Going back down, sideways or to the same tier is no upgrade.
    down = buy(buyer, {"upgrade": license.key, "to": "site-guard"}, status=422).json
    assert "not a higher tier" in down["errors"]["items.0.to"]
    sideways = buy(buyer, {"upgrade": license.key, "to": "pixel-forge"}, status=422).json
    assert "not an upgrade" in sideways["errors"]["items.0.to"]


def test_a_license_revoked_before_the_payment_holds_the_order_for_review(
    buyer, webhook, fake_stripe, license, dbsession
):
    old = license.expires_at
    placed = buy(buyer, {"renew": license.key}).json["order"]
    set_license(dbsession, license, status="revoked")
    answer = pay(webhook, fake_stripe, order_of(dbsession, placed["number"]))[0]
    assert answer["status"] == "needs_review"
    assert order_status(dbsession, placed["number"]) == "needs_review"
    assert fresh(dbsession, License, license.id).expires_at == old
    assert changes(dbsession) == 0


def test_two_renewals_paid_at_the_same_moment_both_count(
    card_app, buyer, fake_stripe, license, dbsession
):
    old = license.expires_at
    numbers = [buy(buyer, {"renew": license.key}).json["order"]["number"] for _ in range(2)]
    signed = []
    for number in numbers:
        order = order_of(dbsession, number)
        session = fake_stripe.add_session(session_object(order.number, order.total))
        signed.append(delivery(event("checkout.session.completed", session)))
    barrier = threading.Barrier(len(signed))
    with serve(card_app) as url:

        def send(signed_delivery):
            body, headers = signed_delivery
            barrier.wait(timeout=30)
            return requests.post(
                f"{url}/api/webhooks/cardprovider", data=body, headers=headers, timeout=60
            )

        with ThreadPoolExecutor(max_workers=2) as pool:
            answers = list(pool.map(send, signed))
    assert [a.json()["status"] for a in answers] == ["processed", "processed"]
    assert fresh(dbsession, License, license.id).expires_at == old + 2 * YEAR
    assert changes(dbsession) == 2


@requires_postgresql
def test_a_renewal_storm_across_two_server_processes_extends_once(
    two_servers,  # noqa: F811 - the fixture imported above
    buyer,
    fake_stripe,
    license,
    dbsession,
):
    old = license.expires_at
    placed = buy(buyer, {"renew": license.key}).json["order"]
    order = order_of(dbsession, placed["number"])
    completed, responses = storm(two_servers, order, fake_stripe)
    assert [r.status_code for r in responses] == [200] * len(responses)
    statuses = [r.json()["status"] for r in responses]
    assert statuses.count("processed") >= 1 and set(statuses) <= {"processed", "duplicate"}
    assert fresh(dbsession, License, license.id).expires_at == old + YEAR
    assert changes(dbsession) == 1


def expiring_soon(dbsession, license) -> None:
    """The page offers a renewal only near the expiry (not the day after purchase)."""
    set_license(dbsession, license, expires_at=dt.datetime.now(dt.UTC) + dt.timedelta(days=10))


def test_the_account_page_offers_renewal_and_upgrade(buyer, license, dbsession):
    expiring_soon(dbsession, license)
    # The licenses page's buttons post no billing fields: the saved details are used.
    buyer.put_json("/api/account/billing", BILLING)
    page = buyer.get("/account/licenses", status=200)
    renew = next(f for f in page.forms.values() if "renew" in f.fields)
    assert renew["renew"].value == license.key
    assert "Renew until" in page.text and "Upgrade to SiteGuard Agency" in page.text
    response = renew.submit(status=303)
    assert response.location  # to the provider's checkout page
    dbsession.rollback()
    item = dbsession.scalar(select(OrderItem).where(OrderItem.kind == "renewal"))
    assert item.target_license_id == license.id


def test_renewing_from_the_page_without_saved_billing_details_asks_for_them(
    buyer, license, dbsession
):
    expiring_soon(dbsession, license)
    page = buyer.get("/account/licenses", status=200)
    renew = next(f for f in page.forms.values() if "renew" in f.fields)
    response = renew.submit(status=422)
    assert response.content_type == "text/html"
    assert "/account/billing" in response.text
    dbsession.rollback()
    assert dbsession.scalar(select(func.count()).select_from(Order)) == 1  # the paid one


@pytest.mark.parametrize(
    "fields",
    [
        {"renew": "AB\x00CD"},
        {"renew": "K" * 5000},
        {"upgrade": "KEY"},
        {"renew": "NOPE"},
    ],
)
def test_hostile_renewal_forms_are_422_pages(buyer, license, fields, dbsession):
    token = buyer.get("/account/licenses").forms
    csrf = next(iter(token.values()))["csrf_token"].value
    response = buyer.post("/checkout", {**fields, "csrf_token": csrf}, status=422)
    assert response.content_type == "text/html"
    dbsession.rollback()
    assert dbsession.scalar(select(func.count()).select_from(Order)) == 1  # the paid one
