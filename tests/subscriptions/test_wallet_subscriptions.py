"""Subscriptions through the wallet provider (PayPal's scheme), end to end: checkout on
the real app making a PayPal plan and subscription, the buyer approving on the fake
PayPal, and PayPal's signed events delivered in every order, twice, and from two
processes at once. Each paid sale extends the license once, to PayPal's own next
billing time; a sale whose event names no subscription is matched or parked for the
reconciliation; the customer's cancellation is immediate at PayPal and keeps the
period paid for."""

from __future__ import annotations

import random

import pytest
from fakes.paypal import WALLET_ROUTE, body_of, new_id, signed
from fakes.paypal import event as paypal_event
from helpers.app import requires_postgresql
from helpers.clients import logged_in, new_client
from helpers.outbox import rows as outbox_rows
from helpers.payments import release_at_once
from helpers.subscriptions import (
    GRACE,
    checkout_wallet,
    next_billing_time,
    state,
    subscribe_wallet,
)
from sqlalchemy import func, select

from cmsshop.models import (
    Fulfilment,
    Invoice,
    LicenseChange,
    Order,
    ParkedPayment,
    PaymentEvent,
    SubscriptionPlan,
    SubscriptionProviderPlan,
)
from cmsshop.scripts.admin import main as admin_main
from cmsshop.util import isoformat_z

LIST = "/api/dashboard/subscriptions"


def count(dbsession, model, *where) -> int:
    dbsession.rollback()
    return dbsession.scalar(select(func.count()).select_from(model).where(*where))


def deliver(send, payloads) -> list[str]:
    return [send(payload, status=200).json["status"] for payload in payloads]


def sale_id_of(payload: dict) -> str:
    return payload["resource"]["id"]


# --- checkout ---------------------------------------------------------------------------


def test_checkout_makes_a_plan_once_and_a_subscription_per_order(
    wallet_buyer, paypal, monthly, dbsession
):
    placed = checkout_wallet(wallet_buyer)
    number = placed["order"]["number"]
    (sub,) = paypal.subscriptions.values()
    assert placed["redirectUrl"] == sub["links"][0]["href"]  # PayPal's approval page
    assert (sub["status"], sub["custom_id"]) == ("APPROVAL_PENDING", number)
    (plan,) = paypal.plans.values()
    assert sub["plan_id"] == plan["id"]
    (cycle,) = plan["billing_cycles"]
    assert cycle["frequency"] == {"interval_unit": "MONTH", "interval_count": 1}
    assert (cycle["tenure_type"], cycle["total_cycles"]) == ("REGULAR", 0)
    assert cycle["pricing_scheme"]["fixed_price"] == {"currency_code": "EUR", "value": "49.00"}
    (created,) = [b for b in paypal.bodies if b["path"] == "/v1/billing/subscriptions"]
    assert created["headers"]["PayPal-Request-Id"] == f"cmsshop-subscription-{number}"
    assert created["body"]["application_context"]["return_url"].startswith("http")
    # The same product, currency, amount and cycle: the plan is reused.
    checkout_wallet(wallet_buyer)
    assert len(paypal.subscriptions) == 2
    assert (len(paypal.plans), len(paypal.products)) == (1, 1)
    assert count(dbsession, SubscriptionProviderPlan) == 1
    # Another cycle is another plan, for the same PayPal product.
    dbsession.execute(
        SubscriptionPlan.__table__.update()
        .where(SubscriptionPlan.id == monthly.id)
        .values(interval_count=3)
    )
    dbsession.commit()
    checkout_wallet(wallet_buyer)
    assert (len(paypal.plans), len(paypal.products)) == (2, 1)
    assert count(dbsession, SubscriptionProviderPlan) == 2


def test_a_cycle_paypal_cannot_bill_is_refused(wallet_buyer, paypal, monthly, dbsession):
    dbsession.execute(
        SubscriptionPlan.__table__.update()
        .where(SubscriptionPlan.id == monthly.id)
        .values(interval_count=13)
    )
    dbsession.commit()
    refused = checkout_wallet(wallet_buyer, status=422)
    assert "12" in refused["errors"]["provider"]
    assert {"code", "title", "message", "hints", "supportCode"} <= set(refused)
    assert paypal.count("/v1/") == 0


def test_paypal_down_at_checkout_charges_nothing(wallet_buyer, paypal, monthly, dbsession):
    paypal.fail_status = 503
    answer = checkout_wallet(wallet_buyer, status=503)
    assert answer["code"] == "provider_unavailable"
    paypal.fail_status = None
    assert count(dbsession, Order, Order.status == "pending") == 0
    assert paypal.subscriptions == {}


