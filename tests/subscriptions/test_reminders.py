"""Reminders before a long subscription renews itself (cmsshop-admin remind-renewals):
one per renewal date, with the card's expiry when it falls before, none for a monthly
subscription, and still one when the provider cannot say what card it holds."""

from __future__ import annotations

import pytest
from helpers.outbox import rows as outbox_rows
from helpers.subscriptions import deliver_all, subscribe
from sqlalchemy import update

from cmsshop.models import SubscriptionPlan
from cmsshop.scripts.admin import main as admin_main

RENEWING = "subscription_renewing"


@pytest.fixture
def yearly(dbsession, monthly):
    dbsession.execute(update(SubscriptionPlan).values(interval="year"))
    dbsession.commit()


def buy(card_buyer, fake_stripe, webhook) -> str:
    number, events = subscribe(card_buyer, fake_stripe)
    deliver_all(webhook, [events["invoice.paid"]])
    return number


def reminders(dbsession):
    return [m for m in outbox_rows(dbsession) if m.kind == RENEWING]


def test_a_yearly_subscription_is_reminded_once_with_the_cards_expiry(
    yearly, card_buyer, fake_stripe, webhook, card_ini, dbsession, capsys, customer
):
    fake_stripe.card_expiry = (1, 2000 + 99)  # good through the renewal
    buy(card_buyer, fake_stripe, webhook)
    assert admin_main([card_ini, "remind-renewals"]) == 0  # 14 days ahead: not yet
    assert "queued 0 renewal reminders" in capsys.readouterr().out
    assert admin_main([card_ini, "remind-renewals", "--days", "366"]) == 0
    assert "queued 1 renewal reminder " in capsys.readouterr().out
    (mail,) = reminders(dbsession)
    assert mail.to_address == customer.email
    assert "EUR49.00 will be charged" in mail.text_body
    assert "expires" not in mail.text_body
    assert "/account/subscriptions" in mail.text_body
    assert admin_main([card_ini, "remind-renewals", "--days", "366"]) == 0
    assert "queued 0 renewal reminders" in capsys.readouterr().out


def test_a_card_expiring_before_the_renewal_is_named(
    yearly, card_buyer, fake_stripe, webhook, card_ini, dbsession
):
    import datetime as dt

    soon = dt.date.today() + dt.timedelta(days=40)
    fake_stripe.card_expiry = (soon.month, soon.year)
    buy(card_buyer, fake_stripe, webhook)
    assert admin_main([card_ini, "remind-renewals", "--days", "366"]) == 0
    (mail,) = reminders(dbsession)
    assert f"The card on file expires {soon.month:02d}/{soon.year}" in mail.text_body


def test_the_provider_down_still_reminds_without_the_card(
    yearly, card_buyer, fake_stripe, webhook, card_ini, dbsession
):
    buy(card_buyer, fake_stripe, webhook)
    fake_stripe.fail_with = 500
    assert admin_main([card_ini, "remind-renewals", "--days", "366"]) == 0
    fake_stripe.fail_with = None
    (mail,) = reminders(dbsession)
    assert "expires" not in mail.text_body


def test_a_monthly_subscription_gets_none(subscribed, card_ini, dbsession):
    assert admin_main([card_ini, "remind-renewals", "--days", "60"]) == 0
    assert reminders(dbsession) == []


def test_a_yearly_subscription_cancelled_at_its_end_gets_none(
    yearly, card_buyer, fake_stripe, webhook, card_ini, dbsession
):
    buy(card_buyer, fake_stripe, webhook)
    (subscription,) = fake_stripe.subscriptions.values()
    deliver_all(webhook, fake_stripe.schedule_cancel(subscription["id"]))
    assert admin_main([card_ini, "remind-renewals", "--days", "366"]) == 0
    assert reminders(dbsession) == []


@pytest.mark.parametrize("bad", ["0", "-1", "x", "3651"])
def test_days_must_be_sensible(card_ini, bad, capsys):
    with pytest.raises(SystemExit):
        admin_main([card_ini, "remind-renewals", "--days", bad])
