"""Smoke tests of the production topology (tests/deploy/conftest.py starts it): every
request goes over HTTPS through nginx, as a browser's or a payment provider's would.

The test that kills an application process runs last; it starts the process again."""

from __future__ import annotations

import hashlib
import http.client
import json
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from fakes.shop import make_catalogue, make_order
from fakes.stripe_api import delivery, event, intent_object, session_object
from helpers.account_data import paid_order
from helpers.app import PASSWORD
from helpers.checkout import BILLING, delivered
from helpers.purchases import write_release
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cmsshop.models import DownloadLog, Entitlement, Order, OrderItem, PaymentEvent
from cmsshop.services.accounts import users as accounts

SPOOFED = "203.0.113.66"
RELEASE = bytes(range(256)) * 512  # 128 KiB
ERROR_KEYS = {"code", "title", "message", "hints", "supportCode"}
WEBHOOK = "/api/webhooks/cardprovider"


# --- arranging and watching ----------------------------------------------------------------


@pytest.fixture(scope="session")
def catalogue(smoke_engine, topology):
    """The fake shop's products, and a release file of the unlicensed Theme Pack."""
    with Session(smoke_engine, expire_on_commit=False) as session:
        products = make_catalogue(session)
        write_release(session, topology.storage, products["themes"], "1.0.0", RELEASE)
        session.commit()
        return products


@pytest.fixture
def buyer(db, catalogue):
    """A customer account (production's password hashing), new for each test."""
    email = f"buyer-{time.monotonic_ns()}@example.com"
    user = accounts.create_user(db, accounts.PasswordHasher("default"), email, PASSWORD)
    db.commit()
    return user