# --- the first period -------------------------------------------------------------------


@pytest.mark.parametrize("sale_first", [True, False])
def test_the_first_payment_counts_once_in_either_order(
    wallet_buyer, paypal, send, monthly, dbsession, sale_first
):
    number, sub_id, (activated, sale) = subscribe_wallet(wallet_buyer, paypal)
    ordered = [sale, activated] if sale_first else [activated, sale]
    answers = deliver(send, ordered + ordered)
    # ACTIVATED before the payment changes nothing (no period yet); after it, it is the
    # state already applied.
    assert answers[0] == ("processed" if sale_first else "ignored")
    assert answers[2:] == ["duplicate", "duplicate"]
    subscription, license, periods = state(dbsession, number)
    assert subscription.status == "active"
    assert len(periods) == 1 and periods[0].order_id == subscription.order_id
    assert periods[0].provider_invoice_id == sale_id_of(sale)
    assert subscription.paid_through == next_billing_time(paypal, sub_id)
    assert license.expires_at == subscription.paid_through + GRACE
    assert (
        subscription.provider_customer_id == paypal.subscriptions[sub_id]["subscriber"]["payer_id"]
    )
    assert dbsession.get(Order, subscription.order_id).status == "paid"
    assert count(dbsession, Fulfilment) == 1
    assert count(dbsession, Invoice) == 1


# --- renewals ---------------------------------------------------------------------------


def test_each_renewal_is_one_paid_renewal_order(wallet_subscribed, paypal, send, dbsession):
    number, sub_id = wallet_subscribed
    events = paypal.renew(sub_id) * 3
    assert sorted(deliver(send, events)) == ["duplicate", "duplicate", "processed"]
    subscription, license, periods = state(dbsession, number)
    assert len(periods) == 2
    assert periods[1].period_start == periods[0].period_end  # PayPal's billing dates
    assert subscription.paid_through == next_billing_time(paypal, sub_id) == periods[1].period_end
    assert license.expires_at == subscription.paid_through + GRACE
    renewal = dbsession.get(Order, periods[1].order_id)
    assert (renewal.status, renewal.total, renewal.items[0].kind) == ("paid", 4900, "renewal")
    assert count(dbsession, Invoice) == 2
    assert count(dbsession, LicenseChange) == 1


@pytest.mark.parametrize("signed_amount", ["49.00", "-49.00"])
def test_refunding_one_renewal_at_paypal_takes_back_that_period_only(
    wallet_subscribed, paypal, send, dbsession, signed_amount
):
    number, sub_id = wallet_subscribed
    first_paid_through = state(dbsession, number)[0].paid_through
    (sale_event,) = paypal.renew(sub_id)
    deliver(send, [sale_event])
    sale = sale_event["resource"]
    refund = paypal_event(
        "PAYMENT.SALE.REFUNDED",
        {
            "id": new_id(),
            "state": "completed",
            "sale_id": sale["id"],
            "amount": {"total": signed_amount, "currency": "EUR"},
            "total_refunded_amount": {"value": "49.00", "currency": "EUR"},
        },
        "refund",
    )
    assert deliver(send, [refund, refund]) == ["processed", "duplicate"]
    subscription, license, periods = state(dbsession, number)
    assert [p.refunded_at is not None for p in periods] == [False, True]
    assert subscription.paid_through == first_paid_through
    # The latest period refunded in full: cancelled at PayPal once the event is in
    # (test_refunds.py), so the license ends with the period before it.
    assert subscription.status == "ended" and len(paypal.cancel_calls) == 1
    assert license.expires_at == first_paid_through
    assert deliver(send, paypal.held) == ["ignored"]  # PayPal's own CANCELLED
    assert dbsession.get(Order, periods[1].order_id).status == "refunded"
    assert dbsession.get(Order, subscription.order_id).status == "paid"


def test_a_partial_refund_at_paypal_takes_nothing_back(wallet_subscribed, paypal, send, dbsession):
    number, sub_id = wallet_subscribed
    (sale_event,) = paypal.renew(sub_id)
    deliver(send, [sale_event])
    refund = paypal_event(
        "PAYMENT.SALE.REFUNDED",
        {
            "id": new_id(),
            "state": "completed",
            "sale_id": sale_event["resource"]["id"],
            "amount": {"total": "10.00", "currency": "EUR"},
        },
        "refund",
    )
    deliver(send, [refund])
    subscription, license, periods = state(dbsession, number)
    assert [p.refunded_at for p in periods] == [None, None]
    assert dbsession.get(Order, periods[1].order_id).status == "paid"


