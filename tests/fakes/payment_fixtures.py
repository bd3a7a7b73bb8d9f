"""Fixtures of the payment tests, loaded with ``pytest_plugins = ["fakes.payment_fixtures"]``.

The fake Stripe API runs on loopback; apps are built by the real configure().
"""

from __future__ import annotations

import pytest
import requests

from fakes.shop import make_catalogue
from fakes.stripe_api import API_KEY, PREVIOUS_SECRET, SECRET, FakeStripe


@pytest.fixture
def fake_stripe():
    fake = FakeStripe()
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def catalogue(dbsession):
    return make_catalogue(dbsession)


@pytest.fixture
def card_settings(fake_stripe) -> dict:
    """Settings of a production-like app: secrets set, payments confirmed with the API."""
    return {
        "cmsshop.cardprovider.webhook_secrets": f"{SECRET} {PREVIOUS_SECRET}",
        "cmsshop.cardprovider.api_key": API_KEY,
        "cmsshop.cardprovider.api_base": fake_stripe.url,
        "cmsshop.cardprovider.timeout": "5",
        "cmsshop.payments.trust_verified_events": "false",
    }


@pytest.fixture
def card_app(make_app, card_settings):
    return make_app(**card_settings)


@pytest.fixture
def webhook(card_app):
    """POST a delivery to the card webhook: ``webhook(body, headers, status=...)``."""
    import webtest

    client = webtest.TestApp(card_app)

    def post(body: bytes, headers: dict, status="*"):
        return client.post("/api/webhooks/cardprovider", body, headers=headers, status=status)

    return post


def post_http(url: str, body: bytes, headers: dict) -> requests.Response:
    return requests.post(url, data=body, headers=headers, timeout=30)
