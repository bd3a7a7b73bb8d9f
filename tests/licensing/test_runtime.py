"""The reference runtime client (cmsshop.runtime) against the live service: pinned keys,
nonce / audience / fingerprint / expiry checks, and grace through outages."""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers.app import serve
from sqlalchemy import update

from cmsshop.models import License, Product
from cmsshop.runtime import (
    LeaseRejected,
    LicenseClient,
    LicenseError,
    LicenseUnavailable,
    TemporaryFailure,
    verify_lease,
)
from cmsshop.runtime.client import load_key_set
from cmsshop.services.licensing.issuing import generate_license_key
from cmsshop.services.licensing.records import fingerprint_hash
from cmsshop.services.licensing.signing import LocalKeySigner, public_jwk

PRODUCT = "site-guard-pro"
FINGERPRINT = "a3f1c2e4-install-7788"


@pytest.fixture
def license(dbsession):
    product = Product(slug=PRODUCT, name="SiteGuard Pro", licensed=True, published=True)
    dbsession.add(product)
    dbsession.flush()
    license = License(key=generate_license_key(), product_id=product.id, max_activations=1)
    dbsession.add(license)
    dbsession.commit()
    return license


@pytest.fixture
def server(make_app, key_dir):
    """The live service; ``server.stop()`` takes it down mid-test."""
    app = make_app(
        **{"cmsshop.license_key_dir": str(key_dir), "cmsshop.license_key_check_interval": "0"}
    )
    stack = contextlib.ExitStack()
    url = stack.enter_context(serve(app))

    class Server:
        base_url = url

        @staticmethod
        def stop():
            stack.close()

    yield Server
    stack.close()


@pytest.fixture
def pinned(server):
    """The key set the vendor ships inside the product (fetched once, at build time)."""
    with urllib.request.urlopen(f"{server.base_url}/api/license/jwks.json") as response:
        return json.loads(response.read())


class Clock:
    def __init__(self):
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def make_client(base_url, license, pinned, **kwargs) -> LicenseClient:
    kwargs.setdefault("clock", Clock())
    return LicenseClient(
        base_url,
        product=PRODUCT,
        license_key=license.key,
        domain="https://www.customer-shop.com/",
        fingerprint=FINGERPRINT,
        pinned_keys=pinned,
        issuer="http://localhost",
        **kwargs,
    )


class TamperingProxy:
    """A man in the middle on loopback. Modes: ``pass``, ``flip-signature`` (one bit of
    the lease signature), ``replay`` (answers with the first success it relayed),
    ``html-502`` (a proxy error page)."""

    def __init__(self, upstream: str):
        self.upstream = upstream
        self.mode = "pass"
        self.recorded: bytes | None = None
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                if proxy.mode == "html-502":
                    return self._send(502, b"<html>Bad gateway</html>", "text/html")
                request = urllib.request.Request(
                    proxy.upstream + self.path, raw, {"Content-Type": "application/json"}
                )
                try:
                    with urllib.request.urlopen(request) as response:
                        status, body = response.status, response.read()
                except urllib.error.HTTPError as exc:
                    status, body = exc.code, exc.read()
                if status in (200, 201):
                    if proxy.recorded is None:
                        proxy.recorded = body
                    if proxy.mode == "replay":
                        body = proxy.recorded
                    elif proxy.mode == "flip-signature":
                        data = json.loads(body)
                        head, payload, signature = data["lease"].split(".")
                        flipped = "A" if signature[10] != "A" else "B"
                        data["lease"] = (
                            f"{head}.{payload}.{signature[:10]}{flipped}{signature[11:]}"
                        )
                        body = json.dumps(data).encode()
                return self._send(status, body, "application/json")

            def _send(self, status, body, content_type):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy(server):
    proxy = TamperingProxy(server.base_url)
    yield proxy
    proxy.stop()


# --- the happy path -------------------------------------------------------------------------


def test_activate_then_work_offline_until_refresh(server, license, pinned):
    client = make_client(server.base_url, license, pinned)
    lease = client.activate()
    assert lease.claims["aud"] == PRODUCT
    assert lease.claims["fp"] == fingerprint_hash(FINGERPRINT)
    assert lease.domain == "customer-shop.com" and lease.environment == "production"
    server.stop()
    assert client.ensure_licensed() is lease  # before refresh_after: no network needed


def test_ensure_licensed_refreshes_after_refresh_after(server, license, pinned):
    clock = Clock()
    client = make_client(server.base_url, license, pinned, clock=clock)
    first = client.activate()
    clock.now = first.refresh_after + 1
    second = client.ensure_licensed()
    assert second is not first and second.claims["nonce"] != first.claims["nonce"]
    assert client.last_error is None


def test_lease_survives_a_restart_through_the_state_file(server, license, pinned, tmp_path):
    state = str(tmp_path / "lease.json")
    lease = make_client(server.base_url, license, pinned, state_path=state).activate()
    server.stop()
    restarted = make_client(server.base_url, license, pinned, state_path=state)
    assert restarted.ensure_licensed().token == lease.token


# --- refusing bad leases --------------------------------------------------------------------


def test_tampered_lease_signature_is_refused(server, license, pinned, proxy):
    client = make_client(proxy.url, license, pinned)
    good = client.activate()
    proxy.mode = "flip-signature"
    with pytest.raises(LeaseRejected):
        client.validate()
    assert client.lease is good  # the forged answer changed nothing


