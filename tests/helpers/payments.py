"""Delivering the card provider's signed events to the app: one at a time, or a storm of
the same payment's events at once and the check that they paid the order exactly once."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import requests
import webtest
from fakes.shop import counts, event_row, order_status
from fakes.stripe_api import SECRET, delivery, event, intent_object, session_object

SAME_EVENT_DELIVERIES = 20


def storm(urls: list[str], order, fake_stripe, same: int = SAME_EVENT_DELIVERIES):
    """Deliver ``same`` copies of checkout.session.completed and two other events for
    the same payment, all released at once and spread over ``urls``."""
    session = fake_stripe.add_session(session_object(order.number, order.total))
    fake_stripe.add_intent(intent_object(order.number, order.total, pi=session["payment_intent"]))
    return session_storm(urls, fake_stripe, session, same)


def session_storm(urls: list[str], fake_stripe, session: dict, same: int = SAME_EVENT_DELIVERIES):
    """As storm, for a checkout ``session`` the fake provider already has with its
    PaymentIntent (one the buyer paid on its page, say)."""
    intent = fake_stripe.intents[session["payment_intent"]]
    completed = event("checkout.session.completed", session)
    deliveries = [completed] * same + [
        event("payment_intent.succeeded", intent),
        event("checkout.session.async_payment_succeeded", session),
    ]
    webhooks = [url + CARD_WEBHOOK for url in urls]
    return completed, release_at_once(webhooks, [delivery(payload) for payload in deliveries])


CARD_WEBHOOK = "/api/webhooks/cardprovider"


def release_at_once(urls: list[str], deliveries: list[tuple[bytes, dict]]) -> list:
    """POST every signed (body, headers) of ``deliveries``, all released at the same
    moment, spread over ``urls`` (webhook URLs, of different server processes) in turn;
    the answers in the deliveries' order."""
    barrier = threading.Barrier(len(deliveries))

    def send(index: int):
        body, headers = deliveries[index]
        barrier.wait(timeout=30)
        return requests.post(urls[index % len(urls)], data=body, headers=headers, timeout=60)

    with ThreadPoolExecutor(max_workers=len(deliveries)) as pool:
        return list(pool.map(send, range(len(deliveries))))


def check_exactly_once(dbsession, order, completed, responses):
    """The storm's answers all 200, and ``order`` (an Order, or its number) paid and
    fulfilled once, each event recorded once."""
    number = getattr(order, "number", order)
    assert [r.status_code for r in responses] == [200] * len(responses), [
        r.text for r in responses if r.status_code != 200
    ]
    statuses = [r.json()["status"] for r in responses]
    assert set(statuses) <= {"processed", "duplicate"}
    assert "processed" in statuses
    assert order_status(dbsession, number) == "paid"
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


def send(webhook, payload, status="*"):
    """Sign ``payload`` as the card provider does and post it through the ``webhook``
    fixture."""
    body, headers = delivery(payload)
    return webhook(body, headers, status=status)


def deliver(app, payload, secret=SECRET, status="*", timestamp=None):
    body, headers = delivery(payload, secret=secret, timestamp=timestamp)
    return webtest.TestApp(app).post(
        "/api/webhooks/cardprovider", body, headers=headers, status=status
    )


def paid_at_the_provider(fake_stripe, redirect_url: str) -> dict:
    """The buyer pays on the fake provider's page ``redirect_url``: the signed
    ``checkout.session.completed`` event the provider sends, held back to be delivered
    by the test."""
    fake_stripe.hold_webhooks = True
    fake_stripe.pay(redirect_url.rsplit("/", 1)[1])
    return fake_stripe.held.pop()
