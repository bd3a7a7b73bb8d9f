"""Shared fixtures of the tax tests at checkout: a seller established in Germany with tax
switched on, apps built from the real configure() with those settings (and the fake
card provider), a catalogue with round prices, and placing and paying orders through
the real JSON API and the real, signed webhook route."""

from __future__ import annotations

import pytest
from fakes.shop import make_catalogue
from helpers.clients import new_client
from helpers.payments import deliver, paid_at_the_provider
from helpers.purchases import openapi_validator
from helpers.tax import SELLER_DE
from sqlalchemy import select

from cmsshop.models import Invoice, Order, Product, ProductPrice

# Prices beside make_catalogue's (site-guard 49.00, themes 19.00): round ones for exact
# amounts, and the small ones where rounding shows.
TAX_PRODUCTS = {
    "plugin": ("Plugin", {"EUR": 10000, "USD": 10850}),
    "sticker": ("Sticker", {"EUR": 99, "USD": 99}),
    "ebook": ("E-book", {"EUR": 999}),
}


@pytest.fixture
def tax_catalogue(dbsession) -> dict[str, Product]:
    """make_catalogue's products and currencies, with TAX_PRODUCTS (up to 10 of each
    unlicensed product in one order)."""
    products = make_catalogue(dbsession)
    for slug, (name, prices) in TAX_PRODUCTS.items():
        product = Product(slug=slug, name=name, licensed=False, published=True, max_quantity=10)
        product.prices = [ProductPrice(currency=c, amount=a) for c, a in prices.items()]
        dbsession.add(product)
        products[slug] = product
    products["themes"].max_quantity = 10
    dbsession.commit()
    return products


@pytest.fixture
def taxed_app(make_app, card_settings, tax_catalogue):
    """``taxed_app(**overrides)``: an app of the German seller (tax on) paid through the
    fake card provider; ``overrides`` add or replace settings."""

    def factory(**overrides):
        return make_app(**{**card_settings, **SELLER_DE, **overrides})

    return factory


def buyer_of(app, user):
    """``user`` logged in to ``app``'s JSON API."""
    client = new_client(app)
    client.login(user.email)
    return client


def place(client, billing, items, *, status=201, **extra):
    """POST /api/store/checkout; ``items``: slug -> quantity; ``extra``: currency,
    provider, headers. A placed order's answer is checked against the OpenAPI document."""
    headers = extra.pop("headers", None)
    body = {
        "billing": billing,
        "items": [{"product": slug, "quantity": n} for slug, n in items.items()],
        # Needed only where a test published terms of sale (docs/legal.md).
        "acceptTerms": True,
        **extra,
    }
    response = client.post_json("/api/store/checkout", body, headers=headers, status=status)
    if status == 201:  # the placed order's JSON is as the OpenAPI document says
        openapi_validator(client, "/api/store/checkout", "post", "201").validate(response.json)
    return response


def stored(dbsession, number: str) -> Order:
    """Order ``number`` as committed now."""
    dbsession.commit()  # end the read snapshot: see what the app committed since
    dbsession.expire_all()
    return dbsession.scalar(select(Order).where(Order.number == number))


def invoice_of(dbsession, order: Order) -> Invoice | None:
    dbsession.commit()
    dbsession.expire_all()
    return dbsession.scalar(select(Invoice).where(Invoice.order_id == order.id))


def pay_by_card(app, fake_stripe, placed: dict, *, session_changes: dict | None = None):
    """The buyer pays the placed order (the checkout's answer) on the fake provider's
    page; the signed checkout.session.completed is delivered to ``app``'s webhook route.
    ``session_changes`` alter the provider's session first (what its API then answers,
    e.g. the amount or the customer's address). The webhook's JSON answer."""
    session_id = placed["redirectUrl"].rsplit("/", 1)[1]
    if session_changes:
        fake_stripe.sessions[session_id].update(session_changes)
    payload = paid_at_the_provider(fake_stripe, placed["redirectUrl"])
    return deliver(app, payload, status=200).json
