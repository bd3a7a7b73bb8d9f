"""Exactly once with tax on: the storms of test_webhook_concurrency.py and the shared queue
of test_webhook_queue.py, for orders placed through the real checkout JSON API of a
seller established in Germany charging tax (totals are gross: 19 %, France's 20 %,
Finland's 25.5 %, a reverse charge at 0 %). Each order is fulfilled once, has one
invoice whose total is the order's gross and whose lines state the net and tax the order
kept, and the invoice numbers have no gap -- across the threads of one server on any
database, across two server processes and two queue workers on PostgreSQL too."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
import webtest
from fakes.shop import counts
from fakes.stripe_api import delivery, event
from helpers.app import requires_postgresql, serve
from helpers.clients import new_client
from helpers.payments import check_exactly_once, session_storm
from helpers.tax import BUSINESS_FR, SELLER_DE
from sqlalchemy import select

from cmsshop.models import Fulfilment, Invoice, Order
from cmsshop.services.payments.events import queue
from cmsshop.services.payments.registry import REGISTRY_KEY

# Buyers of several regimes: (billing, the rate the order must keep).
BUYERS = [
    ({"country": "DE"}, "19"),
    ({"country": "FR"}, "20"),
    ({"country": "FI"}, "25.5"),
    (BUSINESS_FR, "0"),
]


@pytest.fixture
def taxed_settings(card_settings) -> dict:
    return {**card_settings, **SELLER_DE}


@pytest.fixture
def taxed_app(make_app, taxed_settings, catalogue):
    return make_app(**taxed_settings)


def checkout(app, user, billing: dict, slugs=("site-guard",)) -> dict:
    """``user`` checks out ``slugs`` with ``billing`` through the JSON API: its answer."""
    client = new_client(app)
    client.login(user.email)
    body = {"billing": billing, "items": [{"product": slug, "quantity": 1} for slug in slugs]}
    return client.post_json("/api/store/checkout", body, status=201).json


def paid_session(fake_stripe, placed: dict) -> dict:
    """The buyer pays the placed order on the fake provider's page (its own webhook held
    back): the checkout session, now paid."""
    fake_stripe.hold_webhooks = True
    session = fake_stripe.pay(placed["redirectUrl"].rsplit("/", 1)[1])
    fake_stripe.held.clear()
    return dict(session)


def check_invoices(dbsession, numbers: list[str], rates: list[str]) -> None:
    """Each order paid once, with one invoice: its total the order's gross, its lines the
    net and tax each order line kept at the order's rate; invoice numbers 1..n."""
    dbsession.commit()  # end the read snapshot: see what the app committed since
    dbsession.expire_all()
    for number, rate in zip(numbers, rates, strict=True):
        order = dbsession.scalar(select(Order).where(Order.number == number))
        assert order.status == "paid", (number, order.status)
        assert order.tax_details["rate"] == rate
        fulfilments = dbsession.scalars(select(Fulfilment).where(Fulfilment.order_id == order.id))
        assert len(fulfilments.all()) == 1
        [invoice] = dbsession.scalars(select(Invoice).where(Invoice.order_id == order.id))
        assert invoice.total == order.total == sum(item.gross for item in order.items)
        assert order.total == sum(item.net + item.tax for item in order.items)
        assert [(x["net"], x["taxRate"], x["tax"], x["amount"]) for x in invoice.lines] == [
            (item.net, rate, item.tax, item.net + item.tax) for item in order.items
        ]
        [totals] = invoice.tax["totals"]
        assert totals == {
            "rate": rate,
            "net": sum(item.net for item in order.items),
            "tax": order.tax,
            "gross": order.total,
        }
        if rate != "0":
            assert order.tax > 0
    sequences = sorted(dbsession.scalars(select(Invoice.sequence)))
    assert sequences == list(range(1, len(numbers) + 1))


def test_a_taxed_storm_across_the_threads_of_one_server(
    taxed_app, dbsession, customer, fake_stripe
):
    placed = checkout(taxed_app, customer, {"country": "DE"})
    # SiteGuard 49.00 without tax: 9.31 of German VAT on top; Stripe is asked for 58.31.
    assert placed["order"]["total"] == 5831
    session = paid_session(fake_stripe, placed)
    assert session["amount_total"] == 5831
    with serve(taxed_app) as url:
        completed, responses = session_storm([url], fake_stripe, session, same=10)
    check_exactly_once(dbsession, placed["order"]["number"], completed, responses)
    check_invoices(dbsession, [placed["order"]["number"]], ["19"])


@pytest.fixture
def server_settings(taxed_settings):
    """tests/conftest.py's two_servers serve the taxed shop."""
    return taxed_settings


@requires_postgresql
def test_a_taxed_storm_across_two_server_processes(
    two_servers, taxed_app, dbsession, customer, fake_stripe
):
    placed = checkout(taxed_app, customer, {"country": "FI"})
    assert placed["order"]["total"] == 6150  # 49.00 + 25.5 %
    session = paid_session(fake_stripe, placed)
    completed, responses = session_storm(two_servers, fake_stripe, session)
    check_exactly_once(dbsession, placed["order"]["number"], completed, responses)
    check_invoices(dbsession, [placed["order"]["number"]], ["25.5"])


