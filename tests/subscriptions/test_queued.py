"""Subscription events in the production default, queued processing: the delivery is
logged and answered at once, and the worker records the period, once, as the inline
path does."""

from __future__ import annotations

import pytest
import webtest
from fakes.stripe_api import delivery
from helpers.clients import new_client
from helpers.subscriptions import GRACE, period_end, state, subscribe

from cmsshop.services.payments.events import queue
from cmsshop.services.payments.registry import REGISTRY_KEY


@pytest.fixture
def queued_app(make_app, card_settings):
    return make_app(**card_settings, **{"cmsshop.payments.webhook_processing": "queued"})


@pytest.fixture
def queued_buyer(queued_app, customer):
    client = new_client(queued_app)
    client.login(customer.email)
    return client


def test_the_worker_records_each_period_once(
    queued_app, queued_buyer, fake_stripe, monthly, dbsession
):
    client = webtest.TestApp(queued_app)
    number, events = subscribe(queued_buyer, fake_stripe)
    first = [events["checkout.session.completed"], events["invoice.paid"]] * 2
    for payload in first:
        body, headers = delivery(payload)
        answer = client.post("/api/webhooks/cardprovider", body, headers=headers).json
        assert answer["status"] in ("queued", "duplicate")
    assert state(dbsession, number)[0] is None  # nothing acted on before the worker runs
    done = queue.process_due_events(queued_app.registry, queued_app.registry[REGISTRY_KEY])
    assert done["processed"] == 1 and done["duplicate"] == 1, done
    subscription, license, periods = state(dbsession, number)
    assert len(periods) == 1 and subscription.status == "active"
    assert license.expires_at == period_end(fake_stripe) + GRACE
