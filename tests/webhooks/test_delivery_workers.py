"""Several workers on the same due deliveries (threads of one process, and cmsshop-admin
processes): each delivery reaches the receiver exactly once."""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter

import pytest
from fakes.webhook_receiver import Answer
from helpers.cli import start_admin
from helpers.webhook_delivery import add_endpoint, deliveries, emit

from cmsshop.services.webhooks.delivery import deliver_due

COUNT = 24


@pytest.fixture
def receiver(webhook_receiver):
    # A little time per answer, so the workers' claims interleave.
    webhook_receiver.answers = [Answer(200, sleep=0.02)]
    return webhook_receiver


def emit_many(dbsession, receiver) -> set[str]:
    _, secret = add_endpoint(dbsession, receiver.url())
    receiver.secrets = [secret]
    return {emit(dbsession, subject=f"order:CS-{i}", i=i).public_id for i in range(COUNT)}


def assert_each_delivered_once(dbsession, receiver, expected: set[str]) -> None:
    seen = Counter(r.headers["Cmsshop-Event-Id"] for r in receiver.received)
    assert set(seen) == expected
    assert set(seen.values()) == {1}
    assert all(r.verified_with == receiver.secrets for r in receiver.received)
    assert {d.status for d in deliveries(dbsession)} == {"succeeded"}


def test_two_worker_threads_deliver_each_event_once(app, dbsession, receiver):
    expected = emit_many(dbsession, receiver)
    reports, errors = [], []
    start = threading.Barrier(2)

    def work() -> None:
        try:
            start.wait()
            reports.append(deliver_due(app.registry))
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert sum(r.succeeded for r in reports) == COUNT
    assert_each_delivered_once(dbsession, receiver, expected)


@pytest.fixture
def webhook_ini(ini):
    """The cmsshop-admin ini, with loopback receivers allowed and quick worker passes."""
    with open(ini) as file:
        text = file.read()
    with open(ini, "w") as file:
        file.write(
            text.replace(
                "[app:main]\n",
                "[app:main]\ncmsshop.webhooks.allow_private_addresses = true\n"
                "cmsshop.webhooks.worker_interval = 0.2\n",
            )
        )
    return ini


def wait_for(condition, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def test_the_worker_delivers_and_stops_on_sigterm_after_the_attempt_in_flight(
    webhook_ini, dbsession, receiver
):
    receiver.answers = [Answer(200), Answer(200, sleep=1.0)]
    _, secret = add_endpoint(dbsession, receiver.url())
    receiver.secrets = [secret]
    first = emit(dbsession, subject="order:CS-1").public_id
    second = emit(dbsession, subject="order:CS-2").public_id
    process = start_admin(webhook_ini, "worker")
    try:
        wait_for(lambda: len(receiver.received) == 2)  # the second is answered after 1 s
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
        _, stderr = process.communicate()
    assert code == 0, stderr
    # Each once; two subjects' events go out on the worker's threads in either order.
    received = [r.headers["Cmsshop-Event-Id"] for r in receiver.received]
    assert sorted(received) == sorted([first, second])
    # The attempt in flight was recorded before the worker stopped.
    assert {d.status for d in deliveries(dbsession)} == {"succeeded"}
    assert secret not in stderr


def test_two_worker_processes_deliver_each_event_once(webhook_ini, dbsession, receiver):
    ini = webhook_ini
    expected = emit_many(dbsession, receiver)
    processes = [start_admin(ini, "deliver-webhooks") for _ in range(2)]
    outputs = [process.communicate(timeout=120) for process in processes]
    for process, (stdout, stderr) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, stderr
        assert "webhooks:" in stdout
    assert_each_delivered_once(dbsession, receiver, expected)