def test_failed_and_suspended_are_past_due_with_the_license_still_valid(
    wallet_subscribed, paypal, send, dbsession, customer
):
    number, sub_id = wallet_subscribed
    paid_through = state(dbsession, number)[0].paid_through
    assert deliver(send, paypal.fail(sub_id)) == ["processed"]
    subscription, license, _ = state(dbsession, number)
    assert subscription.status == "past_due"  # ACTIVE, but PayPal is retrying
    assert license.expires_at == paid_through + GRACE
    deliver(send, paypal.fail(sub_id) + paypal.suspend(sub_id))
    subscription, license, periods = state(dbsession, number)
    assert subscription.status == "past_due" and len(periods) == 1
    assert license.expires_at == paid_through + GRACE
    (mail,) = [m for m in outbox_rows(dbsession) if m.kind == "subscription_payment_failed"]
    assert mail.to_address == customer.email
    # The buyer settles it: the next payment is one more period, and it is active again.
    deliver(send, paypal.renew(sub_id))
    subscription, license, periods = state(dbsession, number)
    assert (subscription.status, len(periods)) == ("active", 2)
    assert license.expires_at == next_billing_time(paypal, sub_id) + GRACE


@pytest.mark.parametrize("end", ["cancel", "expire"])
def test_an_ended_subscription_keeps_its_paid_period_and_stays_ended(
    wallet_subscribed, paypal, send, dbsession, end
):
    number, sub_id = wallet_subscribed
    late = paypal.state_event(sub_id, "BILLING.SUBSCRIPTION.ACTIVATED")  # sent late
    assert deliver(send, getattr(paypal, end)(sub_id)) == ["processed"]
    subscription, license, _ = state(dbsession, number)
    assert subscription.status == "ended"
    assert license.expires_at == subscription.paid_through  # no grace once it is over
    assert deliver(send, [late]) == ["ignored"]
    # Even a stale read at PayPal that says ACTIVE again changes nothing.
    paypal.subscriptions[sub_id]["status"] = "ACTIVE"
    assert deliver(send, [paypal.state_event(sub_id)]) == ["ignored"]
    subscription, license, _ = state(dbsession, number)
    assert subscription.status == "ended"
    assert license.expires_at == subscription.paid_through


def test_paypal_down_leaves_the_event_to_be_retried(wallet_subscribed, paypal, send, dbsession):
    number, sub_id = wallet_subscribed
    (sale,) = paypal.renew(sub_id)
    paypal.fail_status = 500
    answer = send(sale, status=503).json
    assert {"code", "title", "message", "hints", "supportCode"} <= set(answer)
    paypal.fail_status = None
    assert len(state(dbsession, number)[2]) == 1
    assert deliver(send, [sale]) == ["processed"]
    assert len(state(dbsession, number)[2]) == 2


# --- a sale that names no subscription ----------------------------------------------------


def test_a_sale_without_its_subscription_is_matched_by_the_order_number(
    wallet_subscribed, paypal, send, dbsession
):
    number, sub_id = wallet_subscribed
    (sale,) = paypal.renew(sub_id, with_agreement=False)
    assert "billing_agreement_id" not in sale["resource"]
    assert sale["resource"]["custom"] == number
    assert deliver(send, [sale, sale]) == ["processed", "duplicate"]
    periods = state(dbsession, number)[2]
    assert [p.provider_invoice_id for p in periods][1] == sale_id_of(sale)
    assert count(dbsession, ParkedPayment) == 0


def test_a_sale_without_any_reference_is_matched_to_the_one_subscription_paypal_lists_it_in(
    wallet_subscribed, paypal, send, dbsession, wallet_app, other_customer
):
    number, _ = wallet_subscribed
    other = new_client(wallet_app)
    other.login(other_customer.email)
    other_number, other_sub, events = subscribe_wallet(other, paypal)
    deliver(send, events)
    (sale,) = paypal.renew(other_sub, with_agreement=False, with_custom=False)
    # Both subscriptions cost the same: PayPal's transactions list of each decides.
    assert deliver(send, [sale]) == ["processed"]
    assert len(state(dbsession, other_number)[2]) == 2
    assert len(state(dbsession, number)[2]) == 1


