"""Exactly once under concurrency: the same event delivered many times at once, plus two
other events for the same payment, end in one paid order, one invoice, one entitlement
and one license -- across two separate server processes on PostgreSQL, and across the
threads of one server on any database."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import requests
from fakes.shop import make_order
from fakes.stripe_api import delivery, event, session_object
from helpers.app import requires_postgresql, serve
from helpers.payments import check_exactly_once, storm


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
