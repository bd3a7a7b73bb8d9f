"""Refunds and chargebacks of paid upgrades and renewals, delivered as the card provider's
signed events: a full refund or a lost dispute takes the change back (an upgrade to the
tier before, seats over its limit deactivated newest first, the customer told by mail; a
renewal's added period), a partial refund goes to the admin's review list, and each
happens once however often and in whatever order the events arrive."""

from __future__ import annotations

import datetime as dt

import pytest
from fakes.shop import order_status
from fakes.stripe_api import charge_object, dispute_object, event
from helpers.clients import logged_in
from helpers.license_changes import buy, fresh, order_of, pay, set_license
from helpers.licensing import count
from helpers.payments import send
from sqlalchemy import select

from cmsshop.models import (
    Activation,
    License,
    LicenseAuditEntry,
    LicenseChange,
    LicenseReview,
    OutboxMessage,
)
from cmsshop.services.licensing.records import fingerprint_hash
from cmsshop.util import utcnow

YEAR = dt.timedelta(days=365)
MAIL_KIND = "license_change_reversed"


def install(dbsession, license, domain: str, minutes_ago: int, environment="production"):
    """An active installation of ``license`` activated ``minutes_ago``."""
    activation = Activation(
        license_id=license.id,
        fingerprint=f"install-{domain}",
        fingerprint_sha256=fingerprint_hash(f"install-{domain}"),
        domain=domain,
        environment=environment,
        active=True,
        activated_at=utcnow() - dt.timedelta(minutes=minutes_ago),
    )
    dbsession.add(activation)
    dbsession.commit()
    return activation


def active_domains(dbsession, license) -> list[str]:
    dbsession.rollback()
    return sorted(
        dbsession.scalars(
            select(Activation.domain).where(
                Activation.license_id == license.id, Activation.active.is_(True)
            )
        )
    )


def mails(dbsession) -> list[OutboxMessage]:
    dbsession.rollback()
    return list(dbsession.scalars(select(OutboxMessage).where(OutboxMessage.kind == MAIL_KIND)))


@pytest.fixture
def upgraded(card_buyer, webhook, fake_stripe, tiered_license, tiers, dbsession):
    """The license with features an admin gave it, upgraded to SiteGuard Agency (10 seats)
    and then installed on six production sites and one staging site: (license, order,
    payment intent)."""
    set_license(dbsession, tiered_license, features=["beta"])
    placed = buy(card_buyer, {"upgrade": tiered_license.key, "to": "site-guard-agency"})
    order = order_of(dbsession, placed.json["order"]["number"])
    answer, _, intent = pay(webhook, fake_stripe, order)
    assert answer["status"] == "processed"
    license = fresh(dbsession, License, tiered_license.id)
    assert (license.product_id, license.max_activations) == (tiers["agency"].id, 10)
    for n in range(6):  # site0 is the oldest, site5 the newest
        install(dbsession, license, f"site{n}.example", minutes_ago=60 - n)
    install(dbsession, license, "staging.site0.example", minutes_ago=1, environment="staging")
    return license, order, intent


def assert_back_on_the_old_tier(dbsession, license, tiers):
    back = fresh(dbsession, License, license.id)
    assert back.product_id == tiers["guard"].id
    assert back.max_activations == 3
    assert back.features == ["beta"]  # what it had before, not the product's defaults
    assert back.status == "active"
    # The three oldest production seats stay; the staging seat counts against no tier.
    assert active_domains(dbsession, license) == [
        "site0.example",
        "site1.example",
        "site2.example",
        "staging.site0.example",
    ]
    dropped = dbsession.scalars(
        select(Activation).where(Activation.license_id == license.id, Activation.active.is_(False))
    ).all()
    assert all(a.deactivated_at is not None for a in dropped)


def assert_told_once(dbsession, customer, license):
    sent = mails(dbsession)
    assert len(sent) == 1
    assert sent[0].to_address == customer.email
    for part in (sent[0].text_body, sent[0].html_body):
        assert license.key in part
        assert "SiteGuard Agency" in part and "SiteGuard" in part
        assert "3 seats" in part
        assert "site5.example" in part and "site3.example" in part


