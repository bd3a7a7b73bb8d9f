"""Queued webhook processing (cmsshop.payments.webhook_processing = queued): a delivery is
logged and answered before anyone asks the provider; the worker confirms and fulfils,
exactly once, retries what failed with backoff, and shares the work between workers.
Also the per-process cache of the providers' saved settings."""

from __future__ import annotations

import datetime as dt
import signal
import threading
import time
from collections import Counter

import pytest
import webtest
from fakes.shop import counts, event_row, make_order, order_status
from fakes.stripe_api import SECRET, delivery, event, intent_object, session_object
from helpers.app import write_admin_ini
from helpers.cli import start_admin
from helpers.clients import new_client
from sqlalchemy import select, text, update

from cmsshop.models import (
    Entitlement,
    Fulfilment,
    Invoice,
    License,
    Order,
    OutboxMessage,
    PaymentEvent,
    PaymentSetting,
)
from cmsshop.services.payments.events import queue
from cmsshop.services.payments.registry import REGISTRY_KEY
from cmsshop.services.payments.settings import ConfigCache, encrypt_value
from cmsshop.util import isoformat_z, utcnow


@pytest.fixture
def queued_app(make_app, card_settings):
    return make_app(**card_settings, **{"cmsshop.payments.webhook_processing": "queued"})


@pytest.fixture
def post(queued_app):
    client = webtest.TestApp(queued_app)

    def send(payload, status=200):
        body, headers = delivery(payload)
        return client.post("/api/webhooks/cardprovider", body, headers=headers, status=status)

    return send


def work(app, limit: int = queue.BATCH) -> Counter:
    """One worker pass, as `cmsshop-admin worker` makes it."""
    return queue.process_due_events(app.registry, app.registry[REGISTRY_KEY], limit=limit)


def make_due(dbsession, event_id: str) -> None:
    """Time passes: the event's retry (or lease) is due now."""
    dbsession.commit()  # ends the read snapshot (SQLite WAL)
    dbsession.execute(
        update(PaymentEvent)
        .where(PaymentEvent.event_id == event_id)
        .values(next_attempt_at=utcnow() - dt.timedelta(seconds=1))
    )
    dbsession.commit()


@pytest.fixture
def order(dbsession, catalogue, customer):
    return make_order(dbsession, customer)


def test_a_delivery_is_logged_and_answered_before_the_provider_is_asked(
    queued_app, post, fake_stripe, order, dbsession
):
    session = fake_stripe.add_session(session_object(order.number, order.total))
    payload = event("checkout.session.completed", session)
    assert post(payload).json == {"received": True, "status": "queued"}
    assert fake_stripe.requests == []  # the request thread never waited on the provider
    assert order_status(dbsession, order.number) == "pending"
    row = event_row(dbsession, payload["id"])
    assert row.status == "received" and row.next_attempt_at is not None

    assert work(queued_app) == {"processed": 1}
    assert ("GET", f"/v1/checkout/sessions/{session['id']}") in fake_stripe.requests
    assert order_status(dbsession, order.number) == "paid"
    row = event_row(dbsession, payload["id"])
    assert row.status == "processed" and row.next_attempt_at is None
    assert row.order_number == order.number
    before = counts(dbsession)
    assert before["fulfilments"] == before["invoices"] == before["licenses"] == 1

    # A redelivery of the final event: a duplicate, nothing queued, nothing written.
    assert post(payload).json == {"received": True, "status": "duplicate"}
    assert work(queued_app) == {}
    assert counts(dbsession) == before
    assert event_row(dbsession, payload["id"]).attempts == 2


def test_redeliveries_before_the_worker_runs_fulfil_once(
    queued_app, post, fake_stripe, order, dbsession
):
    session = fake_stripe.add_session(session_object(order.number, order.total))
    intent = fake_stripe.add_intent(
        intent_object(order.number, order.total, pi=session["payment_intent"])
    )
    completed = event("checkout.session.completed", session)
    for payload in (completed, completed, event("payment_intent.succeeded", intent), completed):
        assert post(payload).json["status"] == "queued"
    outcomes = work(queued_app)
    assert outcomes == {"processed": 1, "duplicate": 1}
    assert counts(dbsession) == {
        "paid": 1,
        "fulfilments": 1,
        "invoices": 1,
        "entitlements": 1,
        "licenses": 1,
        "events": 2,
    }
    assert event_row(dbsession, completed["id"]).attempts == 3


