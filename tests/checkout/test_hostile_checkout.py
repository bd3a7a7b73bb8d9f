"""Hostile checkout: one customer cannot pile up pending orders. Each
checkout commits an order before calling the provider, so the number of recent pending
orders per customer is capped (429 with Retry-After), exactly even for parallel
checkouts."""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from fakes.shop import make_order
from helpers.app import serve
from helpers.checkout import BILLING
from helpers.clients import new_client
from sqlalchemy import func, select, update

from cmsshop.models import Order
from cmsshop.util import utcnow

ITEMS = {"items": [{"product": "themes"}], "billing": BILLING}


def pending_count(dbsession, user) -> int:
    dbsession.commit()  # a fresh snapshot
    return dbsession.scalar(
        select(func.count()).where(Order.user_id == user.id, Order.status == "pending")
    )


def buyer_of(app, user):
    client = new_client(app)
    client.login(user.email)
    return client


@pytest.fixture
def limited_app(make_app, card_settings):
    return make_app(**card_settings, **{"cmsshop.max_pending_orders": "3"})


def test_default_limit_is_ten_pending_orders(card_app, customer, catalogue, dbsession):
    buyer = buyer_of(card_app, customer)
    for _ in range(10):
        buyer.post_json("/api/store/checkout", ITEMS, status=201)
    refused = buyer.post_json("/api/store/checkout", ITEMS, status=429)
    assert refused.json["code"] == "too_many_pending_orders"
    assert refused.content_type == "application/json"
    assert 3500 <= int(refused.headers["Retry-After"]) <= 3601
    assert refused.json["retryAfter"] == int(refused.headers["Retry-After"])
    assert pending_count(dbsession, customer) == 10


def test_a_lower_limit_from_the_settings(limited_app, customer, catalogue, dbsession):
    buyer = buyer_of(limited_app, customer)
    for _ in range(3):
        buyer.post_json("/api/store/checkout", ITEMS, status=201)
    for _ in range(3):
        buyer.post_json("/api/store/checkout", ITEMS, status=429)
    assert pending_count(dbsession, customer) == 3


def test_other_customers_are_not_affected(
    limited_app, customer, other_customer, catalogue, dbsession
):
    buyer = buyer_of(limited_app, customer)
    for _ in range(3):
        buyer.post_json("/api/store/checkout", ITEMS, status=201)
    buyer.post_json("/api/store/checkout", ITEMS, status=429)
    buyer_of(limited_app, other_customer).post_json("/api/store/checkout", ITEMS, status=201)


def test_only_recent_pending_orders_count(limited_app, customer, catalogue, dbsession):
    """Paid, cancelled and failed orders never count; pending ones older than an hour are
    abandoned checkouts and stop counting, and Retry-After says when the oldest counted
    one does."""
    for status in ("paid", "cancelled", "failed", "refunded"):
        make_order(dbsession, customer, status=status)
    old = [make_order(dbsession, customer) for _ in range(3)]
    dbsession.execute(
        update(Order)
        .where(Order.id.in_([o.id for o in old]))
        .values(created_at=utcnow() - dt.timedelta(hours=2))
    )
    recent = make_order(dbsession, customer)
    dbsession.execute(
        update(Order)
        .where(Order.id == recent.id)
        .values(created_at=utcnow() - dt.timedelta(minutes=50))
    )
    dbsession.commit()
    buyer = buyer_of(limited_app, customer)
    buyer.post_json("/api/store/checkout", ITEMS, status=201)
    buyer.post_json("/api/store/checkout", ITEMS, status=201)
    refused = buyer.post_json("/api/store/checkout", ITEMS, status=429)
    # The 50-minute-old order leaves the window in about ten minutes.
    assert 500 <= int(refused.headers["Retry-After"]) <= 601


def test_a_checkout_the_provider_refused_does_not_count(
    make_app, card_settings, customer, catalogue, dbsession
):
    from fakes.stripe_api import closed_port_url

    down = make_app(
        **{
            **card_settings,
            "cmsshop.max_pending_orders": "1",
            "cmsshop.cardprovider.api_base": closed_port_url(),
        }
    )
    buyer = buyer_of(down, customer)
    for _ in range(3):  # each order is cancelled when the provider cannot be reached
        assert buyer.post_json("/api/store/checkout", ITEMS, status=503).json["code"] == (
            "provider_unavailable"
        )
    assert pending_count(dbsession, customer) == 0


def test_parallel_checkouts_cannot_exceed_the_limit(limited_app, customer, catalogue, dbsession):
    """Twelve checkouts at once from one customer on a threaded server: exactly three
    orders, the others 429 (the customer's checkouts queue on one lock)."""
    buyer = buyer_of(limited_app, customer)
    cookie = "; ".join(f"{name}={value}" for name, value in buyer.cookies.items())
    headers = {"Cookie": cookie, "X-CSRF-Token": buyer.csrf_token}
    with serve(limited_app) as url, ThreadPoolExecutor(max_workers=12) as pool:
        responses = list(
            pool.map(
                lambda _: requests.post(
                    url + "/api/store/checkout", json=ITEMS, headers=headers, timeout=60
                ),
                range(12),
            )
        )
    statuses = sorted(r.status_code for r in responses)
    unexpected = [r.text[:300] for r in responses if r.status_code not in (201, 429)]
    assert statuses == [201] * 3 + [429] * 9, (statuses, unexpected)
    assert pending_count(dbsession, customer) == 3
