"""Delivering outgoing webhooks to a receiver on loopback that verifies every delivery
with the stripe package's verifier: signatures (and a secret's rotation), retries and
their back-off, timeouts, the answer's size cap, redirects, order per subject, giving up
and disabling an endpoint, redelivery, and the cmsshop-admin command."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from fakes.webhook_receiver import Answer
from helpers.app import TEST_SECRET
from helpers.webhook_delivery import add_endpoint, attempts, deliveries, emit, make_due
from sqlalchemy import select

from cmsshop.models import TEST_EVENT_TYPE, OutboxMessage, WebhookEndpoint, WebhookEvent
from cmsshop.services.webhooks import signing
from cmsshop.services.webhooks.delivery import (
    BACKOFF_SECONDS,
    EndpointDisabled,
    backoff,
    deliver_due,
    purge_old_deliveries,
    redeliver,
)
from cmsshop.services.webhooks.events import emit_event
from cmsshop.util import utcnow


@pytest.fixture
def receiver(webhook_receiver):
    return webhook_receiver


@pytest.fixture
def endpoint(dbsession, receiver):
    endpoint, secret = add_endpoint(dbsession, receiver.url())
    receiver.secrets = [secret]
    return endpoint


def test_a_delivery_is_signed_for_the_stripe_verifier(app, dbsession, receiver, endpoint):
    event = emit(dbsession, "order.paid", "order:CS-1", number="CS-1", total=1200)
    report = deliver_due(app.registry)
    assert (report.succeeded, report.retried, report.failed) == (1, 0, 0)
    [got] = receiver.received
    assert got.verified_with == receiver.secrets
    assert got.path == "/hook"
    assert got.headers["Content-Type"] == "application/json"
    assert got.headers["User-Agent"] == "cmsshop-webhooks/1"
    assert got.headers["Cmsshop-Event-Id"] == event.public_id
    assert got.headers["Cmsshop-Event-Type"] == "order.paid"
    assert got.event["id"] == event.public_id
    assert got.event["type"] == "order.paid"
    assert got.event["data"] == {"number": "CS-1", "total": 1200}
    assert b" " not in got.body  # compact JSON
    [delivery] = deliveries(dbsession)
    assert delivery.status == "succeeded"
    assert delivery.delivered_at is not None
    assert delivery.last_status_code == 200
    [logged] = attempts(dbsession)
    assert (logged.outcome, logged.status_code, logged.manual) == ("succeeded", 200, False)
    assert logged.response_excerpt == '{"ok":true}'
    assert logged.latency_ms >= 0
    assert deliver_due(app.registry).attempted == 0  # nothing twice


def test_both_secrets_sign_during_a_rotation_overlap_then_only_the_new(
    app, dbsession, receiver, endpoint
):
    old = receiver.secrets[0]
    new = signing.new_secret()
    endpoint.previous_secret_encrypted = endpoint.secret_encrypted
    endpoint.secret_encrypted = signing.encrypt_secret(TEST_SECRET, new)
    endpoint.previous_secret_expires_at = utcnow() + dt.timedelta(hours=24)
    dbsession.commit()
    receiver.secrets = [old, new]
    emit(dbsession, subject="order:CS-1")
    deliver_due(app.registry)
    assert receiver.received[0].verified_with == [old, new]
    assert receiver.received[0].headers["Cmsshop-Signature"].count("v1=") == 2

    endpoint.previous_secret_expires_at = utcnow() - dt.timedelta(seconds=1)
    dbsession.commit()
    emit(dbsession, subject="order:CS-2")
    deliver_due(app.registry)
    assert receiver.received[1].verified_with == [new]
    assert receiver.received[1].headers["Cmsshop-Signature"].count("v1=") == 1


def test_a_500_is_retried_after_a_backoff_with_the_same_bytes(app, dbsession, receiver, endpoint):
    receiver.answers = [Answer(500, b"database down"), Answer(200)]
    emit(dbsession)
    now = utcnow()
    report = deliver_due(app.registry, now=now)
    assert (report.succeeded, report.retried) == (0, 1)
    [delivery] = deliveries(dbsession)
    assert delivery.status == "pending"
    assert delivery.attempts == 1
    assert delivery.last_status_code == 500
    wait = (delivery.next_attempt_at - now).total_seconds()
    assert BACKOFF_SECONDS[0] * 0.8 <= wait <= BACKOFF_SECONDS[0] * 1.2
    assert deliver_due(app.registry, now=now).attempted == 0  # not due yet

    report = deliver_due(app.registry, now=delivery.next_attempt_at)
    assert report.succeeded == 1
    first, second = receiver.received
    assert first.body == second.body
    assert first.headers["Cmsshop-Event-Id"] == second.headers["Cmsshop-Event-Id"]
    assert [a.outcome for a in attempts(dbsession)] == ["http_error", "succeeded"]
    assert attempts(dbsession)[0].response_excerpt == "database down"
    assert attempts(dbsession)[0].error == "HTTP 500"
    assert deliveries(dbsession)[0].status == "succeeded"


def test_backoff_grows_then_repeats_every_four_to_six_hours():
    assert backoff(1, rng=lambda: 0.5) == dt.timedelta(seconds=30)
    assert backoff(2, rng=lambda: 0.5) == dt.timedelta(minutes=2)
    assert backoff(6, rng=lambda: 0.5) == dt.timedelta(hours=2)
    for attempts_made in (7, 8, 30):
        assert dt.timedelta(hours=4) <= backoff(attempts_made, rng=lambda: 0.0)
        assert backoff(attempts_made, rng=lambda: 1.0) <= dt.timedelta(hours=6)


def test_a_timeout_is_retried(make_app, dbsession, receiver, endpoint):
    app = make_app(**{"cmsshop.webhooks.timeout": 1})
    receiver.answers = [Answer(sleep=3), Answer(200)]
    emit(dbsession)
    now = utcnow()
    report = deliver_due(app.registry, now=now)
    assert report.retried == 1
    [logged] = attempts(dbsession)
    assert logged.outcome == "timeout"
    assert logged.status_code is None
    make_due(dbsession, now + dt.timedelta(minutes=1))
    assert deliver_due(app.registry, now=now + dt.timedelta(minutes=1)).succeeded == 1
    assert [a.outcome for a in attempts(dbsession)] == ["timeout", "succeeded"]


def test_an_endless_answer_is_read_up_to_the_cap_only(make_app, dbsession, receiver, endpoint):
    # Were the cap not kept, reading would go on to the (long) deadline: a timeout.
    app = make_app(
        **{"cmsshop.webhooks.timeout": 60, "cmsshop.webhooks.max_response_bytes": 100000}
    )
    receiver.answers = [Answer(endless=True)]
    emit(dbsession)
    assert deliver_due(app.registry).succeeded == 1
    [logged] = attempts(dbsession)
    assert logged.outcome == "succeeded"
    assert logged.response_excerpt == "x" * 1000


def test_an_answer_dripping_past_the_deadline_is_a_timeout(make_app, dbsession, receiver, endpoint):
    # Each byte comes well within any read timeout; the whole answer never ends. (The
    # status line comes at once: 3 s leave it time on a busy machine.)
    app = make_app(**{"cmsshop.webhooks.timeout": 3})
    receiver.answers = [Answer(endless=True, drip=0.05)]
    emit(dbsession)
    assert deliver_due(app.registry).retried == 1
    [logged] = attempts(dbsession)
    assert (logged.outcome, logged.status_code) == ("timeout", 200)
    assert logged.error == "the answer took too long"


def test_a_redirect_is_a_failure_and_not_followed(app, dbsession, receiver, endpoint):
    receiver.answers = [Answer(302, b"", location=receiver.url("/elsewhere"))]
    emit(dbsession)
    assert deliver_due(app.registry).retried == 1
    assert [r.path for r in receiver.received] == ["/hook"]
    [logged] = attempts(dbsession)
    assert (logged.outcome, logged.status_code) == ("http_error", 302)
    assert "not followed" in logged.error


def test_events_of_one_subject_go_in_order_others_are_not_held_up(
    app, dbsession, receiver, endpoint
):
    receiver.answers = [Answer(503), Answer(200)]
    emit(dbsession, "license.created", "license:1")
    emit(dbsession, "license.revoked", "license:1")
    emit(dbsession, "license.created", "license:2")
    now = utcnow()
    report = deliver_due(app.registry, now=now)
    # license:1's creation failed: its revocation waits; license:2 goes through.
    assert (report.retried, report.succeeded) == (1, 1)
    assert [(r.event["type"], r.event["data"]) for r in receiver.received][1:] == [
        ("license.created", {"n": 1})
    ]
    assert [r.headers["Cmsshop-Event-Type"] for r in receiver.received] == [
        "license.created",
        "license.created",
    ]
    later = now + dt.timedelta(hours=1)
    assert deliver_due(app.registry, now=later).succeeded == 2
    types = [(r.event["type"], r.event["id"]) for r in receiver.received]
    first, revoked, *_ = deliveries(dbsession)
    assert [t for t, _ in types] == [
        "license.created",
        "license.created",
        "license.created",
        "license.revoked",
    ]
    assert types[2][1] == first.event.public_id
    assert types[3][1] == revoked.event.public_id


def test_give_up_after_the_window_and_disable_the_endpoint_with_a_mail_to_admins(
    app, dbsession, receiver, endpoint, admin, make_user
):
    make_user("second-admin@example.com", role="admin")
    make_user("customer@example.com")
    receiver.answers = [Answer(500)]
    emit(dbsession, subject="order:CS-1")
    emit(dbsession, subject="order:CS-2")
    start = utcnow()
    deliver_due(app.registry, now=start)
    endpoint = dbsession.get(WebhookEndpoint, endpoint.id)
    dbsession.refresh(endpoint)
    assert endpoint.failing_since == start
    assert endpoint.enabled

    # A day and a half later (every retry failed): not yet.
    make_due(dbsession, start + dt.timedelta(hours=36))
    deliver_due(app.registry, now=start + dt.timedelta(hours=36))
    dbsession.refresh(endpoint)
    assert endpoint.enabled
    assert all(d.status == "pending" for d in deliveries(dbsession))

    # Three days after the first failure: the deliveries give up, the endpoint is
    # disabled and every admin (no customer) gets a mail, once.
    end = start + dt.timedelta(days=3, seconds=1)
    make_due(dbsession, end)
    report = deliver_due(app.registry, now=end)
    assert report.failed >= 1
    dbsession.refresh(endpoint)
    assert not endpoint.enabled
    assert endpoint.disabled_at == end
    assert "HTTP 500" in endpoint.disabled_reason
    assert all(d.status == "failed" for d in deliveries(dbsession))
    mails = dbsession.scalars(
        select(OutboxMessage).where(OutboxMessage.kind == "webhook_disabled")
    ).all()
    assert sorted(m.to_address for m in mails) == ["root@example.com", "second-admin@example.com"]
    assert endpoint.url in mails[0].text_body
    assert endpoint.url in mails[0].html_body
    count = len(receiver.received)
    assert deliver_due(app.registry, now=end + dt.timedelta(hours=1)).attempted == 0
    assert len(receiver.received) == count


def test_a_delivery_gives_up_at_the_end_of_its_own_window(app, dbsession, receiver, endpoint):
    receiver.answers = [Answer(500), Answer(500), Answer(200)]
    emit(dbsession)
    [delivery] = deliveries(dbsession)
    end = delivery.created_at + dt.timedelta(
        seconds=app.registry.settings["cmsshop.webhooks.retry_for"]
    )
    # An attempt just before the end is scheduled again no later than the end itself.
    deliver_due(app.registry, now=end - dt.timedelta(seconds=10))
    [delivery] = deliveries(dbsession)
    assert delivery.status == "pending"
    assert delivery.next_attempt_at == end
    deliver_due(app.registry, now=end)
    [delivery] = deliveries(dbsession)
    assert delivery.status == "failed"
    assert delivery.attempts == 2


def test_a_disabled_endpoints_pending_deliveries_fail_unsent(app, dbsession, receiver, endpoint):
    emit(dbsession)
    endpoint.enabled = False
    dbsession.commit()
    report = deliver_due(app.registry)
    assert report.abandoned == 1
    assert receiver.received == []
    assert deliveries(dbsession)[0].status == "failed"
    assert attempts(dbsession) == []


def test_a_disabled_endpoint_still_gets_its_test_event_only(app, dbsession, receiver, endpoint):
    emit(dbsession)
    endpoint.enabled = False
    dbsession.commit()
    test = emit_event(
        dbsession,
        TEST_EVENT_TYPE,
        subject=f"endpoint:{endpoint.id}",
        data={},
        endpoint_ids=[endpoint.id],
    )
    dbsession.commit()
    report = deliver_due(app.registry)
    assert (report.abandoned, report.succeeded) == (1, 1)
    [got] = receiver.received
    assert got.event["id"] == test.public_id and got.event["type"] == TEST_EVENT_TYPE
    assert sorted(d.status for d in deliveries(dbsession)) == ["failed", "succeeded"]


def test_redeliver_sends_again_and_logs_a_manual_attempt(app, dbsession, receiver, endpoint):
    emit(dbsession)
    deliver_due(app.registry)
    [delivery] = deliveries(dbsession)
    assert delivery.status == "succeeded"
    later = utcnow() + dt.timedelta(days=10)  # long after the first window
    redeliver(dbsession, delivery, now=later)
    dbsession.commit()
    report = deliver_due(app.registry, now=later)
    assert report.succeeded == 1
    first, second = receiver.received
    assert first.body == second.body
    assert [a.manual for a in attempts(dbsession)] == [False, True]
    [delivery] = deliveries(dbsession)
    assert delivery.status == "succeeded"
    assert delivery.retry_until == later + dt.timedelta(days=3)


def test_a_failed_manual_attempt_is_retried_automatically(app, dbsession, receiver, endpoint):
    receiver.answers = [Answer(200), Answer(500), Answer(200)]
    emit(dbsession)
    deliver_due(app.registry)
    [delivery] = deliveries(dbsession)
    now = utcnow()
    redeliver(dbsession, delivery, now=now)
    dbsession.commit()
    deliver_due(app.registry, now=now)
    make_due(dbsession, now + dt.timedelta(minutes=5))
    deliver_due(app.registry, now=now + dt.timedelta(minutes=5))
    assert [(a.outcome, a.manual) for a in attempts(dbsession)] == [
        ("succeeded", False),
        ("http_error", True),
        ("succeeded", False),
    ]


def test_redeliver_refuses_a_disabled_endpoint(app, dbsession, receiver, endpoint):
    emit(dbsession)
    [delivery] = deliveries(dbsession)
    endpoint.enabled = False
    dbsession.commit()
    with pytest.raises(EndpointDisabled):
        redeliver(dbsession, delivery)


def test_a_redelivery_during_an_attempt_keeps_its_own_state(app, dbsession, receiver, endpoint):
    """An admin redelivers while a worker still waits on the first attempt: the
    worker's record logs its attempt but leaves the redelivery due."""
    from cmsshop.services.webhooks import delivery as delivery_service

    emit(dbsession)
    settings = app.registry.settings
    factory = app.registry["cmsshop.session_factory"]
    now = utcnow()
    job = delivery_service.claim_next(factory, settings, now)
    [row] = deliveries(dbsession)
    redeliver(dbsession, row, now=now)
    dbsession.commit()
    result = delivery_service.Result("http_error", status_code=500, error="HTTP 500")
    delivery_service.record(factory, settings, job, result, now, now)
    [row] = deliveries(dbsession)
    assert (row.status, row.attempts, row.next_attempt_at) == ("pending", 0, now)
    assert deliver_due(app.registry, now=now).succeeded == 1
    assert [a.manual for a in attempts(dbsession)] == [False, True]