def test_a_refunded_upgrade_goes_back_to_the_tier_before_once(
    webhook, upgraded, tiers, customer, dbsession
):
    license, order, intent = upgraded
    refund = event("charge.refunded", charge_object(intent, order.total))
    assert send(webhook, refund, 200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "refunded"
    assert_back_on_the_old_tier(dbsession, license, tiers)
    assert_told_once(dbsession, customer, license)
    change = dbsession.scalar(select(LicenseChange).where(LicenseChange.license_id == license.id))
    assert change.reversed_at is not None and change.reversal == "refund"

    # The same event again, and another full refund of the same charge: nothing more.
    assert send(webhook, refund, 200).json["status"] == "duplicate"
    again = event("charge.refunded", charge_object(intent, order.total))
    assert send(webhook, again, 200).json["status"] == "duplicate"
    assert_back_on_the_old_tier(dbsession, license, tiers)
    assert len(mails(dbsession)) == 1
    rollbacks = dbsession.scalars(
        select(LicenseAuditEntry).where(
            LicenseAuditEntry.license_id == license.id,
            LicenseAuditEntry.action == "upgrade_reversed",
        )
    ).all()
    assert len(rollbacks) == 1 and order.number in rollbacks[0].detail


def test_a_lost_dispute_of_an_upgrade_goes_back_to_the_tier_before_once(
    webhook, upgraded, tiers, customer, dbsession
):
    license, order, intent = upgraded
    opened = event("charge.dispute.created", dispute_object(intent))
    assert send(webhook, opened, 200).json["status"] == "processed"
    # While the dispute is open the license keeps what was paid for: it may still be won.
    assert fresh(dbsession, License, license.id).max_activations == 10
    lost = event("charge.dispute.closed", dispute_object(intent, "lost"))
    assert send(webhook, lost, 200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "refunded"
    assert_back_on_the_old_tier(dbsession, license, tiers)
    assert_told_once(dbsession, customer, license)
    assert send(webhook, lost, 200).json["status"] == "duplicate"
    # A refund of the same charge arriving after the chargeback changes nothing more.
    late = event("charge.refunded", charge_object(intent, order.total))
    assert send(webhook, late, 200).json["status"] == "duplicate"
    assert_back_on_the_old_tier(dbsession, license, tiers)
    assert len(mails(dbsession)) == 1
    change = dbsession.scalar(select(LicenseChange).where(LicenseChange.license_id == license.id))
    assert change.reversal == "chargeback"


def test_a_refunded_renewal_takes_back_the_added_period(
    card_buyer, webhook, fake_stripe, tiered_license, customer, dbsession
):
    old = tiered_license.expires_at
    placed = buy(card_buyer, {"renew": tiered_license.key}).json["order"]
    order = order_of(dbsession, placed["number"])
    _, _, intent = pay(webhook, fake_stripe, order)
    assert fresh(dbsession, License, tiered_license.id).expires_at == old + YEAR
    refund = event("charge.refunded", charge_object(intent, order.total))
    assert send(webhook, refund, 200).json["status"] == "processed"
    assert fresh(dbsession, License, tiered_license.id).expires_at == old
    assert send(webhook, refund, 200).json["status"] == "duplicate"
    assert fresh(dbsession, License, tiered_license.id).expires_at == old
    sent = mails(dbsession)
    assert len(sent) == 1 and f"{old:%Y-%m-%d}" in sent[0].text_body


def test_a_refunded_renewal_a_later_renewal_builds_on_goes_to_review(
    card_buyer, webhook, fake_stripe, tiered_license, admin, card_app, dbsession
):
    old = tiered_license.expires_at
    paid = []
    for _ in range(2):
        placed = buy(card_buyer, {"renew": tiered_license.key}).json["order"]
        order = order_of(dbsession, placed["number"])
        paid.append((order, pay(webhook, fake_stripe, order)[2]))
    assert fresh(dbsession, License, tiered_license.id).expires_at == old + 2 * YEAR
    first, intent = paid[0]
    refund = event("charge.refunded", charge_object(intent, first.total))
    assert send(webhook, refund, 200).json["status"] == "processed"
    # The second renewal's year was counted from the first one's: an admin decides.
    assert fresh(dbsession, License, tiered_license.id).expires_at == old + 2 * YEAR
    review = dbsession.scalar(select(LicenseReview))
    assert review.resolved_at is None and first.number in review.note
    page = logged_in(card_app, admin).get(f"/admin/licenses/{tiered_license.key}")
    assert first.number in page.text and "later renewal" in page.text
    assert mails(dbsession) == []


def test_a_partial_refund_goes_to_the_review_list_and_changes_nothing(
    webhook, upgraded, tiers, admin, card_app, dbsession
):
    license, order, intent = upgraded
    partial = event("charge.refunded", charge_object(intent, order.total, 1000))
    assert send(webhook, partial, 200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "paid"
    kept = fresh(dbsession, License, license.id)
    assert (kept.product_id, kept.max_activations) == (tiers["agency"].id, 10)
    assert len(active_domains(dbsession, license)) == 7
    assert mails(dbsession) == []

    assert send(webhook, partial, 200).json["status"] == "duplicate"
    more = event("charge.refunded", charge_object(intent, order.total, 3000))
    assert send(webhook, more, 200).json["status"] == "processed"
    # Delivered late: an earlier partial refund smaller than what is known changes nothing.
    stale = event("charge.refunded", charge_object(intent, order.total, 500))
    assert send(webhook, stale, 200).json["status"] in ("processed", "ignored")
    dbsession.rollback()  # a fresh read transaction (SQLite snapshot)
    assert count(dbsession, LicenseReview) == 1
    review = dbsession.scalar(select(LicenseReview))
    assert review.refunded_amount == 3000 and review.resolved_at is None

    admin_pages = logged_in(card_app, admin)
    dashboard = admin_pages.get("/admin")
    card = dashboard.html.find(id="license-reviews")
    assert card is not None and card.find(class_="figure").text.strip() == "1"
    detail = admin_pages.get(f"/admin/licenses/{license.key}")
    notes = detail.html.find(id="license-reviews")
    assert notes is not None
    assert order.number in notes.text and "partial refund" in notes.text.lower()
    assert "30.00 of EUR80.00" in notes.text
    listed = admin_pages.get("/admin/licenses?review=open")
    assert license.key in listed.text

    # The admin has looked: the note is resolved and the counter goes back to 0.
    resolve = next(f for f in detail.forms.values() if f.action.endswith("/resolve"))
    resolve.submit(status=303)
    dashboard = admin_pages.get("/admin")
    assert dashboard.html.find(id="license-reviews").find(class_="figure").text.strip() == "0"
    assert admin_pages.get(f"/admin/licenses/{license.key}").html.find(id="license-reviews") is None
    assert license.key not in admin_pages.get("/admin/licenses?review=open").text
