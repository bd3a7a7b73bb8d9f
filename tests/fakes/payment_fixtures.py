"""Fixtures of the payment tests (a plugin of tests/conftest.py).

The fake Stripe and PayPal APIs run on loopback; apps are built by the real configure().
"""

from __future__ import annotations

import pytest
import requests
import webtest
from helpers.account_data import paid_order
from helpers.clients import new_client
from sqlalchemy import select

from cmsshop.models import License, OrderItem, Product, ProductPrice
from fakes.paypal import WALLET_ROUTE, WEBHOOK_ID, FakePayPal, TestPKI, body_of, signed
from fakes.shop import make_catalogue, make_order
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
def order(dbsession, catalogue, customer):
    """The customer's pending order of site-guard and themes."""
    return make_order(dbsession, customer, ("site-guard", "themes"))


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
    client = webtest.TestApp(card_app)

    def post(body: bytes, headers: dict, status="*"):
        return client.post("/api/webhooks/cardprovider", body, headers=headers, status=status)

    return post


# --- the wallet provider (PayPal's scheme) ---------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return TestPKI(tmp_path_factory.mktemp("paypal-pki"))


@pytest.fixture(scope="module")
def paypal_server(pki):
    server = FakePayPal(pki)
    yield server
    server.close()


@pytest.fixture
def paypal(paypal_server):
    paypal_server.reset()
    yield paypal_server
    paypal_server.reset()


@pytest.fixture
def wallet_settings(paypal, pki) -> dict:
    """A production-like wallet configuration: payments confirmed with the (fake) API."""
    return {
        "cmsshop.walletprovider.webhook_id": WEBHOOK_ID,
        "cmsshop.walletprovider.client_id": "test-client-id",
        "cmsshop.walletprovider.client_secret": "test-client-secret",
        "cmsshop.walletprovider.api_base": paypal.base_url,
        "cmsshop.walletprovider.cert_hosts": paypal.host_entry,
        "cmsshop.walletprovider.ca_bundle": str(pki.ca_bundle),
        "cmsshop.walletprovider.timeout": "5",
        "cmsshop.payments.trust_verified_events": "false",
    }


@pytest.fixture
def wallet_app(make_app, wallet_settings):
    return make_app(**wallet_settings)


@pytest.fixture
def cert_url(paypal, pki):
    return paypal.serve_cert(pki.signing.chain_pem)


@pytest.fixture
def send(wallet_app, pki, cert_url):
    """POST a signed delivery of ``payload``: ``send(payload, status=..., **sign_kw)``."""
    client = webtest.TestApp(wallet_app)

    def post(payload, status="*", **kw):
        body = body_of(payload)
        headers = signed(pki, cert_url, body, **kw)
        return client.post(WALLET_ROUTE, body, headers=headers, status=status)

    return post


def post_http(url: str, body: bytes, headers: dict) -> requests.Response:
    return requests.post(url, data=body, headers=headers, timeout=30)


# --- licenses with a higher tier to upgrade to -----------------------------------------------


@pytest.fixture
def tiers(dbsession, catalogue):
    """site-guard (3 seats, EUR 49) and site-guard-agency (10 seats, EUR 129) in one group."""
    guard = catalogue["site-guard"]
    guard.upgrade_group, guard.tier = "site-guard", 0
    agency = Product(
        slug="site-guard-agency",
        name="SiteGuard Agency",
        licensed=True,
        published=True,
        max_activations=10,
        duration_days=365,
        upgrade_group="site-guard",
        tier=1,
        features=["agency", "pro"],
    )
    agency.prices = [ProductPrice(currency="EUR", amount=12900)]
    dbsession.add(agency)
    dbsession.commit()
    return {"guard": guard, "agency": agency}


@pytest.fixture
def tiered_license(dbsession, customer, tiers) -> License:
    """The customer's paid site-guard license (which can be renewed or upgraded)."""
    order = paid_order(dbsession, customer, ("site-guard",))
    return dbsession.scalar(
        select(License)
        .join(OrderItem, OrderItem.id == License.order_item_id)
        .where(OrderItem.order_id == order.id)
    )


@pytest.fixture
def card_buyer(card_app, customer):
    """The customer, logged in to the card-paying app's JSON API."""
    client = new_client(card_app)
    client.login(customer.email)
    return client
