"""Fixtures of the subscription tests: a product sold monthly, and a paid subscription
through the card provider or the wallet provider."""

from __future__ import annotations

import pytest
from helpers.app import write_admin_ini
from helpers.clients import new_client
from helpers.subscriptions import deliver_all, subscribe, subscribe_wallet

from cmsshop.models import SubscriptionPlan


@pytest.fixture
def monthly(dbsession, catalogue):
    """site-guard (EUR 49, 3 seats) sold as a monthly subscription."""
    plan = SubscriptionPlan(product_id=catalogue["site-guard"].id, interval="month")
    dbsession.add(plan)
    dbsession.commit()
    return plan


@pytest.fixture
def subscribed(card_buyer, fake_stripe, webhook, monthly):
    """The customer's paid monthly subscription: (order number, provider subscription id)."""
    number, events = subscribe(card_buyer, fake_stripe)
    deliver_all(webhook, [events["checkout.session.completed"], events["invoice.paid"]])
    (found,) = fake_stripe.subscriptions.values()
    return number, found["id"]


@pytest.fixture
def card_ini(tmp_path, settings, card_settings):
    """An ini for cmsshop-admin: the test app's settings, the card provider's API at the
    fake."""
    return write_admin_ini(tmp_path / "card.ini", {**settings, **card_settings})


@pytest.fixture
def wallet_ini(tmp_path, settings, wallet_settings):
    """An ini for cmsshop-admin: the test app's settings, the wallet provider's API at
    the fake."""
    return write_admin_ini(tmp_path / "wallet.ini", {**settings, **wallet_settings})


@pytest.fixture
def wallet_buyer(wallet_app, customer):
    """The customer, logged in to the wallet-paying app's JSON API."""
    client = new_client(wallet_app)
    client.login(customer.email)
    return client


@pytest.fixture
def wallet_subscribed(wallet_buyer, paypal, send, monthly):
    """The customer's paid monthly PayPal subscription: (order number, subscription id)."""
    number, sub_id, events = subscribe_wallet(wallet_buyer, paypal)
    for payload in events:
        send(payload, status=200)
    return number, sub_id