def login(client: requests.Session, url: str, email: str) -> requests.Response:
    """Log in over HTTPS as a browser on ``url`` does (same-origin, CSRF token sent);
    the client then sends the session's CSRF token and the Origin on every request."""
    client.headers["Origin"] = url
    token = client.get(f"{url}/api/auth/session", timeout=10).json()["csrfToken"]
    response = client.post(
        f"{url}/api/auth/login",
        json={"email": email, "password": PASSWORD},
        headers={"X-CSRF-Token": token},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    client.headers["X-CSRF-Token"] = response.json()["csrfToken"]
    return response


def wait_until(check, what: str, timeout: float = 45.0):
    """Poll ``check()`` until it returns something true; that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:.0f} s for {what}")
        time.sleep(0.2)


def access_log(topology) -> list[dict]:
    """nginx's access log, one dict a request (deploy/nginx: log_format cmsshop_json)."""
    if not topology.access_log.exists():
        return []
    return [json.loads(line) for line in topology.access_log.read_text().splitlines() if line]


def logged_after(topology, seen: int, path_part: str, count: int = 1) -> list[dict]:
    """The access-log entries after the first ``seen`` whose request has ``path_part``,
    once there are ``count`` (nginx writes a line after the response has gone out)."""

    def entries() -> list[dict]:
        found = [e for e in access_log(topology)[seen:] if path_part in e["request"]]
        return found if len(found) >= count else []

    return wait_until(entries, f"{count} access-log lines of {path_part}", timeout=10)


def order_number_of(db, user) -> str:
    db.commit()  # end the read snapshot: see what the processes committed since
    return db.scalar(select(Order.number).where(Order.user_id == user.id))


def status_of(db, number: str) -> str | None:
    db.commit()
    return db.scalar(select(Order.status).where(Order.number == number))


def set_cookies(response: requests.Response) -> list[str]:
    return response.raw.headers.getlist("Set-Cookie")


# --- HTTPS, cookies, Origin ----------------------------------------------------------------


def test_login_over_https_sets_secure_cookies_and_same_origin_requests_pass(
    topology, https_client, buyer
):
    client = https_client()
    response = login(client, topology.url, buyer.email)

    cookies = set_cookies(response)
    session_cookie = [c for c in cookies if c.startswith("cmsshop_session=")]
    assert session_cookie, cookies
    for cookie in cookies:
        attributes = {part.strip().lower() for part in cookie.split(";")}
        assert "secure" in attributes and "httponly" in attributes, cookie
    assert client.get(f"{topology.url}/api/auth/session", timeout=10).json()["user"]
    # The app saw https and the Host with its port (from nginx, its trusted proxy), so
    # a same-origin unsafe request passes Pyramid's Origin check ...
    logout = client.post(f"{topology.url}/api/auth/logout", timeout=10)
    assert logout.status_code == 200, logout.text


def test_a_foreign_origin_is_refused_over_https(topology, https_client, buyer):
    client = https_client()
    login(client, topology.url, buyer.email)

    # ... and a request another site's page makes with the visitor's cookie and even a
    # valid token is refused: the Origin is checked because the app knows it is https.
    forged = client.post(
        f"{topology.url}/api/auth/logout", headers={"Origin": "https://evil.example"}, timeout=10
    )

    # Over HTTPS an unsafe request with the session cookie must say where it comes from
    # (browsers send Origin); one that names no origin at all is refused too.
    unnamed = client.post(f"{topology.url}/api/auth/logout", headers={"Origin": None}, timeout=10)

    assert forged.status_code == 403, forged.text
    assert forged.json()["code"] == "csrf_failed"
    assert unnamed.status_code == 403, unnamed.text
    assert unnamed.json()["code"] == "csrf_failed"
    assert client.get(f"{topology.url}/api/auth/session", timeout=10).json()["user"]


# --- a purchase: checkout, signed webhook, the worker, the receipt -----------------------


def test_purchase_paid_by_signed_webhook_is_fulfilled_by_the_worker_and_mailed(
    topology, https_client, buyer, provider, smtp, db
):
    client = https_client()
    login(client, topology.url, buyer.email)
    placed = client.post(
        f"{topology.url}/api/store/checkout",
        json={"items": [{"product": "themes"}], "billing": BILLING, "currency": "EUR"},
        timeout=30,
    )
    assert placed.status_code == 201, placed.text
    number = placed.json()["order"]["number"]
    redirect = placed.json()["redirectUrl"]
    assert provider.sessions[redirect.rsplit("/", 1)[1]]["client_reference_id"] == number

    # The buyer pays on the provider's page; the provider signs its event and posts it
    # to the shop's public address, as it would on the internet.
    provider.hold_webhooks = True
    try:
        provider.pay(redirect.rsplit("/", 1)[1])
        payload = provider.held.pop()
    finally:
        provider.hold_webhooks = False
    body, headers = delivery(payload)
    answer = https_client(source="127.0.0.9").post(
        f"{topology.url}{WEBHOOK}", data=body, headers=headers, timeout=30
    )

    # Production queues the event (answered at once); the worker confirms the payment
    # with the provider's API and fulfils the order.
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"received": True, "status": "queued"}
    wait_until(lambda: status_of(db, number) == "paid", f"order {number} paid")
    assert delivered(db, number) == {
        "fulfilments": 1,
        "invoices": 1,
        "entitlements": 1,
        "licenses": 0,
        "receipts": 1,
    }
    assert ("GET", f"/v1/checkout/sessions/{payload['data']['object']['id']}") in provider.requests

    # The receipt reaches the SMTP server.
    receipt = wait_until(
        lambda: [m for m in smtp.messages if m["To"] and buyer.email in m["To"]],
        "the receipt at the SMTP server",
    )
    assert len(receipt) == 1
    assert number in receipt[0].get_body(preferencelist=("plain",)).get_content()
    orders = client.get(f"{topology.url}/api/dashboard/orders", timeout=10)
    assert orders.status_code == 200, orders.text
    assert number in orders.text


# --- downloads: the app checks, nginx sends ----------------------------------------------


@pytest.fixture
def entitlement(db, buyer, catalogue):
    """The buyer's paid order of the Theme Pack, fulfilled as the worker fulfils it."""
    order = paid_order(db, buyer, ("themes",))
    return db.scalar(
        select(Entitlement)
        .join(OrderItem, OrderItem.id == Entitlement.order_item_id)
        .where(OrderItem.order_id == order.id)
    )


def signed_download_url(client, topology, entitlement) -> str:
    answer = client.post(
        f"{topology.url}/api/dashboard/downloads/{entitlement.id}/signed-url", timeout=10
    )
    assert answer.status_code == 200, answer.text
    url = answer.json()["url"]
    assert url.startswith(f"{topology.url}/api/downloads/")
    return url