def test_an_unmatched_sale_is_parked_and_the_reconciliation_records_it(
    wallet_subscribed, paypal, send, dbsession, wallet_ini, capsys, wallet_app, admin
):
    number, sub_id = wallet_subscribed
    (sale,) = paypal.renew(sub_id, with_agreement=False, with_custom=False, listed=False)
    assert deliver(send, [sale, sale]) == ["ignored", "duplicate"]
    dbsession.rollback()
    (parked,) = dbsession.scalars(select(ParkedPayment))
    assert (parked.payment_id, parked.amount, parked.currency) == (sale_id_of(sale), 4900, "EUR")
    assert parked.event_id == sale["id"] and parked.resolved_at is None
    event = dbsession.get(PaymentEvent, parked.payment_event_id)
    assert (event.status, event.last_error.startswith("parked")) == ("ignored", True)
    assert len(state(dbsession, number)[2]) == 1
    # The console shows it waiting.
    console = logged_in(wallet_app, admin).get("/admin/subscriptions")
    assert "Payments waiting for their subscription" in console.text
    assert sale_id_of(sale) in console.text
    # Not listed yet at PayPal: the reconciliation reports it and leaves it parked.
    assert admin_main([wallet_ini, "reconcile-subscriptions"]) == 0
    assert "still parked" in capsys.readouterr().err
    paypal.show(sale_id_of(sale))
    assert admin_main([wallet_ini, "reconcile-subscriptions"]) == 0
    out = capsys.readouterr().out
    assert "recorded: processed" in out
    assert f"parked payment {sale_id_of(sale)} (walletprovider): recorded as a period" in out
    subscription, license, periods = state(dbsession, number)
    assert len(periods) == 2 and periods[1].provider_invoice_id == sale_id_of(sale)
    assert license.expires_at == next_billing_time(paypal, sub_id) + GRACE
    assert dbsession.get(ParkedPayment, parked.id).resolved_at is not None
    assert admin_main([wallet_ini, "reconcile-subscriptions"]) == 0
    captured = capsys.readouterr()
    assert "0 repaired" in captured.out and "parked" not in captured.out + captured.err
    console = logged_in(wallet_app, admin).get("/admin/subscriptions")
    assert "Payments waiting for their subscription" not in console.text


def test_a_first_payment_parked_while_paypal_lists_it_late_is_recorded_by_the_reconciliation(
    wallet_buyer, paypal, send, monthly, dbsession, wallet_ini, capsys
):
    number, sub_id, (activated, sale) = subscribe_wallet(
        wallet_buyer, paypal, with_agreement=False, listed=False
    )
    assert deliver(send, [activated, sale]) == ["ignored", "ignored"]
    assert state(dbsession, number)[0] is None
    paypal.show(sale_id_of(sale))
    # No subscription row to reconcile yet: the parked payment itself is matched (its
    # custom field names our order, whose checkout is the subscription) and fulfils it.
    assert admin_main([wallet_ini, "reconcile-subscriptions"]) == 0
    out = capsys.readouterr().out
    assert f"recorded for subscription {sub_id}: processed" in out
    subscription, license, periods = state(dbsession, number)
    assert subscription.status == "active" and len(periods) == 1
    assert dbsession.get(Order, subscription.order_id).status == "paid"
    assert license.expires_at == next_billing_time(paypal, sub_id) + GRACE


def test_a_first_payment_without_its_subscription_is_matched_through_the_order(
    wallet_buyer, paypal, send, monthly, dbsession
):
    number, sub_id, (activated, sale) = subscribe_wallet(wallet_buyer, paypal, with_agreement=False)
    assert deliver(send, [sale, activated])[0] == "processed"
    subscription, _, periods = state(dbsession, number)
    assert subscription.provider_subscription_id == sub_id and len(periods) == 1


def test_paypal_down_while_matching_parks_nothing(wallet_subscribed, paypal, send, dbsession):
    number, sub_id = wallet_subscribed
    (sale,) = paypal.renew(sub_id, with_agreement=False, with_custom=False)
    paypal.fail_status = 503
    send(sale, status=503)
    paypal.fail_status = None
    assert count(dbsession, ParkedPayment) == 0
    assert deliver(send, [sale]) == ["processed"]
    assert len(state(dbsession, number)[2]) == 2


# --- the customer's account -----------------------------------------------------------------


def mine(buyer) -> dict:
    (item,) = buyer.get(LIST).json["items"]
    return item


