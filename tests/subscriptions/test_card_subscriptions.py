"""Subscriptions through the card provider (Stripe's scheme), end to end: checkout on the
real app, the buyer paying on the fake provider, and the provider's signed events
delivered in every order, twice, and from two processes at once. Each paid period
extends the license once, to the provider's own period end (plus the grace while it
renews itself); the license, the leases and the manual renewal follow."""

from __future__ import annotations

import datetime as dt
import random

import pytest
from fakes.shop import event_row
from fakes.stripe_api import delivery
from helpers.app import requires_postgresql
from helpers.checkout import BILLING
from helpers.licensing import assert_error, call_body, lease_claims, post, runtime
from helpers.outbox import rows as outbox_rows
from helpers.payments import CARD_WEBHOOK, release_at_once
from helpers.subscriptions import GRACE, period_end, send, state, subscribe, the_subscription
from sqlalchemy import func, select

from cmsshop.models import Fulfilment, Invoice, License, LicenseChange, Order


def count(dbsession, model, *where) -> int:
    dbsession.rollback()
    return dbsession.scalar(select(func.count()).select_from(model).where(*where))


# --- checkout ---------------------------------------------------------------------------


def test_checkout_asks_the_provider_for_a_monthly_subscription(card_buyer, fake_stripe, monthly):
    number, _ = subscribe(card_buyer, fake_stripe)
    (created,) = fake_stripe.created
    assert created["mode"] == "subscription"
    assert created["subscription_data"]["metadata"]["orderNumber"] == number
    assert "payment_intent_data" not in created
    (line,) = created["line_items"]
    assert line["price_data"]["recurring"] == {"interval": "month", "interval_count": "1"}
    assert line["price_data"]["unit_amount"] == "4900"


def test_a_subscription_is_bought_alone(card_buyer, fake_stripe, monthly, dbsession):
    # (A coupon on one: tests/subscriptions/test_coupons.py.)
    body = {"items": [{"product": "site-guard"}, {"product": "themes"}]}
    before = count(dbsession, Order)
    refused = card_buyer.post_json(
        "/api/store/checkout", {"billing": BILLING, "acceptTerms": True, **body}, status=422
    ).json
    assert "items" in refused["errors"], refused
    assert {"code", "title", "message", "hints", "supportCode"} <= set(refused)
    assert count(dbsession, Order) == before
    assert fake_stripe.created == []


# --- the first period -------------------------------------------------------------------


@pytest.mark.parametrize("first", ["checkout.session.completed", "invoice.paid"])
def test_the_first_period_counts_once_whichever_event_comes_first(
    card_buyer, fake_stripe, webhook, monthly, dbsession, first
):
    number, events = subscribe(card_buyer, fake_stripe)
    other = "invoice.paid" if first == "checkout.session.completed" else first
    other = "checkout.session.completed" if first == "invoice.paid" else other
    answers = [send(webhook, events[first])["status"]]
    answers += [send(webhook, events[other])["status"] for _ in range(2)]
    answers.append(send(webhook, events["customer.subscription.created"])["status"])
    assert answers[0] == "processed"
    assert set(answers[1:3]) == {"duplicate"}
    subscription, license, periods = state(dbsession, number)
    assert subscription.status == "active"
    assert len(periods) == 1 and periods[0].order_id == subscription.order_id
    assert subscription.paid_through == period_end(fake_stripe)
    assert license.expires_at == subscription.paid_through + GRACE
    assert count(dbsession, Fulfilment) == 1
    assert count(dbsession, Invoice) == 1
    assert count(dbsession, License) == 1


def test_a_subscription_event_before_its_payment_changes_nothing(
    card_buyer, fake_stripe, webhook, monthly, dbsession
):
    number, events = subscribe(card_buyer, fake_stripe)
    answer = send(webhook, events["customer.subscription.created"])
    assert answer["status"] == "ignored"
    assert state(dbsession, number)[0] is None
    assert send(webhook, events["invoice.paid"])["status"] == "processed"


# --- renewals ---------------------------------------------------------------------------


def test_each_renewal_is_a_paid_renewal_order_counted_once(
    subscribed, fake_stripe, webhook, dbsession
):
    number, sub_id = subscribed
    events = fake_stripe.renew(sub_id)
    shuffled = events * 3
    random.Random(7).shuffle(shuffled)
    for payload in shuffled:
        send(webhook, payload)
    subscription, license, periods = state(dbsession, number)
    assert len(periods) == 2
    assert subscription.paid_through == period_end(fake_stripe) == periods[1].period_end
    assert periods[1].period_start == periods[0].period_end
    assert license.expires_at == subscription.paid_through + GRACE
    renewal = dbsession.get(Order, periods[1].order_id)
    assert (renewal.status, renewal.total, renewal.items[0].kind) == ("paid", 4900, "renewal")
    assert count(dbsession, Invoice) == 2
    change = dbsession.scalar(select(LicenseChange))
    assert change.new_expires_at == license.expires_at


