"""Exactly once under concurrency: the same event delivered many times at once, plus two
other events for the same payment, end in one paid order, one invoice, one entitlement
and one license -- across two separate server processes on PostgreSQL, and across the
threads of one server on any database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from conftest import ROOT, requires_postgresql, serve
from fakes.shop import counts, event_row, make_order, order_status
from fakes.stripe_api import delivery, event, intent_object, session_object

pytest_plugins = ["fakes.payment_fixtures"]

SAME_EVENT_DELIVERIES = 20


def storm(urls: list[str], order, fake_stripe, same: int = SAME_EVENT_DELIVERIES):
    """Deliver ``same`` copies of checkout.session.completed and two other events for
    the same payment, all released at once and spread over ``urls``."""
    session = fake_stripe.add_session(session_object(order.number, order.total))
    intent = fake_stripe.add_intent(
        intent_object(order.number, order.total, pi=session["payment_intent"])
    )
    completed = event("checkout.session.completed", session)
    deliveries = [completed] * same + [
        event("payment_intent.succeeded", intent),
        event("checkout.session.async_payment_succeeded", session),
    ]
    signed = [delivery(payload) for payload in deliveries]
    barrier = threading.Barrier(len(signed))

    def send(index: int):
        body, headers = signed[index]
        url = urls[index % len(urls)] + "/api/webhooks/cardprovider"
        barrier.wait(timeout=30)
        return requests.post(url, data=body, headers=headers, timeout=60)

    with ThreadPoolExecutor(max_workers=len(signed)) as pool:
        responses = list(pool.map(send, range(len(signed))))
    return completed, responses


def check_exactly_once(dbsession, order, completed, responses):
    assert [r.status_code for r in responses] == [200] * len(responses), [
        r.text for r in responses if r.status_code != 200
    ]
    statuses = [r.json()["status"] for r in responses]
    assert set(statuses) <= {"processed", "duplicate"}
    assert "processed" in statuses
    assert order_status(dbsession, order.number) == "paid"
    assert counts(dbsession) == {
        "paid": 1,
        "fulfilments": 1,
        "invoices": 1,
        "entitlements": 1,
        "licenses": 1,
        "events": 3,
    }
    row = event_row(dbsession, completed["id"])
    assert row.attempts == len(responses) - 2


@pytest.fixture
def two_servers(card_settings, settings):
    """Two app processes on the same database, as behind a load balancer."""
    env = {
        **os.environ,
        "CMSSHOP_TEST_APP_SETTINGS": json.dumps({**settings, **card_settings}),
        "PYTHONPATH": ROOT,
    }
    script = os.path.join(ROOT, "tests", "fakes", "app_server.py")
    processes = [
        subprocess.Popen(
            [sys.executable, script], env=env, stdout=subprocess.PIPE, text=True, cwd=ROOT
        )
        for _ in range(2)
    ]
    try:
        urls = []
        for process in processes:
            port = process.stdout.readline().strip()
            assert port.isdigit(), f"server did not start (exit {process.poll()})"
            urls.append(f"http://127.0.0.1:{port}")
        yield urls
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=10)


@requires_postgresql
def test_storm_across_two_server_processes(
    two_servers, dbsession, catalogue, customer, fake_stripe
):
    order = make_order(dbsession, customer)
    completed, responses = storm(two_servers, order, fake_stripe)
    check_exactly_once(dbsession, order, completed, responses)


def test_storm_across_the_threads_of_one_server(
    card_app, dbsession, catalogue, customer, fake_stripe
):
    order = make_order(dbsession, customer)
    with serve(card_app) as url:
        completed, responses = storm([url], order, fake_stripe, same=10)
    check_exactly_once(dbsession, order, completed, responses)


def test_many_orders_at_once_get_gap_free_invoice_numbers(
    card_app, dbsession, catalogue, customer, fake_stripe
):
    orders = [make_order(dbsession, customer, ("themes",)) for _ in range(8)]
    signed = []
    for order in orders:
        session = fake_stripe.add_session(session_object(order.number, order.total))
        signed.append(delivery(event("checkout.session.completed", session)))
    with serve(card_app) as url, ThreadPoolExecutor(max_workers=8) as pool:
        responses = list(
            pool.map(
                lambda d: requests.post(
                    url + "/api/webhooks/cardprovider", data=d[0], headers=d[1], timeout=60
                ),
                signed,
            )
        )
    assert [r.json()["status"] for r in responses] == ["processed"] * 8
    from sqlalchemy import select

    from cmsshop.models import Invoice

    dbsession.commit()
    assert sorted(dbsession.scalars(select(Invoice.sequence))) == list(range(1, 9))