def test_a_provider_outage_is_retried_later_and_nothing_is_marked_paid(
    queued_app, post, fake_stripe, order, dbsession, admin
):
    session = fake_stripe.add_session(session_object(order.number, order.total))
    payload = event("checkout.session.completed", session)
    fake_stripe.fail_with = 500
    assert post(payload).json["status"] == "queued"
    started = utcnow()
    assert work(queued_app) == {"confirm_failed": 1}
    row = event_row(dbsession, payload["id"])
    assert row.status == "confirm_failed" and "fake outage" in (row.last_error or "")
    # Young event: retried after RETRY_MIN, not at once.
    assert started + dt.timedelta(seconds=4) < row.next_attempt_at
    assert row.next_attempt_at < utcnow() + dt.timedelta(seconds=6)
    assert order_status(dbsession, order.number) == "pending"
    assert work(queued_app) == {}  # not due yet
    operator = new_client(queued_app)
    operator.login(admin.email)
    shown = operator.get(f"/api/admin/payment-events?order={order.number}").json["items"]
    assert [e["status"] for e in shown] == ["confirm_failed"]
    assert shown[0]["nextAttemptAt"] == isoformat_z(row.next_attempt_at)

    fake_stripe.fail_with = None
    make_due(dbsession, payload["id"])
    assert work(queued_app) == {"processed": 1}
    assert order_status(dbsession, order.number) == "paid"


def test_an_event_for_an_order_not_known_yet_waits_for_it(
    queued_app, post, fake_stripe, catalogue, customer, dbsession
):
    number = "ORD-NOT-YET-0001"
    session = fake_stripe.add_session(session_object(number, 4900))
    payload = event("checkout.session.completed", session)
    assert post(payload).json["status"] == "queued"
    assert work(queued_app) == {"pending_order": 1}
    assert event_row(dbsession, payload["id"]).status == "pending_order"

    order = make_order(dbsession, customer, number=number)
    make_due(dbsession, payload["id"])
    assert work(queued_app) == {"processed": 1}
    assert order_status(dbsession, order.number) == "paid"


def test_a_leased_event_is_taken_again_only_after_the_lease(
    queued_app, post, fake_stripe, order, dbsession
):
    session = fake_stripe.add_session(session_object(order.number, order.total))
    payload = event("checkout.session.completed", session)
    post(payload)
    # A worker takes the event and dies before acting on it.
    taken = queue.take_due_events(queued_app.registry)
    assert [due.event_id for due in taken] == [payload["id"]]
    assert work(queued_app) == {}  # leased to the dead worker
    assert event_row(dbsession, payload["id"]).next_attempt_at > utcnow() + dt.timedelta(minutes=9)
    make_due(dbsession, payload["id"])  # the lease ran out
    assert work(queued_app) == {"processed": 1}


def test_two_workers_share_the_queue_and_fulfil_each_order_once(
    queued_app, post, fake_stripe, catalogue, customer, dbsession
):
    orders = [make_order(dbsession, customer, ("themes",)) for _ in range(12)]
    for order in orders:
        session = fake_stripe.add_session(session_object(order.number, order.total))
        payload = event("checkout.session.completed", session)
        post(payload)
        post(payload)  # every event delivered twice
    outcomes: list[Counter] = []
    barrier = threading.Barrier(2)

    def worker():
        barrier.wait(timeout=30)
        mine = Counter()
        while True:
            done = work(queued_app, limit=3)
            if not done:
                break
            mine += done
        outcomes.append(mine)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sum(outcomes, Counter()) == {"processed": len(orders)}
    assert counts(dbsession) == {
        "paid": len(orders),
        "fulfilments": len(orders),
        "invoices": len(orders),
        "entitlements": len(orders),
        "licenses": 0,  # themes is not licensed
        "events": len(orders),
    }
    sequences = sorted(dbsession.scalars(select(Invoice.sequence)))
    assert sequences == list(range(1, len(orders) + 1))


