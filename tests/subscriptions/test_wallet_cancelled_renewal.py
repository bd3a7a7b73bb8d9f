"""A PayPal renewal charged just before the subscription ends (cancelled, expired, or
suspended and then cancelled). PayPal then drops ``next_billing_time`` and states no
end for that sale's period; the period ends one plan cycle after the sale (the plan's
frequency, by calendar), which is where PayPal would have billed next. The payment is
recorded once whatever the order of its events, duplicates included, the license runs
to that end without grace, and the reconciliation records such a sale whose event
never came."""

from __future__ import annotations

import datetime as dt
import random

import pytest
from fakes.paypal import WALLET_ROUTE, body_of, signed
from fakes.paypal import event as paypal_event
from helpers.app import requires_postgresql
from helpers.licensing import assert_error, call_body, lease_claims, post, runtime
from helpers.payments import release_at_once
from helpers.subscriptions import GRACE, next_billing_time, state
from sqlalchemy import func, select

from cmsshop.models import License, LicenseChange, Order
from cmsshop.scripts.admin import main as admin_main
from cmsshop.services.payments.walletprovider.subscriptions import (
    advance,
    plan_free_trial,
    plan_frequency,
)

LIST = "/api/dashboard/subscriptions"


def count(dbsession, model, *where) -> int:
    dbsession.rollback()
    return dbsession.scalar(select(func.count()).select_from(model).where(*where))


def deliver(send, payloads) -> list[str]:
    return [send(payload, status=200).json["status"] for payload in payloads]


def charged_then_ended(paypal, sub_id: str, end: str) -> tuple[list, list, dt.datetime]:
    """PayPal renews, then the subscription ends: (the sale's event, the events of the
    end and of what led to it, where PayPal would have billed next), none sent."""
    before = []
    if end == "suspend-then-cancel":
        before = paypal.fail(sub_id) + paypal.suspend(sub_id)
    sale = paypal.renew(sub_id)  # settles what was outstanding: ACTIVE again
    due = next_billing_time(paypal, sub_id)
    ended = paypal.expire(sub_id) if end == "expire" else paypal.cancel(sub_id)
    assert "next_billing_time" not in paypal.subscriptions[sub_id]["billing_info"]
    return sale, before + ended, due


def assert_recorded_once(dbsession, number: str, due: dt.datetime) -> None:
    subscription, license, periods = state(dbsession, number)
    assert subscription.status == "ended"
    assert len(periods) == 2
    assert periods[1].period_start == periods[0].period_end
    assert periods[1].period_end == due == subscription.paid_through
    assert license.expires_at == due  # an ended subscription: no grace
    renewal = dbsession.get(Order, periods[1].order_id)
    assert (renewal.status, renewal.total, renewal.items[0].kind) == ("paid", 4900, "renewal")
    assert count(dbsession, Order, Order.status == "paid") == 2
    assert count(dbsession, LicenseChange) == 1


@pytest.mark.parametrize("end", ["cancel", "expire", "suspend-then-cancel"])
def test_the_sale_arriving_after_the_end_is_recorded_to_one_plan_cycle(
    wallet_subscribed, paypal, send, dbsession, end
):
    number, sub_id = wallet_subscribed
    sale, ended, due = charged_then_ended(paypal, sub_id, end)
    assert "processed" in deliver(send, ended)  # the first one refetched reads it ended
    subscription, license, _ = state(dbsession, number)
    assert subscription.status == "ended" and license.expires_at == subscription.paid_through
    assert deliver(send, sale + sale) == ["processed", "duplicate"]
    assert_recorded_once(dbsession, number, due)
    plans = [b for b in paypal.bodies if b["path"].startswith("/v1/billing/plans/")]
    assert plans  # the end was the plan's frequency, read from PayPal