def test_a_download_is_checked_by_the_app_and_sent_by_nginx(
    topology, https_client, buyer, entitlement, db
):
    client = https_client()
    login(client, topology.url, buyer.email)
    url = signed_download_url(client, topology, entitlement)
    seen = len(access_log(topology))

    whole = client.get(url, timeout=30)
    part = client.get(url, headers={"Range": "bytes=1000-1999"}, timeout=30)

    assert whole.status_code == 200, whole.text[:300]
    assert hashlib.sha256(whole.content).hexdigest() == hashlib.sha256(RELEASE).hexdigest()
    assert "attachment" in whole.headers["Content-Disposition"]
    assert "X-Accel-Redirect" not in whole.headers
    assert part.status_code == 206
    assert part.content == RELEASE[1000:2000]
    # nginx's log: the request ended in the internal location; the app's answer had no
    # body (upstreamBytes 0) and nginx sent the file's bytes.
    entries = logged_after(topology, seen, "/api/downloads/", count=2)
    assert [(e["status"], e["upstreamBytes"], e["bytes"]) for e in entries] == [
        (200, "0", len(RELEASE)),
        (206, "0", 1000),
    ], entries
    assert all(e["uri"].startswith("/protected-files/releases/themes/") for e in entries)
    # The app logged both as handed to nginx (which alone deals with the range).
    db.commit()
    logs = db.scalars(
        select(DownloadLog)
        .where(DownloadLog.entitlement_id == entitlement.id)
        .order_by(DownloadLog.id)
    ).all()
    assert [(r.delivery, r.content_length) for r in logs] == [("x-accel-redirect", 0)] * 2


def test_the_protected_files_are_not_reachable_from_outside(topology, https_client, catalogue):
    answer = https_client().get(
        f"{topology.url}/protected-files/releases/themes/1.0.0.zip", timeout=10
    )

    assert answer.status_code == 404
    assert RELEASE[:64] not in answer.content


def test_the_client_address_is_nginx_s_word_not_the_client_s(
    topology, https_client, client_address, buyer, entitlement, db
):
    client = https_client()
    login(client, topology.url, buyer.email)
    url = signed_download_url(client, topology, entitlement)
    path = url[len(topology.url) :]

    # Through nginx, with a forged X-Forwarded-For: the app records the address nginx
    # saw (the client's own loopback address), not the header the client made up.
    through = client.get(url, headers={"X-Forwarded-For": SPOOFED}, timeout=30)
    # Straight at an application process from another address, forging the header: it
    # is not the trusted proxy, so the header is ignored. The app answers with an empty
    # body and the X-Accel-Redirect for nginx (it never sends the file itself).
    direct = https_client(source="127.0.0.3").get(
        f"{topology.app_url(0)}{path}", headers={"X-Forwarded-For": SPOOFED}, timeout=30
    )

    assert through.status_code == 200 and through.content == RELEASE
    assert direct.status_code == 200
    assert direct.content == b""
    assert direct.headers["X-Accel-Redirect"].startswith("/protected-files/releases/themes/")
    db.commit()
    ips = db.scalars(
        select(DownloadLog.ip)
        .where(DownloadLog.entitlement_id == entitlement.id)
        .order_by(DownloadLog.id)
    ).all()
    assert ips == [client_address, "127.0.0.3"]


# --- bodies too big for the route --------------------------------------------------------


def post_declaring(topology, path: str, length: int) -> tuple[int, dict, bytes]:
    """POST ``path`` declaring a ``length``-byte body and sending none of it: (status,
    headers, body) of the answer, which must come from the headers alone."""
    context = ssl.create_default_context(cafile=str(topology.certificate))
    connection = http.client.HTTPSConnection(
        topology.host, topology.port, context=context, timeout=10
    )
    try:
        connection.putrequest("POST", path)
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Content-Length", str(length))
        connection.endheaders()
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def test_an_oversized_body_is_refused_by_nginx_in_the_api_s_error_shape(topology, catalogue):
    seen = len(access_log(topology))

    status, headers, body = post_declaring(topology, "/api/auth/login", 2 * 1024 * 1024)
    page_status, _, _ = post_declaring(topology, "/login", 2 * 1024 * 1024)

    assert status == 413
    assert headers["Content-Type"] == "application/json"
    error = json.loads(body)
    assert set(error) == ERROR_KEYS
    assert error["code"] == "payload_too_large"
    assert error["supportCode"]
    assert page_status == 413
    # Refused by nginx: neither request reached an application process.
    entries = logged_after(topology, seen, "POST ", count=2)
    assert [(e["status"], e["upstream"]) for e in entries] == [(413, ""), (413, "")], entries
    assert error["supportCode"] == entries[0]["requestId"]