def test_retry_delay_grows_with_the_age_of_the_event_and_stops_after_three_days():
    now = utcnow()

    def delay(age: dt.timedelta):
        when = queue.retry_at(now - age, now)
        return None if when is None else when - now

    assert delay(dt.timedelta(seconds=1)) == queue.RETRY_MIN
    assert delay(dt.timedelta(minutes=2)) == dt.timedelta(minutes=1)
    assert delay(dt.timedelta(hours=10)) == queue.RETRY_MAX
    assert delay(dt.timedelta(days=2, hours=23)) == queue.RETRY_MAX
    assert delay(dt.timedelta(days=3, seconds=1)) is None


def test_the_production_default_is_queued(make_app, card_settings):
    production = {
        "cmsshop.environment": "production",
        "cmsshop.secret": "a-production-secret-0123456789-abcdefghijklmnop",
        "cmsshop.password_hashing": "default",
        "cmsshop.base_url": "https://shop.example.com",
    }
    app = make_app(**card_settings, **production)
    assert app.registry.settings["cmsshop.payments.webhook_processing"] == "queued"
    inline = make_app(**card_settings)
    assert inline.registry.settings["cmsshop.payments.webhook_processing"] == "inline"


def test_a_bad_processing_mode_stops_start_up(make_app, card_settings):
    with pytest.raises(Exception, match="webhook_processing"):
        make_app(**card_settings, **{"cmsshop.payments.webhook_processing": "later"})


# --- the worker command ---------------------------------------------------------------------


@pytest.fixture
def worker_ini(tmp_path, settings, card_settings):
    return write_admin_ini(
        tmp_path / "worker.ini",
        {
            **{k: v for k, v in settings.items() if k != "cmsshop.modules"},
            "cmsshop.modules": "store webhooks.cardprovider",
            **card_settings,
            "cmsshop.payments.webhook_processing": "queued",
            "cmsshop.payments.worker_interval": "0.2",
        },
    )


def test_the_worker_fulfils_queued_payments_and_stops_on_sigterm(
    worker_ini, post, fake_stripe, order, dbsession
):
    session = fake_stripe.add_session(session_object(order.number, order.total))
    post(event("checkout.session.completed", session))
    process = start_admin(worker_ini, "worker")
    try:
        deadline = time.monotonic() + 60
        while order_status(dbsession, order.number) != "paid" and time.monotonic() < deadline:
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
        _, stderr = process.communicate()
    assert code == 0, stderr
    assert order_status(dbsession, order.number) == "paid", stderr
    assert "worker: payment events {'processed': 1}" in stderr
    assert "worker: stopped" in stderr
    assert SECRET not in stderr


def test_process_payments_makes_one_pass(worker_ini, post, fake_stripe, order, dbsession):
    session = fake_stripe.add_session(session_object(order.number, order.total))
    post(event("checkout.session.completed", session))
    process = start_admin(worker_ini, "process-payments")
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert "payments: {'processed': 1}" in stdout
    assert order_status(dbsession, order.number) == "paid"


# --- the providers' saved settings, cached per process ----------------------------------------


def test_config_cache_reads_once_per_ttl_and_after_a_clear():
    now = [100.0]
    reads = []
    cache = ConfigCache(5.0, clock=lambda: now[0])

    def read():
        reads.append(now[0])
        return {"apiKey": f"key-{len(reads)}"}

    assert cache.values("card", read) == {"apiKey": "key-1"}
    now[0] += 4.9
    assert cache.values("card", read) == {"apiKey": "key-1"}
    now[0] += 0.2
    assert cache.values("card", read) == {"apiKey": "key-2"}
    cache.clear()
    assert cache.values("card", read) == {"apiKey": "key-3"}
    cache.values("card", read)["apiKey"] = "changed by a caller"
    assert cache.values("card", read) == {"apiKey": "key-3"}

    def read_while_a_write_commits():
        cache.clear()  # a settings write committed while this read ran
        return {"apiKey": "old"}

    now[0] += 10
    assert cache.values("card", read_while_a_write_commits) == {"apiKey": "old"}
    assert cache.values("card", read) == {"apiKey": "key-4"}  # the old read was not kept
    assert ConfigCache(0, clock=lambda: now[0]).values("card", read) == {"apiKey": "key-5"}