def test_the_sale_recorded_before_the_cancellation_is_a_duplicate_after_it(
    wallet_subscribed, paypal, send, dbsession
):
    number, sub_id = wallet_subscribed
    (sale,) = paypal.renew(sub_id)
    due = next_billing_time(paypal, sub_id)
    assert deliver(send, [sale]) == ["processed"]
    subscription, license, _ = state(dbsession, number)
    assert license.expires_at == due + GRACE  # still renewing: the grace
    assert deliver(send, paypal.cancel(sub_id)) == ["processed"]
    # PayPal delivers the sale again after the cancellation (the same event, and another
    # event about the same sale): its period is recorded already, whatever its end now.
    again = paypal_event(sale["event_type"], sale["resource"], "sale")
    assert deliver(send, [sale, again]) == ["duplicate", "duplicate"]
    assert_recorded_once(dbsession, number, due)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_both_events_duplicated_and_shuffled_count_once(
    wallet_subscribed, paypal, send, dbsession, seed
):
    number, sub_id = wallet_subscribed
    sale, ended, due = charged_then_ended(paypal, sub_id, "cancel")
    storm = (sale + ended) * 3
    random.Random(seed).shuffle(storm)
    statuses = deliver(send, storm)
    assert statuses.count("processed") >= 1 and set(statuses) <= {
        "processed",
        "duplicate",
        "ignored",
    }
    assert_recorded_once(dbsession, number, due)


def test_the_account_cancelling_moments_after_a_charge_keeps_the_paid_period(
    wallet_subscribed, wallet_buyer, wallet_app, paypal, send, dbsession
):
    number, sub_id = wallet_subscribed
    (sale,) = paypal.renew(sub_id)  # charged, its event not in yet
    due = next_billing_time(paypal, sub_id)
    (item,) = wallet_buyer.get(LIST).json["items"]
    wallet_buyer.post(f"{LIST}/{item['id']}/cancel")
    assert deliver(send, [sale]) == ["processed"]
    assert_recorded_once(dbsession, number, due)
    # Leases and update checks run to the end of that period, and stop there.
    license = state(dbsession, number)[1]
    client = runtime(wallet_app)
    body = call_body(license, product="site-guard")
    token = post(client, "activate", body, 201).json["lease"]
    _, claims = lease_claims(client, token)
    assert claims["exp"] <= int(due.timestamp())
    dbsession.rollback()
    dbsession.execute(
        License.__table__.update()
        .where(License.id == license.id)
        .values(expires_at=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1))
    )
    dbsession.commit()
    assert_error(post(client, "validate", {**body, "nonce": "m-" + number}), 403, "license_expired")


def test_the_reconciliation_records_the_sale_whose_event_never_came(
    wallet_subscribed, wallet_buyer, paypal, send, wallet_ini, dbsession, capsys
):
    number, sub_id = wallet_subscribed
    paypal.renew(sub_id)  # the sale's event is lost
    due = next_billing_time(paypal, sub_id)
    (item,) = wallet_buyer.get(LIST).json["items"]
    wallet_buyer.post(f"{LIST}/{item['id']}/cancel")  # ended here at once
    deliver(send, paypal.held)  # PayPal's own CANCELLED
    assert state(dbsession, number)[0].status == "ended"
    # The daily pass (no --all) still compares a subscription that ended lately.
    assert admin_main([wallet_ini, "reconcile-subscriptions"]) == 0
    assert capsys.readouterr().out.count("recorded: processed") == 1
    assert_recorded_once(dbsession, number, due)
    assert admin_main([wallet_ini, "reconcile-subscriptions"]) == 0
    assert "recorded" not in capsys.readouterr().out
    assert_recorded_once(dbsession, number, due)