def test_many_taxed_orders_at_once_get_gap_free_invoices_of_their_gross(
    taxed_app, dbsession, customer, other_customer, fake_stripe
):
    placed, rates = [], []
    for i in range(8):
        billing, rate = BUYERS[i % len(BUYERS)]
        user = customer if i % 2 else other_customer
        placed.append(checkout(taxed_app, user, billing, ("themes", "site-guard")))
        rates.append(rate)
    sessions = [paid_session(fake_stripe, p) for p in placed]
    signed = [delivery(event("checkout.session.completed", s)) for s in sessions]
    # Each payment delivered twice, all at once.
    signed = signed + signed
    barrier = threading.Barrier(len(signed))

    def send(index: int):
        body, headers = signed[index]
        barrier.wait(timeout=30)
        return requests.post(url + "/api/webhooks/cardprovider", data=body, headers=headers)

    with serve(taxed_app) as url, ThreadPoolExecutor(max_workers=len(signed)) as pool:
        responses = list(pool.map(send, range(len(signed))))
    # A copy answered while its twin is being processed may say "processed" too (the
    # outcome of that event); what was written is checked below.
    assert [r.status_code for r in responses] == [200] * len(responses)
    assert {r.json()["status"] for r in responses} <= {"processed", "duplicate"}
    assert counts(dbsession)["fulfilments"] == 8
    check_invoices(dbsession, [p["order"]["number"] for p in placed], rates)


# --- the queue and its set-based worker (services/payments/fulfil_batch.py) -------------------


@pytest.fixture
def queued_taxed_app(make_app, taxed_settings, catalogue):
    return make_app(**taxed_settings, **{"cmsshop.payments.webhook_processing": "queued"})


def work(app, limit: int) -> Counter:
    """One worker pass, as `cmsshop-admin worker` makes it."""
    return queue.process_due_events(app.registry, app.registry[REGISTRY_KEY], limit=limit)


def test_two_workers_fulfil_each_taxed_order_once_with_its_gross(
    queued_taxed_app, dbsession, customer, other_customer, fake_stripe
):
    client = webtest.TestApp(queued_taxed_app)
    placed, rates = [], []
    for i in range(12):
        billing, rate = BUYERS[i % len(BUYERS)]
        user = customer if i % 2 else other_customer
        placed.append(checkout(queued_taxed_app, user, billing, ("themes",)))
        rates.append(rate)
    for p in placed:
        payload = event("checkout.session.completed", paid_session(fake_stripe, p))
        for _ in range(2):  # every event delivered twice
            body, headers = delivery(payload)
            answer = client.post("/api/webhooks/cardprovider", body, headers=headers)
            assert answer.json["status"] in ("queued", "duplicate")
    outcomes: list[Counter] = []
    barrier = threading.Barrier(2)

    def worker():
        barrier.wait(timeout=30)
        mine = Counter()
        while done := work(queued_taxed_app, limit=3):
            mine += done
        outcomes.append(mine)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sum(outcomes, Counter()) == {"processed": len(placed)}
    check_invoices(dbsession, [p["order"]["number"] for p in placed], rates)


def test_a_batch_writes_the_taxed_invoice_one_fulfilment_writes(
    taxed_app, queued_taxed_app, dbsession, customer, fake_stripe
):
    """The worker's batch and the per-event path write the same invoice for the same
    taxed sale (the tax, its totals, each line's net, rate and tax), and both record the
    country the buyer gave the provider (Belgium, not the billing's France: flagged)."""
    inline = checkout(taxed_app, customer, BUYERS[1][0], ("site-guard", "themes"))
    batched = checkout(queued_taxed_app, customer, BUYERS[1][0], ("site-guard", "themes"))
    deliveries = []
    for placed in (inline, batched):
        session = paid_session(fake_stripe, placed)
        session["customer_details"] = {"address": {"country": "BE"}}
        fake_stripe.sessions[session["id"]].update(customer_details=session["customer_details"])
        deliveries.append(delivery(event("checkout.session.completed", session)))
    answer = webtest.TestApp(taxed_app).post("/api/webhooks/cardprovider", *deliveries[0])
    assert answer.json["status"] == "processed"
    client = webtest.TestApp(queued_taxed_app)
    answer = client.post("/api/webhooks/cardprovider", *deliveries[1])
    assert answer.json["status"] == "queued"
    assert work(queued_taxed_app, limit=10) == {"processed": 1}
    check_invoices(dbsession, [inline["order"]["number"], batched["order"]["number"]], ["20"] * 2)

    def written(number: str):
        order = dbsession.scalar(select(Order).where(Order.number == number))
        invoice = dbsession.scalar(select(Invoice).where(Invoice.order_id == order.id))
        return (
            (invoice.currency, invoice.total, invoice.lines, invoice.tax, invoice.seller),
            order.tax_details,
        )

    assert written(batched["order"]["number"]) == written(inline["order"]["number"])
    details = written(batched["order"]["number"])[1]
    assert details["paymentCountry"] == "BE"
    assert {"evidence_mismatch", "needs_review"} <= set(details["flags"])