def test_replayed_answer_with_another_nonce_is_refused(server, license, pinned, proxy):
    client = make_client(proxy.url, license, pinned)
    client.activate()  # recorded by the proxy
    proxy.mode = "replay"
    with pytest.raises(LeaseRejected, match="nonce"):
        client.validate()


def test_a_key_set_that_is_not_pinned_is_refused(server, license):
    stranger = {"keys": [public_jwk(Ed25519PrivateKey.generate().public_key())]}
    client = make_client(server.base_url, license, stranger)
    with pytest.raises(LeaseRejected):
        client.activate()
    assert client.lease is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"aud": "pixel-forge"}, "product"),
        ({"fp": fingerprint_hash("someone-else")}, "installation"),
        ({"nonce": "another-nonce-123456"}, "nonce"),
        ({"exp": 1000}, "expired"),
        ({"iss": "https://evil.example"}, "issuer"),
    ],
)
def test_verify_lease_checks_every_binding(tmp_path, change, reason):
    signer = LocalKeySigner(str(tmp_path), autocreate=True)
    now = time.time()
    claims = {
        "iss": "https://shop.example.com",
        "aud": PRODUCT,
        "sub": "1",
        "act": 1,
        "dom": "customer-shop.com",
        "fp": fingerprint_hash(FINGERPRINT),
        "nonce": "the-nonce-1234567890",
        "env": "production",
        "lic": {"status": "active"},
        "iat": int(now),
        "nbf": int(now),
        "exp": int(now) + 3600,
        "refresh_after": int(now) + 1800,
    }
    key_set = load_key_set(signer.jwks())
    check = {
        "product": PRODUCT,
        "fingerprint": FINGERPRINT,
        "nonce": "the-nonce-1234567890",
        "now": now,
        "issuer": "https://shop.example.com",
    }
    assert verify_lease(signer.sign(claims), key_set, **check).claims == claims
    with pytest.raises(LeaseRejected, match=reason):
        verify_lease(signer.sign({**claims, **change}), key_set, **check)


# --- grace through outages ------------------------------------------------------------------


def test_server_down_keeps_the_last_good_lease_until_it_expires(server, license, pinned):
    clock = Clock()
    client = make_client(server.base_url, license, pinned, clock=clock, timeout=2)
    lease = client.activate()
    server.stop()
    clock.now = lease.refresh_after + 10  # time to refresh, but nobody answers
    assert client.ensure_licensed() is lease
    assert isinstance(client.last_error, TemporaryFailure)
    clock.now = lease.expires_at + 1
    with pytest.raises(LicenseUnavailable):
        client.ensure_licensed()


def test_503_and_html_errors_keep_the_lease(server, license, pinned, proxy, key_dir):
    clock = Clock()
    client = make_client(proxy.url, license, pinned, clock=clock)
    lease = client.activate()
    clock.now = lease.refresh_after + 1

    (key_file,) = key_dir.iterdir()
    key_file.write_text("broken")  # the service now answers 503 signing_unavailable
    with pytest.raises(TemporaryFailure) as info:
        client.validate()
    assert info.value.status == 503
    assert client.ensure_licensed() is lease

    proxy.mode = "html-502"
    assert client.ensure_licensed() is lease
    assert client.last_error.status == 502


def test_a_definitive_refusal_drops_the_lease(server, license, pinned, dbsession):
    clock = Clock()
    client = make_client(server.base_url, license, pinned, clock=clock)
    lease = client.activate()
    dbsession.execute(update(License).where(License.id == license.id).values(status="revoked"))
    dbsession.commit()
    clock.now = lease.refresh_after + 1
    with pytest.raises(LicenseError) as info:
        client.ensure_licensed()
    assert info.value.code == "license_revoked" and info.value.status == 403
    assert client.lease is None


def test_deactivate_ends_the_license_on_this_installation(server, license, pinned):
    client = make_client(server.base_url, license, pinned)
    client.activate()
    lease = client.deactivate()
    assert lease.deactivated and not lease.is_valid(time.time())
    with pytest.raises(LicenseError) as info:
        client.ensure_licensed()
    assert info.value.code == "activation_not_found"
    # the seat is free again for another installation
    other = LicenseClient(
        server.base_url,
        product=PRODUCT,
        license_key=license.key,
        domain="other-shop.com",
        fingerprint="other-installation-" + secrets.token_hex(4),
        pinned_keys=pinned,
    )
    assert other.activate().claims["dom"] == "other-shop.com"


# --- feature flags ----------------------------------------------------------------------------


def test_features_come_from_the_signed_lease_and_survive_a_restart(
    server, license, pinned, dbsession, tmp_path
):
    dbsession.execute(update(License).values(features=["pro", "support"]))
    dbsession.commit()
    state = str(tmp_path / "lease.json")
    lease = make_client(server.base_url, license, pinned, state_path=state).activate()
    assert lease.features == frozenset({"pro", "support"})
    assert lease.has_feature("pro") and not lease.has_feature("agency")
    server.stop()
    restarted = make_client(server.base_url, license, pinned, state_path=state)
    assert restarted.ensure_licensed().has_feature("support")  # offline, from the state file


def test_a_lease_edited_to_claim_another_feature_is_refused(server, license, pinned):
    lease = make_client(server.base_url, license, pinned).activate()
    assert lease.features == frozenset()
    header, payload, signature = lease.token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["lic"]["features"] = ["pro"]
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    with pytest.raises(LeaseRejected, match="signature"):
        verify_lease(
            f"{header}.{forged}.{signature}",
            load_key_set(pinned),
            product=PRODUCT,
            fingerprint=FINGERPRINT,
            nonce=None,
            now=time.time(),
        )