def test_past_due_keeps_the_license_until_the_provider_gives_up(
    subscribed, fake_stripe, webhook, dbsession, customer
):
    number, sub_id = subscribed
    paid_through = state(dbsession, number)[0].paid_through
    for payload in fake_stripe.renew(sub_id, paid=False):
        send(webhook, payload)
    subscription, license, _ = state(dbsession, number)
    assert subscription.status == "past_due"
    assert license.expires_at == paid_through + GRACE  # still valid while retried
    # One mail, though two events said so, with the way to replace the card.
    (mail,) = [m for m in outbox_rows(dbsession) if m.kind == "subscription_payment_failed"]
    assert mail.to_address == customer.email
    assert "/account/subscriptions\n" in mail.text_body
    assert f"until {license.expires_at:%Y-%m-%d}" in mail.text_body
    for payload in fake_stripe.give_up(sub_id):
        send(webhook, payload)
    subscription, license, periods = state(dbsession, number)
    assert subscription.status == "ended" and len(periods) == 1
    assert license.expires_at == paid_through  # no grace once nothing is retried


def test_a_retried_payment_recovers_the_subscription(subscribed, fake_stripe, webhook, dbsession):
    number, sub_id = subscribed
    failed = fake_stripe.renew(sub_id, paid=False)
    for payload in failed:
        send(webhook, payload)
    invoice_id = failed[0]["data"]["object"]["id"]
    for payload in fake_stripe.retry(invoice_id):
        send(webhook, payload)
    subscription, license, periods = state(dbsession, number)
    assert subscription.status == "active" and len(periods) == 2
    assert license.expires_at == period_end(fake_stripe) + GRACE


def test_cancelling_at_period_end_keeps_the_paid_period_and_can_be_undone(
    subscribed, fake_stripe, webhook, dbsession
):
    number, sub_id = subscribed
    paid_through = state(dbsession, number)[0].paid_through
    for payload in fake_stripe.schedule_cancel(sub_id):
        send(webhook, payload)
    subscription, license, _ = state(dbsession, number)
    assert subscription.status == "cancel_scheduled"
    assert license.expires_at == paid_through
    for payload in fake_stripe.schedule_cancel(sub_id, cancel=False):
        send(webhook, payload)
    assert state(dbsession, number)[1].expires_at == paid_through + GRACE


def test_a_late_active_event_never_revives_an_ended_subscription(
    subscribed, fake_stripe, webhook, dbsession
):
    number, sub_id = subscribed
    resumed = fake_stripe.schedule_cancel(sub_id, cancel=False)  # "active", sent late
    ended = fake_stripe.end(sub_id)
    for payload in ended + resumed:
        send(webhook, payload)
    subscription, license, _ = state(dbsession, number)
    assert subscription.status == "ended"
    assert license.expires_at == subscription.paid_through
    # Even a stale read at the provider that still says "active" changes nothing.
    the_subscription(fake_stripe)["status"] = "active"
    answer = send(webhook, fake_stripe.schedule_cancel(sub_id, cancel=False)[0])
    assert answer["status"] == "ignored"
    assert state(dbsession, number)[0].status == "ended"


def test_an_unpaid_invoice_extends_nothing(subscribed, fake_stripe, webhook, dbsession):
    number, sub_id = subscribed
    failed = fake_stripe.renew(sub_id, paid=False)
    # A forged-looking "paid" event for the open invoice: the provider says it is not.
    invoice = dict(failed[0]["data"]["object"])
    from fakes.stripe_api import event

    answer = webhook(*delivery(event("invoice.paid", invoice)), status=409).json
    assert {"code", "title", "message", "hints", "supportCode"} <= set(answer)
    assert len(state(dbsession, number)[2]) == 1


def test_the_provider_down_leaves_the_event_to_be_retried(
    subscribed, fake_stripe, webhook, dbsession
):
    number, sub_id = subscribed
    events = fake_stripe.renew(sub_id)
    fake_stripe.fail_with = 500
    answer = webhook(*delivery(events[0]), status=503).json
    assert answer["code"]
    assert len(state(dbsession, number)[2]) == 1
    fake_stripe.fail_with = None
    assert send(webhook, events[0])["status"] == "processed"
    assert len(state(dbsession, number)[2]) == 2


# --- the license --------------------------------------------------------------------------


def test_no_manual_renewal_or_upgrade_while_the_subscription_lives(
    subscribed, card_buyer, dbsession
):
    number, _ = subscribed
    license = state(dbsession, number)[1]
    refused = card_buyer.post_json(
        "/api/store/checkout",
        {"billing": BILLING, "items": [{"renew": license.key}], "acceptTerms": True},
        status=422,
    ).json
    assert "subscription" in refused["errors"]["items.0.renew"]