def test_a_body_within_the_limit_reaches_the_app(topology, https_client, catalogue):
    client = https_client()
    answer = client.post(
        f"{topology.url}/api/auth/login",
        data=b'{"email": "' + b"x" * 600_000 + b'"}',
        headers={"Content-Type": "application/json", "Origin": topology.url},
        timeout=30,
    )

    # The app, not nginx, answers (no CSRF token was sent).
    assert answer.status_code == 403
    assert answer.json()["code"] == "csrf_failed"


# --- an application process killed mid-burst ---------------------------------------------

BURST_ORDERS = 24


def test_an_application_process_killed_mid_burst_loses_nothing(
    topology, https_client, buyer, provider, db
):
    orders = [make_order(db, buyer, ("themes",)) for _ in range(BURST_ORDERS)]
    deliveries = []
    for order in orders:
        paid = provider.add_session(session_object(order.number, order.total))
        provider.add_intent(intent_object(order.number, order.total, pi=paid["payment_intent"]))
        completed = event("checkout.session.completed", paid)
        # Providers deliver at least once: every event arrives twice here.
        deliveries += [completed, completed]
    answered = threading.Semaphore(0)
    statuses: list[int | str] = []
    seen = len(access_log(topology))

    def provider_delivers(payload) -> dict:
        """Post one signed delivery until it gets a 2xx, as a provider retries."""
        client = https_client(source="127.0.0.9")
        deadline = time.monotonic() + 60
        while True:
            body, headers = delivery(payload)
            try:
                answer = client.post(
                    f"{topology.url}{WEBHOOK}", data=body, headers=headers, timeout=30
                )
                statuses.append(answer.status_code)
                if 200 <= answer.status_code < 300:
                    answered.release()
                    return answer.json()
            except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError):
                # No answer, or one cut off (headers sent, then the process was killed):
                # not a 2xx, so the provider delivers again.
                statuses.append("connection error")
            assert time.monotonic() < deadline, f"never accepted: {statuses[-5:]}"
            time.sleep(0.2)

    try:
        with ThreadPoolExecutor(max_workers=6) as pool:
            results = pool.map(provider_delivers, deliveries)
            for _ in range(len(deliveries) // 3):
                assert answered.acquire(timeout=60)
            topology.kill_app(0)  # SIGKILL, mid-burst: no goodbye
            answers = list(results)

        # Every delivery got its 2xx in the end; nginx sent the rest to the live process.
        assert {a["status"] for a in answers} <= {"queued", "duplicate", "processed"}
        app1, app2 = (f"127.0.0.1:{port}" for port in topology.app_ports)
        entries = logged_after(topology, seen, WEBHOOK)
        assert any(e["upstream"] == app1 and e["status"] == 200 for e in entries)
        assert any(e["upstream"] == app2 and e["status"] == 200 for e in entries)

        # The worker pays every order exactly once.
        numbers = [order.number for order in orders]

        def all_paid() -> bool:
            db.commit()
            return db.scalar(
                select(func.count()).where(Order.number.in_(numbers), Order.status == "paid")
            ) == len(numbers)

        wait_until(all_paid, f"{len(numbers)} orders paid", timeout=90)
        for number in numbers:
            assert delivered(db, number) == {
                "fulfilments": 1,
                "invoices": 1,
                "entitlements": 1,
                "licenses": 0,
                "receipts": 1,
            }, number
        event_ids = {payload["id"] for payload in deliveries}
        rows = db.scalars(select(PaymentEvent).where(PaymentEvent.event_id.in_(event_ids))).all()
        assert sorted(r.event_id for r in rows) == sorted(event_ids)
        assert {r.status for r in rows} == {"processed"}
    finally:
        if topology.processes["app1"].poll() is not None:
            topology.start_app(0)

    # Started again, it serves as before.
    health = https_client().get(f"{topology.app_url(0)}/api/health", timeout=10)
    assert health.status_code == 200
