"""Fixtures of the subscription tests: a product sold monthly, and a paid subscription."""

from __future__ import annotations

import pathlib

import pytest
from fakes.stripe_api import API_KEY, SECRET
from helpers.subscriptions import deliver_all, subscribe

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
def card_ini(ini, fake_stripe):
    """The test ini, with the card provider's API at the fake."""
    path = pathlib.Path(ini)
    text = path.read_text().replace(
        "[alembic]",
        f"cmsshop.cardprovider.api_key = {API_KEY}\n"
        f"cmsshop.cardprovider.api_base = {fake_stripe.url}\n"
        f"cmsshop.cardprovider.webhook_secrets = {SECRET}\n"
        "cmsshop.payments.trust_verified_events = false\n\n[alembic]",
    )
    path.write_text(text)
    return str(path)