def test_leases_stop_where_the_paid_period_and_grace_do(
    subscribed, fake_stripe, webhook, card_app, dbsession
):
    number, sub_id = subscribed
    license = state(dbsession, number)[1]
    client = runtime(card_app)
    body = call_body(license, product="site-guard")
    token = post(client, "activate", body, 201).json["lease"]
    _, claims = lease_claims(client, token)
    assert claims["exp"] <= int(license.expires_at.timestamp())
    for payload in fake_stripe.renew(sub_id, paid=False) + fake_stripe.give_up(sub_id):
        send(webhook, payload)
    # The provider gave up: the license ended with its paid period (here: still ahead).
    license = state(dbsession, number)[1]
    renewed = post(client, "validate", {**body, "nonce": "n-" + number}, 200).json
    _, claims = lease_claims(client, renewed["lease"])
    assert claims["exp"] <= int(license.expires_at.timestamp())
    # Once the paid period is over, the product is told so at its next check-in.
    dbsession.rollback()
    dbsession.execute(
        License.__table__.update()
        .where(License.id == license.id)
        .values(expires_at=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1))
    )
    dbsession.commit()
    assert_error(post(client, "validate", {**body, "nonce": "m-" + number}), 403, "license_expired")


# --- storms -------------------------------------------------------------------------------


@requires_postgresql
def test_a_renewal_storm_across_two_processes_counts_once(
    two_servers, subscribed, fake_stripe, dbsession
):
    number, sub_id = subscribed
    events = fake_stripe.renew(sub_id)
    storm = events * 10
    random.Random(11).shuffle(storm)
    webhooks = [url + CARD_WEBHOOK for url in two_servers]
    answers = release_at_once(webhooks, [delivery(payload) for payload in storm])
    assert {a.status_code for a in answers} == {200}, [a.text for a in answers]
    subscription, license, periods = state(dbsession, number)
    assert len(periods) == 2
    assert count(dbsession, Order, Order.status == "paid") == 2
    assert count(dbsession, LicenseChange) == 1
    assert license.expires_at == subscription.paid_through + GRACE


# --- refunds ------------------------------------------------------------------------------


def test_refunding_one_renewal_takes_back_that_period_only(
    subscribed, fake_stripe, webhook, dbsession
):
    number, sub_id = subscribed
    first_paid_through = state(dbsession, number)[0].paid_through
    renewal = fake_stripe.renew(sub_id)
    for payload in renewal:
        send(webhook, payload)
    invoice = renewal[0]["data"]["object"]
    intent = invoice["payments"]["data"][0]["payment"]["payment_intent"]
    status, refund = fake_stripe.create_refund({"payment_intent": intent}, None)
    assert status == 200
    assert send(webhook, fake_stripe.refund_event(refund["id"]))["status"] == "processed"
    subscription, license, periods = state(dbsession, number)
    assert [p.refunded_at is not None for p in periods] == [False, True]
    assert subscription.paid_through == first_paid_through
    # The latest period refunded in full cancels the subscription at Stripe once the
    # event is in (test_refunds.py), so the license ends with the period before it.
    assert subscription.status == "ended" and fake_stripe.cancel_calls
    assert license.expires_at == first_paid_through
    renewal_order = dbsession.get(Order, periods[1].order_id)
    assert renewal_order.status == "refunded"
    assert dbsession.get(Order, subscription.order_id).status == "paid"
    # A later state event does not give the refunded period back.
    for payload in fake_stripe.held:
        send(webhook, payload)
    assert state(dbsession, number)[1].expires_at == first_paid_through


def test_a_first_payment_that_does_not_add_up_holds_the_renewals_for_review(
    card_buyer, fake_stripe, webhook, monthly, dbsession
):
    number, events = subscribe(card_buyer, fake_stripe)
    (sub_id,) = fake_stripe.subscriptions
    first_invoice = events["invoice.paid"]["data"]["object"]["id"]
    fake_stripe.invoices[first_invoice]["amount_paid"] = 100  # not what the order costs
    assert send(webhook, events["invoice.paid"])["status"] == "needs_review"
    order = dbsession.scalar(select(Order).where(Order.number == number))
    assert order.status == "needs_review"
    renewal = fake_stripe.renew(sub_id)[0]
    answer = send(webhook, renewal)
    assert answer["status"] == "needs_review"  # answered 200 and kept, not retried forever
    row = event_row(dbsession, renewal["id"])
    assert row.status == "processed" and "held for review" in row.last_error
    assert state(dbsession, number)[0] is None
    assert count(dbsession, License) == 0
