"""The fake Stripe API's subscriptions, driven with the stripe library's own client: the
shapes a subscription checkout, its invoices and its lifecycle take (API 2026-10-28), and
the sessions Stripe refuses. Tests of cmsshop's subscriptions rely on these shapes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import stripe
from fakes.stripe_api import API_KEY, BILLING_API_VERSION, add_interval


def client_of(fake) -> stripe.StripeClient:
    return stripe.StripeClient(
        API_KEY,
        base_addresses={"api": fake.url},
        http_client=stripe.RequestsClient(timeout=5),
    )


def line(amount: int = 900, name: str = "SiteGuard", **recurring) -> dict:
    price = {"currency": "eur", "unit_amount": amount, "product_data": {"name": name}}
    if recurring:
        price["recurring"] = recurring
    return {"price_data": price, "quantity": 1}


def subscription_params(*lines, **extra) -> dict:
    return {
        "mode": "subscription",
        "client_reference_id": "ORD-1",
        "metadata": {"orderNumber": "ORD-1"},
        "subscription_data": {"metadata": {"orderNumber": "ORD-1"}},
        "line_items": list(lines) or [line(interval="month", interval_count=1)],
        "success_url": "https://shop.test/ok",
        "cancel_url": "https://shop.test/cancel",
        **extra,
    }


def at(*date) -> int:
    return int(datetime(*date, tzinfo=UTC).timestamp())


@pytest.fixture
def subscribed(fake_stripe):
    """A paid monthly subscription (EUR 9 a month, with a one-time EUR 5 set-up line):
    (client, session id, subscription id)."""
    fake_stripe.hold_webhooks = True
    client = client_of(fake_stripe)
    params = subscription_params(line(900, interval="month", interval_count=1), line(500, "Set-up"))
    session = client.v1.checkout.sessions.create(params=params)
    fake_stripe.pay(session.id)
    return client, session.id, fake_stripe.sessions[session.id]["subscription"]


def test_add_interval_follows_the_calendar_from_the_anchor():
    anchor = at(2025, 1, 31, 12)
    assert add_interval(anchor, "month") == at(2025, 2, 28, 12)
    assert add_interval(at(2025, 2, 28, 12), "month", anchor=anchor) == at(2025, 3, 31, 12)
    assert add_interval(at(2028, 2, 29), "year") == at(2029, 2, 28)
    assert add_interval(at(2025, 12, 15), "month", 3) == at(2026, 3, 15)
    assert add_interval(at(2025, 3, 1), "week", 2) == at(2025, 3, 15)
    assert add_interval(at(2025, 3, 1), "day") == at(2025, 3, 2)


def test_a_subscription_checkout_is_paid_with_a_subscription_and_its_first_invoice(
    fake_stripe, subscribed
):
    client, session_id, sub_id = subscribed
    session = client.v1.checkout.sessions.retrieve(session_id)
    assert (session.mode, session.payment_status, session.status) == (
        "subscription",
        "paid",
        "complete",
    )
    assert session.amount_total == 1400
    assert session.payment_intent is None
    assert session.subscription == sub_id
    assert [e["type"] for e in fake_stripe.held] == [
        "checkout.session.completed",
        "customer.subscription.created",
        "invoice.paid",
    ]
    assert {e["api_version"] for e in fake_stripe.held} == {BILLING_API_VERSION}

    sub = client.v1.subscriptions.retrieve(sub_id)
    assert sub.status == "active" and sub.customer.startswith("cus_")
    assert sub.metadata.to_dict() == {"orderNumber": "ORD-1"}
    assert not sub.cancel_at_period_end and sub.ended_at is None
    assert sub.latest_invoice == session.invoice
    (item,) = sub["items"].data  # one recurring line, one item; the set-up is billed once
    assert item.price.unit_amount == 900
    assert item.price.recurring.to_dict() == {"interval": "month", "interval_count": 1}
    start, end = item.current_period_start, item.current_period_end
    assert end == add_interval(start, "month")

    invoice = client.v1.invoices.retrieve(session.invoice)
    assert (invoice.status, invoice.billing_reason) == ("paid", "subscription_create")
    assert (invoice.amount_due, invoice.amount_paid, invoice.amount_remaining) == (1400, 1400, 0)
    details = invoice.parent.subscription_details
    assert invoice.parent.type == "subscription_details"
    assert (details.subscription, details.metadata.orderNumber) == (sub_id, "ORD-1")
    assert [(li.amount, li.period.start, li.period.end) for li in invoice.lines.data] == [
        (900, start, end),
        (500, start, start),
    ]
    assert invoice.period_start == invoice.period_end == invoice.created
    assert invoice.status_transitions.paid_at is not None
    assert invoice.hosted_invoice_url == f"{fake_stripe.url}/i/{invoice.id}"
    (payment,) = invoice.payments.data
    assert (payment.status, payment.amount_paid, payment.payment.type) == (
        "paid",
        1400,
        "payment_intent",
    )
    intent = client.v1.payment_intents.retrieve(payment.payment.payment_intent)
    assert (intent.status, intent.amount_received, intent.metadata.to_dict()) == (
        "succeeded",
        1400,
        {},
    )
    refund = client.v1.refunds.create(params={"payment_intent": intent.id, "amount": 500})
    assert refund.amount == 500


def test_renewals_declines_retries_and_a_cancellation_at_period_end(fake_stripe, subscribed):
    client, _, sub_id = subscribed
    sub = fake_stripe.subscriptions[sub_id]
    first_end = sub["items"]["data"][0]["current_period_end"]
    second_end = add_interval(first_end, "month", anchor=sub["billing_cycle_anchor"])

    paid = fake_stripe.renew(sub_id)
    assert [e["type"] for e in paid] == [
        "invoice.paid",
        "invoice.payment_succeeded",
        "customer.subscription.updated",
    ]
    assert len({e["id"] for e in paid}) == 3
    invoice = paid[0]["data"]["object"]
    assert (invoice["billing_reason"], invoice["amount_paid"]) == ("subscription_cycle", 900)
    assert invoice["lines"]["data"][0]["period"] == {"start": first_end, "end": second_end}
    updated = paid[-1]["data"]
    assert updated["object"]["items"]["data"][0]["current_period_end"] == second_end
    assert set(updated["previous_attributes"]) == {"items", "latest_invoice"}

    declined = fake_stripe.renew(sub_id, paid=False)
    assert [e["type"] for e in declined] == [
        "invoice.payment_failed",
        "customer.subscription.updated",
    ]
    open_invoice = client.v1.invoices.retrieve(declined[0]["data"]["object"]["id"])
    assert (open_invoice.status, open_invoice.attempt_count) == ("open", 1)
    assert open_invoice.next_payment_attempt > open_invoice.created
    assert open_invoice.payments.data[0].status == "open"
    intent = fake_stripe.intents[open_invoice.payments.data[0].payment.payment_intent]
    assert (intent["status"], intent["amount_received"]) == ("requires_payment_method", 0)
    assert declined[1]["data"]["previous_attributes"]["status"] == "active"
    retrieved = client.v1.subscriptions.retrieve(sub_id)
    assert retrieved.status == "past_due"
    # As on Stripe, billing the renewal moves the period on, paid or not: the paid
    # period is the paid invoices' lines, never the subscription's current period.
    third_end = declined[0]["data"]["object"]["lines"]["data"][0]["period"]["end"]
    assert retrieved["items"].data[0].current_period_end == third_end > second_end

    again = fake_stripe.retry(open_invoice.id, paid=False)
    assert [e["type"] for e in again] == ["invoice.payment_failed"]
    assert again[0]["data"]["object"]["attempt_count"] == 2
    recovered = fake_stripe.retry(open_invoice.id)
    assert [e["type"] for e in recovered] == [
        "invoice.paid",
        "invoice.payment_succeeded",
        "customer.subscription.updated",
    ]
    recovered_sub = recovered[-1]["data"]["object"]
    assert recovered_sub["status"] == "active"
    assert recovered_sub["items"]["data"][0]["current_period_start"] == second_end
    assert fake_stripe.intents[intent["id"]]["status"] == "succeeded"

    (scheduled,) = fake_stripe.schedule_cancel(sub_id)
    period_end = recovered_sub["items"]["data"][0]["current_period_end"]
    assert scheduled["data"]["object"]["cancel_at"] == period_end
    assert scheduled["data"]["previous_attributes"]["cancel_at_period_end"] is False
    (ended,) = fake_stripe.end(sub_id)
    assert ended["type"] == "customer.subscription.deleted"
    assert (ended["data"]["object"]["status"], ended["data"]["object"]["ended_at"]) == (
        "canceled",
        period_end,
    )
    # The event holds the subscription as it was then, not a live reference.
    assert scheduled["data"]["object"]["status"] == "active"


def test_giving_up_pausing_and_changing_the_plan(fake_stripe, subscribed, webhook_receiver):
    _, _, sub_id = subscribed
    paused = fake_stripe.pause(sub_id)
    assert [e["type"] for e in paused] == [
        "customer.subscription.updated",
        "customer.subscription.paused",
    ]
    resumed = fake_stripe.resume_paused(sub_id)
    assert resumed[0]["data"]["previous_attributes"] == {"status": "paused"}
    (changed,) = fake_stripe.change_plan(sub_id, 1900, "year")
    price = changed["data"]["object"]["items"]["data"][0]["price"]
    assert (price["unit_amount"], price["recurring"]["interval"]) == (1900, "year")
    assert changed["data"]["previous_attributes"]["items"]["data"][0]["price"]["unit_amount"] == 900
    fake_stripe.renew(sub_id, paid=False)
    (deleted,) = fake_stripe.give_up(sub_id)
    assert deleted["data"]["object"]["status"] == "canceled"
    assert deleted["data"]["object"]["cancellation_details"]["reason"] == "payment_failed"
    with pytest.raises(ValueError):
        fake_stripe.renew(sub_id)

    fake_stripe.webhook_url = webhook_receiver.url()
    assert fake_stripe.send_all(resumed + [deleted]) == [200, 200, 200]
    assert [json.loads(r.body)["type"] for r in webhook_receiver.received] == [
        "customer.subscription.updated",
        "customer.subscription.resumed",
        "customer.subscription.deleted",
    ]


def test_a_payment_mode_session_names_no_subscription(fake_stripe):
    params = subscription_params(line(), mode="payment")
    del params["subscription_data"]
    session = client_of(fake_stripe).v1.checkout.sessions.create(params=params)
    assert (session.mode, session.subscription, session.invoice) == ("payment", None, None)


@pytest.mark.parametrize(
    ("params", "param"),
    [
        (subscription_params(line()), "line_items"),
        (
            subscription_params(
                line(interval="month", interval_count=1), line(interval="year", interval_count=1)
            ),
            "line_items",
        ),
        (
            subscription_params(
                line(interval="month", interval_count=1), line(interval="month", interval_count=3)
            ),
            "line_items",
        ),
        (
            subscription_params(payment_intent_data={"metadata": {"orderNumber": "ORD-1"}}),
            "payment_intent_data",
        ),
        (
            subscription_params(line(interval="fortnight")),
            "line_items[0][price_data][recurring][interval]",
        ),
        (
            subscription_params(line(interval="month"), mode="payment"),
            "line_items[0][price_data][recurring]",
        ),
    ],
    ids=[
        "no-recurring-line",
        "mixed-intervals",
        "mixed-interval-counts",
        "payment-intent-data",
        "unknown-interval",
        "recurring-in-payment-mode",
    ],
)
def test_stripe_refuses_the_session(fake_stripe, params, param):
    with pytest.raises(stripe.InvalidRequestError) as refused:
        client_of(fake_stripe).v1.checkout.sessions.create(params=params)
    assert refused.value.http_status == 400
    assert refused.value.param == param
    assert fake_stripe.sessions == {}


# --- coupons ------------------------------------------------------------------------------


def test_a_coupon_is_made_once_per_idempotency_key(fake_stripe):
    client = client_of(fake_stripe)
    params = {"amount_off": 980, "currency": "eur", "duration": "once", "max_redemptions": 1}
    first = client.v1.coupons.create(params=params, options={"idempotency_key": "k-1"})
    again = client.v1.coupons.create(params=params, options={"idempotency_key": "k-1"})
    assert first.id == again.id and len(fake_stripe.coupons) == 1
    assert (first.amount_off, first.currency, first.duration) == (980, "eur", "once")
    assert (first.max_redemptions, first.times_redeemed, first.valid) == (1, 0, True)
    assert client.v1.coupons.retrieve(first.id).id == first.id
    with pytest.raises(stripe.InvalidRequestError):
        client.v1.coupons.create(params={"amount_off": 980, "duration": "once"})  # no currency


@pytest.mark.parametrize("duration, renewal", [("once", 900), ("forever", 700)])
def test_a_session_discount_takes_the_first_invoice_down_and_once_only_that(
    fake_stripe, duration, renewal
):
    fake_stripe.hold_webhooks = True
    client = client_of(fake_stripe)
    coupon = client.v1.coupons.create(
        params={"amount_off": 200, "currency": "eur", "duration": duration, "max_redemptions": 1}
    )
    session = client.v1.checkout.sessions.create(
        params=subscription_params(discounts=[{"coupon": coupon.id}])
    )
    assert (session.amount_subtotal, session.amount_total) == (900, 700)
    assert session.total_details.amount_discount == 200
    fake_stripe.pay(session.id)
    paid = fake_stripe.sessions[session.id]
    first = client.v1.invoices.retrieve(paid["invoice"])
    assert (first.subtotal, first.amount_due, first.amount_paid) == (900, 700, 700)
    assert first.total_discount_amounts[0].amount == 200
    intent = fake_stripe.intents[first.payments.data[0].payment.payment_intent]
    assert intent["amount_received"] == 700
    (paid_event, _) = fake_stripe.renew(paid["subscription"])[:2]
    assert paid_event["data"]["object"]["amount_paid"] == renewal
    assert paid_event["data"]["object"]["lines"]["data"][0]["amount"] == 900
    used = client.v1.coupons.retrieve(coupon.id)
    assert (used.times_redeemed, used.valid) == (1, False)


def test_a_used_up_unknown_or_foreign_currency_coupon_is_refused(fake_stripe):
    fake_stripe.hold_webhooks = True
    client = client_of(fake_stripe)
    coupon = client.v1.coupons.create(
        params={"amount_off": 200, "currency": "eur", "duration": "once", "max_redemptions": 1}
    )
    paid = client.v1.checkout.sessions.create(
        params=subscription_params(discounts=[{"coupon": coupon.id}])
    )
    fake_stripe.pay(paid.id)
    usd = client.v1.coupons.create(params={"amount_off": 200, "currency": "usd"})
    for coupon_id in (coupon.id, "nope", usd.id):
        with pytest.raises(stripe.InvalidRequestError) as refused:
            client.v1.checkout.sessions.create(
                params=subscription_params(discounts=[{"coupon": coupon_id}])
            )
        assert refused.value.param == "discounts[0][coupon]"


def test_a_trial_starts_trialing_with_a_paid_invoice_of_zero_then_bills_its_end(fake_stripe):
    fake_stripe.hold_webhooks = True
    client = client_of(fake_stripe)
    data = {"metadata": {"orderNumber": "ORD-1"}, "trial_period_days": 14}
    params = subscription_params(subscription_data=data)
    session = client.v1.checkout.sessions.create(params=params)
    assert session.amount_total == 0
    fake_stripe.pay(session.id)
    held = {payload["type"]: payload["data"]["object"] for payload in fake_stripe.held}
    completed = held["checkout.session.completed"]
    assert completed["payment_status"] == "no_payment_required"
    sub = client.v1.subscriptions.retrieve(completed["subscription"])
    assert sub.status == "trialing"
    assert sub.trial_end - sub.trial_start == 14 * 86400
    assert sub["items"].data[0].current_period_end == sub.trial_end
    first = client.v1.invoices.retrieve(completed["invoice"])
    assert held["invoice.paid"]["id"] == first.id
    assert (first.status, first.amount_paid, first.billing_reason) == (
        "paid",
        0,
        "subscription_create",
    )
    assert first.payments.data == []  # nothing was charged
    period = first.lines.data[0].period
    assert (period.start, period.end) == (sub.trial_start, sub.trial_end)
    # The trial's end bills the first paid period, from the trial's end.
    paid = fake_stripe.renew(sub.id)[0]["data"]["object"]
    assert (paid["billing_reason"], paid["amount_paid"]) == ("subscription_cycle", 900)
    assert paid["lines"]["data"][0]["period"]["start"] == sub.trial_end
    assert client.v1.subscriptions.retrieve(sub.id).status == "active"


def test_a_trial_whose_card_fails_at_its_end_is_past_due(fake_stripe):
    fake_stripe.hold_webhooks = True
    client = client_of(fake_stripe)
    data = {"metadata": {"orderNumber": "ORD-1"}, "trial_period_days": 7}
    session = client.v1.checkout.sessions.create(params=subscription_params(subscription_data=data))
    fake_stripe.pay(session.id)
    sub_id = fake_stripe.sessions[session.id]["subscription"]
    failed = fake_stripe.renew(sub_id, paid=False)[0]
    assert failed["type"] == "invoice.payment_failed"
    assert client.v1.subscriptions.retrieve(sub_id).status == "past_due"


@pytest.mark.parametrize("days", ["0", "731", "x"])
def test_a_trial_of_no_days_or_too_many_is_refused(fake_stripe, days):
    data = {"metadata": {"orderNumber": "ORD-1"}, "trial_period_days": days}
    with pytest.raises(stripe.InvalidRequestError) as refused:
        client_of(fake_stripe).v1.checkout.sessions.create(
            params=subscription_params(subscription_data=data)
        )
    assert refused.value.param == "subscription_data[trial_period_days]"


def test_a_subscription_is_cancelled_now_once(subscribed, fake_stripe):
    client, _, sub_id = subscribed
    fake_stripe.held.clear()
    cancelled = client.v1.subscriptions.cancel(
        sub_id, params={"invoice_now": False, "prorate": False}
    )
    assert cancelled.status == "canceled" and cancelled.ended_at == cancelled.canceled_at
    assert fake_stripe.cancel_calls[0]["query"] == {"invoice_now": "false", "prorate": "false"}
    (deleted,) = fake_stripe.held
    assert deleted["type"] == "customer.subscription.deleted"
    assert deleted["data"]["object"]["status"] == "canceled"
    with pytest.raises(stripe.InvalidRequestError):
        client.v1.subscriptions.cancel(sub_id)  # canceled already: refused
    assert client.v1.subscriptions.retrieve(sub_id).status == "canceled"
    with pytest.raises(stripe.InvalidRequestError):
        client.v1.subscriptions.cancel("sub_nosuchthing")