def test_a_saved_secret_applies_at_once_in_the_saving_process(
    card_app, fake_stripe, order, dbsession, settings
):
    """The cache is emptied by the commit that writes payment_settings; a write the
    process did not see (another process: here raw SQL) waits for the TTL."""
    client = webtest.TestApp(card_app)
    new_secret = "whsec_rotated_0123456789abcdef"
    session = fake_stripe.add_session(session_object(order.number, order.total))
    payload = event("checkout.session.completed", session)

    def deliver(secret: str, status):
        body, headers = delivery(payload, secret=secret)
        return client.post("/api/webhooks/cardprovider", body, headers=headers, status=status)

    deliver("whsec_not_the_secret_at_all_000", 400)  # the config is cached now
    value = encrypt_value(settings["cmsshop.secret"], [new_secret])
    dbsession.execute(
        text(
            "INSERT INTO payment_settings (provider, field, value, encrypted, updated_at) "
            "VALUES ('cardprovider', 'webhookSecrets', :value, :yes, :now)"
        ),
        {"value": value, "yes": True, "now": utcnow()},
    )
    dbsession.commit()
    deliver(new_secret, 400)  # not seen yet: the process's copy is still fresh
    row = dbsession.scalar(select(PaymentSetting))
    row.value = encrypt_value(settings["cmsshop.secret"], [new_secret])
    dbsession.commit()  # an ORM write in this process empties its caches
    assert deliver(new_secret, 200).json["status"] == "processed"


# --- the worker's set-based fast path (services/payments/fulfil_batch.py) ---------------------


def rows_of(dbsession, order_number: str) -> dict:
    """Everything a fulfilment wrote for one order, with what must differ between two
    orders (numbers, keys, ids, times) replaced by placeholders."""
    dbsession.commit()
    dbsession.expire_all()
    order = dbsession.scalar(select(Order).where(Order.number == order_number))
    fulfilment = dbsession.scalar(select(Fulfilment).where(Fulfilment.order_id == order.id))
    invoice = dbsession.scalar(select(Invoice).where(Invoice.order_id == order.id))
    item_ids = [item.id for item in order.items]
    licenses = dbsession.scalars(select(License).where(License.order_item_id.in_(item_ids))).all()
    entitlements = dbsession.scalars(
        select(Entitlement).where(Entitlement.order_item_id.in_(item_ids))
    ).all()
    receipt = dbsession.scalar(
        select(OutboxMessage).where(OutboxMessage.dedupe_key == f"receipt:order:{order.id}")
    )
    event = dbsession.get(PaymentEvent, fulfilment.payment_event_id)

    def blank(text: str) -> str:
        for value, name in [
            (order.number, "ORDER"),
            (invoice.number, "INVOICE"),
            *[(license.key, "KEY") for license in licenses],
            (order.paid_at.strftime("%Y-%m-%d"), "DATE"),
        ]:
            text = text.replace(value, name)
        return text

    return {
        "order": (order.status, order.paid_at is not None, order.payment_reference is not None),
        "fulfilment": (
            fulfilment.provider,
            fulfilment.payment_reference == order.payment_reference,
            fulfilment.manual,
            fulfilment.confirmed_amount,
            fulfilment.confirmed_currency,
        ),
        "invoice": (invoice.currency, invoice.total, invoice.lines, invoice.user_id),
        "entitlements": sorted((e.product_id, e.user_id, e.status) for e in entitlements),
        "licenses": sorted(
            (
                license.product_id,
                license.user_id,
                license.status,
                license.max_activations,
                license.features,
                license.expires_at - license.created_at if license.expires_at else None,
                len(license.key),
            )
            for license in licenses
        ),
        "receipt": (
            receipt.kind,
            receipt.to_address,
            blank(receipt.subject),
            blank(receipt.text_body),
            blank(receipt.html_body),
            receipt.user_id,
            receipt.status,
        ),
        "event": (event.status, event.order_number == order.number, event.last_error),
    }