def test_a_cycle_ends_by_calendar_as_paypal_bills():
    jan31 = dt.datetime(2027, 1, 31, 9, 30, tzinfo=dt.UTC)
    assert advance(jan31, ("MONTH", 1)) == dt.datetime(2027, 2, 28, 9, 30, tzinfo=dt.UTC)
    assert advance(jan31, ("MONTH", 3)) == dt.datetime(2027, 4, 30, 9, 30, tzinfo=dt.UTC)
    leap = dt.datetime(2028, 2, 29, tzinfo=dt.UTC)
    assert advance(leap, ("YEAR", 1)) == dt.datetime(2029, 2, 28, tzinfo=dt.UTC)
    assert advance(jan31, ("WEEK", 2)) == jan31 + dt.timedelta(days=14)
    assert advance(jan31, ("DAY", 3)) == jan31 + dt.timedelta(days=3)
    regular = {"tenure_type": "REGULAR", "frequency": {"interval_unit": "MONTH"}}
    trial = {"tenure_type": "TRIAL", "frequency": {"interval_unit": "DAY", "interval_count": 7}}
    assert plan_frequency({"billing_cycles": [trial, regular]}) == ("MONTH", 1)
    # What PayPal could not bill, or cannot be read, gives no end (the event waits).
    for frequency in (
        {"interval_unit": "MONTH", "interval_count": 13},
        {"interval_unit": "FORTNIGHT", "interval_count": 1},
        {"interval_unit": "MONTH", "interval_count": "1"},
        {"interval_unit": "DAY", "interval_count": 0},
        None,
    ):
        cycle = {"tenure_type": "REGULAR", "frequency": frequency}
        assert plan_frequency({"billing_cycles": [cycle]}) is None
    assert plan_frequency({"billing_cycles": "x"}) is None and plan_frequency({}) is None


def test_the_plan_says_whether_its_trial_cycle_is_free():
    regular = {"tenure_type": "REGULAR", "pricing_scheme": {"fixed_price": {}}}

    def plan(*trial_price) -> dict:
        trial = {"tenure_type": "TRIAL"}
        if trial_price:
            trial["pricing_scheme"] = {"fixed_price": trial_price[0]}
        return {"billing_cycles": [trial, regular]}

    assert plan_free_trial(plan()) is True  # no pricing scheme: free
    assert plan_free_trial(plan({"currency_code": "EUR", "value": "0.00"})) is True
    assert plan_free_trial(plan({"currency_code": "EUR", "value": "46.65"})) is False
    assert plan_free_trial({"billing_cycles": [regular]}) is False  # no trial cycle
    # Unreadable: not known (the subscription's own record is read instead).
    assert plan_free_trial(plan({"currency_code": "EUR", "value": "lots"})) is None
    assert plan_free_trial(plan({"value": "1.00"})) is None
    assert plan_free_trial({"billing_cycles": "x"}) is None and plan_free_trial({}) is None


def test_a_plan_paypal_cannot_read_leaves_the_sale_to_be_retried(
    wallet_subscribed, paypal, send, dbsession
):
    number, sub_id = wallet_subscribed
    sale, ended, due = charged_then_ended(paypal, sub_id, "cancel")
    deliver(send, ended)
    plan_id = paypal.subscriptions[sub_id]["plan_id"]
    saved = paypal.plans.pop(plan_id)
    answer = send(sale[0], status=503).json
    assert {"code", "title", "message", "hints", "supportCode"} <= set(answer)
    assert len(state(dbsession, number)[2]) == 1
    paypal.plans[plan_id] = saved
    assert deliver(send, sale) == ["processed"]
    assert_recorded_once(dbsession, number, due)


# --- storms -------------------------------------------------------------------------------


@pytest.fixture
def server_settings(wallet_settings):
    """two_servers' processes pay with the wallet provider."""
    return wallet_settings


@requires_postgresql
def test_the_sale_and_the_cancellation_across_two_processes_count_once(
    two_servers, wallet_subscribed, paypal, pki, cert_url, dbsession
):
    number, sub_id = wallet_subscribed
    sale, ended, due = charged_then_ended(paypal, sub_id, "cancel")
    storm = (sale + ended) * 6
    random.Random(7).shuffle(storm)
    deliveries = [(body, signed(pki, cert_url, body)) for body in map(body_of, storm)]
    answers = release_at_once([url + WALLET_ROUTE for url in two_servers], deliveries)
    assert {a.status_code for a in answers} == {200}, [a.text for a in answers]
    assert_recorded_once(dbsession, number, due)
