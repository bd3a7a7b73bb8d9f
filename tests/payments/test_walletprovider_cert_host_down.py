"""Forged wallet deliveries naming an allow-listed certificate host that does not answer:
they count against the rejected-delivery budget of their address, the failing host is
remembered for a while (one connection attempt, not one per delivery), and each leaves
the bounded rejected-delivery summary, never a server-error record."""

from __future__ import annotations

import concurrent.futures
import json
import socket
import threading

import pytest
import requests
from fakes.paypal import WALLET_ROUTE, body_of, capture_event, new_id, signed
from helpers.app import serve
from helpers.clients import page_client
from sqlalchemy import func, select

from cmsshop.models import ErrorRecord, PaymentEvent

BUDGET = 5
MAX_SUMMARY = 6 * 1024  # what a rejected row may hold, whatever the caller sent


class SilentHost:
    """A TCP port on loopback that accepts connections and never says a word (``hang``)
    or closes each at once (``reset``); it counts the connections it receives."""

    def __init__(self, mode: str):
        self.mode = mode
        self.accepted = 0
        self.held: list[socket.socket] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            if self.mode == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                conn.close()
            else:
                self.held.append(conn)

    def close(self) -> None:
        self.closed = True
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture(params=["hang", "reset"])
def silent_host(request):
    host = SilentHost(request.param)
    yield host
    host.close()


@pytest.fixture
def silent_app(make_app, wallet_settings, silent_host):
    settings = {
        **wallet_settings,
        "cmsshop.walletprovider.cert_hosts": f"localhost:{silent_host.port}",
        "cmsshop.walletprovider.timeout": "0.5",
        "cmsshop.webhooks.rejected_per_ip": str(BUDGET),
    }
    return make_app(**settings)


@pytest.fixture
def attacker(silent_app):
    return page_client(silent_app, REMOTE_ADDR="203.0.113.77")


def forged(pki, port: int) -> tuple[bytes, dict]:
    body = body_of(capture_event(new_id(), "ORD-FORGED", "68.00"))
    cert_url = f"https://localhost:{port}/v1/notifications/certs/CERT-{new_id()}"
    return body, signed(pki, cert_url, body)


def test_deliveries_with_a_silent_cert_host_are_throttled_and_summarised(
    attacker, silent_host, pki, dbsession
):
    answers = []
    for _ in range(BUDGET + 10):
        body, headers = forged(pki, silent_host.port)
        answers.append(attacker.post(WALLET_ROUTE, body, headers=headers, status="*"))

    statuses = [a.status_int for a in answers]
    assert statuses[:BUDGET] == [503] * BUDGET
    assert statuses[BUDGET:] == [429] * 10
    assert {a.json["code"] for a in answers[:BUDGET]} == {"verification_unavailable"}
    assert all(int(a.headers["Retry-After"]) >= 1 for a in answers)
    # The failing host was tried once and then remembered, not once per delivery.
    assert silent_host.accepted == 1

    dbsession.commit()  # a fresh snapshot
    assert dbsession.scalar(select(func.count()).select_from(ErrorRecord)) == 0
    rows = list(dbsession.scalars(select(PaymentEvent)))
    assert len(rows) == BUDGET  # nothing written past the budget
    for row in rows:
        assert row.status == "rejected"  # unverified: reprocess re-verifies it first
        assert row.last_error.startswith("verification unavailable:")
        kept = {name.lower() for name in json.loads(row.headers)}
        assert "paypal-cert-url" in kept and "x-forwarded-for" not in kept
        size = sum(len((v or "").encode()) for v in (row.payload, row.headers, row.last_error))
        assert size <= MAX_SUMMARY


def test_concurrent_deliveries_make_one_connection_to_the_silent_host(silent_app, silent_host, pki):
    """While one delivery waits on the host, the others wait for its outcome instead of
    each opening a connection of their own."""

    def post(url: str) -> int:
        body, headers = forged(pki, silent_host.port)
        return requests.post(url + WALLET_ROUTE, data=body, headers=headers, timeout=30).status_code

    with serve(silent_app) as url, concurrent.futures.ThreadPoolExecutor(BUDGET) as pool:
        statuses = list(pool.map(post, [url] * BUDGET))
    assert statuses == [503] * BUDGET
    assert silent_host.accepted == 1