def test_a_batch_writes_what_one_fulfilment_writes(
    webhook, queued_app, post, fake_stripe, catalogue, customer, dbsession
):
    inline = make_order(dbsession, customer, ("site-guard", "themes"))
    batched = make_order(dbsession, customer, ("site-guard", "themes"))
    for order in (inline, batched):
        session = fake_stripe.add_session(session_object(order.number, order.total))
        body, headers = delivery(event("checkout.session.completed", session))
        if order is inline:
            assert webhook(body, headers, status=200).json["status"] == "processed"
        else:
            assert post(event("checkout.session.completed", session)).json["status"] == "queued"
    assert work(queued_app) == {"processed": 1}
    assert rows_of(dbsession, batched.number) == rows_of(dbsession, inline.number)
    assert sorted(dbsession.scalars(select(Invoice.sequence))) == [1, 2]


def test_a_batch_leaves_all_but_the_plain_case_to_the_state_machine(
    queued_app, post, fake_stripe, catalogue, customer, dbsession
):
    plain = make_order(dbsession, customer)
    cancelled = make_order(dbsession, customer, status="cancelled")
    short = make_order(dbsession, customer)
    wallet = make_order(dbsession, customer, provider="walletprovider")
    sessions = {
        order.number: fake_stripe.add_session(
            session_object(order.number, order.total - (100 if order is short else 0))
        )
        for order in (plain, cancelled, short, wallet)
    }
    intent = fake_stripe.add_intent(
        intent_object(plain.number, plain.total, pi=sessions[plain.number]["payment_intent"])
    )
    stranger = fake_stripe.add_session(session_object("ORD-NOBODY-0001", 4900))
    for session in [*sessions.values(), stranger]:
        post(event("checkout.session.completed", session))
    post(event("payment_intent.succeeded", intent))  # the same payment as `plain`

    assert work(queued_app) == {
        "processed": 1,
        "duplicate": 1,
        "needs_review": 3,
        "pending_order": 1,
    }
    assert order_status(dbsession, plain.number) == "paid"
    for order in (cancelled, short, wallet):
        assert order_status(dbsession, order.number) == "needs_review"
    counted = counts(dbsession)
    assert counted["fulfilments"] == counted["invoices"] == counted["licenses"] == 1


def test_a_failing_batch_rolls_back_whole_and_each_event_runs_alone(
    queued_app, post, fake_stripe, catalogue, customer, dbsession
):
    orders = [make_order(dbsession, customer) for _ in range(3)]
    poisoned = orders[1]
    # A row that makes delivering this order fail (entitlements are unique per item).
    dbsession.add(
        Entitlement(
            order_item_id=poisoned.items[0].id,
            user_id=customer.id,
            product_id=poisoned.items[0].product_id,
            status="active",
        )
    )
    dbsession.commit()
    payloads = {}
    for order in orders:
        session = fake_stripe.add_session(session_object(order.number, order.total))
        payloads[order.number] = event("checkout.session.completed", session)
        post(payloads[order.number])

    assert work(queued_app) == {"processed": 2, "error": 1}
    assert [order_status(dbsession, o.number) for o in orders] == ["paid", "pending", "paid"]
    assert sorted(dbsession.scalars(select(Invoice.sequence))) == [1, 2]  # none lost
    row = event_row(dbsession, payloads[poisoned.number]["id"])
    assert row.status == "error" and "IntegrityError" in (row.last_error or "")
    assert row.next_attempt_at > utcnow()  # retried later
    assert counts(dbsession)["fulfilments"] == 2
