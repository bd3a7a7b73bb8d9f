"""Buying a subscription through checkout and the fake card or wallet provider,
delivering its events, and reading back what they did."""

from __future__ import annotations

import datetime as dt

from fakes.stripe_api import delivery
from sqlalchemy import select

from cmsshop.models import License, Order, Subscription, SubscriptionPeriod
from helpers.checkout import BILLING

GRACE = dt.timedelta(days=21)  # cmsshop.subscription_grace_days' default


def subscribe(buyer, fake_stripe) -> tuple[str, dict[str, dict]]:
    """Check out site-guard and pay on the provider's page: (the order number, the
    events the provider would send, by type; none sent yet)."""
    placed = buyer.post_json(
        "/api/store/checkout",
        {"billing": BILLING, "items": [{"product": "site-guard"}], "acceptTerms": True},
        status=201,
    ).json
    fake_stripe.hold_webhooks = True
    fake_stripe.pay(placed["redirectUrl"].rsplit("/", 1)[1])
    held, fake_stripe.held = fake_stripe.held, []
    return placed["order"]["number"], {payload["type"]: payload for payload in held}


def send(webhook, payload, status=200):
    body, headers = delivery(payload)
    return webhook(body, headers, status=status).json


def deliver_all(webhook, payloads) -> list[str]:
    return [send(webhook, payload)["status"] for payload in payloads]


def state(dbsession, number: str):
    """(the subscription bought by order ``number``, its license, its periods), as
    committed now."""
    dbsession.rollback()
    dbsession.expire_all()
    order = dbsession.scalar(select(Order).where(Order.number == number))
    subscription = dbsession.scalar(select(Subscription).where(Subscription.order_id == order.id))
    if subscription is None:
        return None, None, []
    license = dbsession.get(License, subscription.license_id) if subscription.license_id else None
    periods = list(
        dbsession.scalars(
            select(SubscriptionPeriod)
            .where(SubscriptionPeriod.subscription_id == subscription.id)
            .order_by(SubscriptionPeriod.period_end)
        )
    )
    return subscription, license, periods


def stamp(value: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(value, dt.UTC)


def the_subscription(fake_stripe) -> dict:
    (found,) = fake_stripe.subscriptions.values()
    return found


def period_end(fake_stripe) -> dt.datetime:
    return stamp(the_subscription(fake_stripe)["items"]["data"][0]["current_period_end"])


# --- the wallet provider (PayPal's scheme) ------------------------------------------------


def checkout_wallet(buyer, status=201) -> dict:
    """Check out site-guard with the wallet provider: the checkout's JSON."""
    return buyer.post_json(
        "/api/store/checkout",
        {
            "billing": BILLING,
            "items": [{"product": "site-guard"}],
            "acceptTerms": True,
            "provider": "walletprovider",
        },
        status=status,
    ).json


def subscribe_wallet(buyer, paypal, **sale_kw) -> tuple[str, str, list[dict]]:
    """Check out site-guard with the wallet provider and approve it on PayPal's page:
    (the order number, the PayPal subscription id, the events PayPal would send for the
    approval and the first payment (``sale_kw``: as the fake's ``renew``); none sent)."""
    number = checkout_wallet(buyer)["order"]["number"]
    (sub_id,) = [s["id"] for s in paypal.subscriptions.values() if s["custom_id"] == number]
    return number, sub_id, paypal.approve(sub_id, **sale_kw)


def next_billing_time(paypal, sub_id: str) -> dt.datetime:
    value = paypal.subscriptions[sub_id]["billing_info"]["next_billing_time"]
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