def test_the_admin_command_makes_one_pass(ini, dbsession, receiver, endpoint):
    from helpers.cli import run_admin

    with open(ini) as file:
        text = file.read()
    with open(ini, "w") as file:
        file.write(
            text.replace(
                "[app:main]\n", "[app:main]\ncmsshop.webhooks.allow_private_addresses = true\n"
            )
        )
    emit(dbsession)
    done = run_admin(ini, "deliver-webhooks")
    assert done.returncode == 0, done.stderr
    assert "webhooks: 1 delivered, 0 to retry, 0 failed" in done.stdout
    assert len(receiver.received) == 1
    assert json.loads(receiver.received[0].body)["type"] == "order.paid"


def test_events_done_with_are_dropped_after_keep_days(app, dbsession, receiver, endpoint):
    receiver.answers = [Answer(200), Answer(500)]
    emit(dbsession, subject="order:CS-1")
    emit(dbsession, subject="order:CS-2")
    deliver_due(app.registry)  # CS-1 delivered, CS-2 to retry
    emit(dbsession, subject="order:CS-3")  # not attempted yet
    keep = dt.timedelta(days=app.registry.settings["cmsshop.webhooks.keep_days"])
    assert purge_old_deliveries(app.registry) == 0  # nothing is old yet
    later = utcnow() + keep + dt.timedelta(minutes=1)
    dbsession.expire_all()
    for delivery in deliveries(dbsession):
        if delivery.subject == "order:CS-3":
            delivery.status = "failed"  # given up, so done with
    dbsession.commit()
    assert purge_old_deliveries(app.registry, now=later) == 2
    dbsession.expire_all()
    [left] = deliveries(dbsession)
    assert (left.subject, left.status) == ("order:CS-2", "pending")  # still being retried
    assert [a.delivery_id for a in attempts(dbsession)] == [left.id]
    assert {e.subject for e in dbsession.scalars(select(WebhookEvent))} == {"order:CS-2"}


def test_a_secret_stored_under_another_server_secret_sends_nothing(
    app, admin_app, dbsession, receiver, endpoint
):
    endpoint.secret_encrypted = signing.encrypt_secret("another-server-secret-0123456789", "x")
    dbsession.commit()
    emit(dbsession)
    report = deliver_due(app.registry)
    assert report.retried == 1 and receiver.received == []
    [logged] = attempts(dbsession)
    assert logged.outcome == "network_error" and "decrypted" in logged.error
    shown = admin_app.get(f"/api/admin/webhooks/{endpoint.id}").json
    assert "unreadable" in shown["secretHint"]
