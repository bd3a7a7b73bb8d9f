"""Exactly one order.paid event and one delivery to the seller's endpoint under a storm
of duplicate provider webhooks: inline through the threads of one server, queued and
batched by two workers, and across two server processes on PostgreSQL."""

from __future__ import annotations

import threading

import pytest
import webtest
from fakes.shop import make_order
from fakes.stripe_api import delivery, event, session_object
from helpers.app import requires_postgresql, serve
from helpers.payments import check_exactly_once, storm
from helpers.webhook_events import deliveries_to, events, subscribe

from cmsshop.services.payments.events import queue
from cmsshop.services.payments.registry import REGISTRY_KEY
from cmsshop.services.webhooks import signing
from cmsshop.services.webhooks.delivery import deliver_due

TYPES = ["order.paid", "license.created"]


@pytest.fixture
def receiver(webhook_receiver):
    return webhook_receiver


@pytest.fixture
def endpoint(dbsession, receiver):
    secret = signing.new_secret()
    receiver.secrets = [secret]
    return subscribe(dbsession, url=receiver.url(), event_types=TYPES, secret=secret)


def check_one_delivery_each(app, dbsession, receiver, endpoint, order_numbers):
    """One order.paid per order, each delivered once, verified with stripe's verifier."""
    paid = events(dbsession, "order.paid")
    assert sorted(e.subject for e in paid) == sorted(f"order:{n}" for n in order_numbers)
    expected = len(events(dbsession))
    assert len(deliveries_to(dbsession, endpoint)) == expected
    report = deliver_due(app.registry, limit=None)
    assert report.succeeded == expected
    assert deliver_due(app.registry).attempted == 0
    got = [r.event for r in receiver.received]
    assert sorted(e["id"] for e in got) == sorted(e.public_id for e in events(dbsession))
    assert all(r.verified_with == receiver.secrets for r in receiver.received)
    assert sorted(e["data"]["orderNumber"] for e in got if e["type"] == "order.paid") == sorted(
        order_numbers
    )


def test_storm_across_the_threads_of_one_server(
    card_app, dbsession, catalogue, customer, fake_stripe, receiver, endpoint
):
    order = make_order(dbsession, customer)
    with serve(card_app) as url:
        completed, responses = storm([url], order, fake_stripe, same=10)
    check_exactly_once(dbsession, order, completed, responses)
    check_one_delivery_each(card_app, dbsession, receiver, endpoint, [order.number])


def test_queued_duplicates_batched_by_two_workers(
    make_app, card_settings, dbsession, catalogue, customer, fake_stripe, receiver, endpoint
):
    app = make_app(**card_settings, **{"cmsshop.payments.webhook_processing": "queued"})
    client = webtest.TestApp(app)
    orders = [make_order(dbsession, customer) for _ in range(6)]
    for order in orders:
        session = fake_stripe.add_session(session_object(order.number, order.total))
        body, headers = delivery(event("checkout.session.completed", session))
        for _ in range(3):
            client.post("/api/webhooks/cardprovider", body, headers=headers, status=200)
    barrier = threading.Barrier(2)

    def worker():
        barrier.wait(timeout=30)
        while queue.process_due_events(app.registry, app.registry[REGISTRY_KEY], limit=2):
            pass

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    check_one_delivery_each(app, dbsession, receiver, endpoint, [o.number for o in orders])


@requires_postgresql
def test_storm_across_two_server_processes(
    two_servers, card_app, dbsession, catalogue, customer, fake_stripe, receiver, endpoint
):
    order = make_order(dbsession, customer)
    completed, responses = storm(two_servers, order, fake_stripe)
    check_exactly_once(dbsession, order, completed, responses)
    check_one_delivery_each(card_app, dbsession, receiver, endpoint, [order.number])