def test_cancelling_is_immediate_at_paypal_and_keeps_the_paid_period(
    wallet_subscribed, wallet_buyer, paypal, send, dbsession
):
    number, sub_id = wallet_subscribed
    paid_through = state(dbsession, number)[0].paid_through
    subscription_id = mine(wallet_buyer)["id"]
    cancelled = wallet_buyer.post(f"{LIST}/{subscription_id}/cancel").json
    assert (cancelled["status"], cancelled["nextCharge"]) == ("ended", None)
    assert cancelled["endsAt"] == isoformat_z(paid_through)
    (call,) = paypal.cancel_calls
    assert call["subscription"] == sub_id and call["reason"]
    assert paypal.subscriptions[sub_id]["status"] == "CANCELLED"
    assert state(dbsession, number)[1].expires_at == paid_through
    # PayPal's own event about it comes later and changes nothing more.
    held, paypal.held = paypal.held, []
    assert deliver(send, held) == ["ignored"]
    assert state(dbsession, number)[1].expires_at == paid_through
    refused = wallet_buyer.post(f"{LIST}/{subscription_id}/resume", status=409).json
    assert refused["code"] == "subscription_not_cancelling"
    assert "cannot take a cancellation back" in refused["message"]
    assert f"until {paid_through:%Y-%m-%d}" in refused["message"]
    assert {"title", "hints", "supportCode"} <= set(refused)
    assert len(paypal.cancel_calls) == 1


def test_the_account_page_says_until_when_a_cancelled_subscription_runs(
    wallet_subscribed, wallet_app, customer, dbsession
):
    number, _ = wallet_subscribed
    paid_through = state(dbsession, number)[0].paid_through
    pages = logged_in(wallet_app, customer)
    page = pages.get("/account/subscriptions")
    # PayPal has no cancellation at the period end: the button says what happens.
    assert f"Cancel now; keep access until {paid_through:%Y-%m-%d}" in page.text
    assert "Cancel at the end of the period" not in page.text
    (form,) = [f for f in page.forms.values() if (f.action or "").endswith("/cancel")]
    done = form.submit(status=303).follow()
    assert f"Access until {paid_through:%Y-%m-%d}" in done.text
    assert not [f for f in done.forms.values() if (f.action or "").endswith("/resume")]


def test_the_funding_source_is_changed_on_paypals_page(wallet_subscribed, wallet_buyer):
    answer = wallet_buyer.post(f"{LIST}/{mine(wallet_buyer)['id']}/payment-method").json
    assert answer["redirectUrl"] == "https://www.paypal.com/myaccount/autopay/"


def test_paypal_down_cancels_nothing(wallet_subscribed, wallet_buyer, paypal, dbsession):
    number, sub_id = wallet_subscribed
    paypal.fail_status = 503
    answer = wallet_buyer.post(f"{LIST}/{mine(wallet_buyer)['id']}/cancel", status=503).json
    paypal.fail_status = None
    assert answer["code"] == "subscription_provider_unavailable"
    assert state(dbsession, number)[0].status == "active"
    assert paypal.subscriptions[sub_id]["status"] == "ACTIVE"


# --- reconciliation -----------------------------------------------------------------------


def test_lost_events_are_repaired_once(wallet_subscribed, paypal, wallet_ini, dbsession, capsys):
    number, sub_id = wallet_subscribed
    paypal.renew(sub_id)  # the renewal's events are lost
    paypal.renew(sub_id)  # and the next one's
    paypal.fail(sub_id)  # and the failure's
    assert admin_main([wallet_ini, "reconcile-subscriptions"]) == 0
    out = capsys.readouterr().out
    assert out.count("recorded: processed") == 2
    assert "status active -> past_due" in out
    subscription, license, periods = state(dbsession, number)
    assert len(periods) == 3 and subscription.status == "past_due"
    assert [p.period_start for p in periods[1:]] == [p.period_end for p in periods[:2]]
    assert license.expires_at == next_billing_time(paypal, sub_id) + GRACE
    assert admin_main([wallet_ini, "reconcile-subscriptions"]) == 0
    assert "0 repaired" in capsys.readouterr().out


# --- storms -------------------------------------------------------------------------------


@pytest.fixture
def server_settings(wallet_settings):
    """two_servers' processes pay with the wallet provider."""
    return wallet_settings


@requires_postgresql
def test_a_renewal_storm_across_two_processes_counts_once(
    two_servers, wallet_subscribed, paypal, pki, cert_url, dbsession
):
    number, sub_id = wallet_subscribed
    storm = paypal.renew(sub_id) * 10
    random.Random(11).shuffle(storm)
    deliveries = [(body, signed(pki, cert_url, body)) for body in map(body_of, storm)]
    answers = release_at_once([url + WALLET_ROUTE for url in two_servers], deliveries)
    assert {a.status_code for a in answers} == {200}, [a.text for a in answers]
    assert sorted(a.json()["status"] for a in answers).count("processed") == 1
    subscription, license, periods = state(dbsession, number)
    assert len(periods) == 2
    assert count(dbsession, Order, Order.status == "paid") == 2
    assert count(dbsession, LicenseChange) == 1
    assert license.expires_at == subscription.paid_through + GRACE
