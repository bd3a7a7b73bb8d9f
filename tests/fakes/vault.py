"""A fake Vault transit signer on loopback: the remote lease signer at the edge."""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

VAULT_TOKEN = "s.test-vault-token"


class FakeVaultSigner:
    """``POST /v1/transit/sign/leases`` like Vault: base64 input, ``vault:v1:`` signature.

    ``mode``: "vault" (Vault's body), "plain" ({"signature": base64url}), "wrong-key"
    (signs with another key), "slow" (answers after 1 s), "error" (HTTP 500),
    "drip-body" / "drip-headers" (a byte every ``drip_every`` s for ``drip_for`` s),
    "silent" (reads the request, never answers). ``delay`` seconds before answering
    calls whose lease is for one of ``slow_fingerprints`` (all calls when it is None).
    ``while_signing``, when set, is called with the request's body before the answer is
    made: what happens elsewhere while the lease is being signed.
    """

    def __init__(self, mode: str = "vault"):
        self.key = Ed25519PrivateKey.generate()
        self.mode = mode
        self.requests: list[dict] = []
        self.delay = 0.0
        self.slow_fingerprints: set[str] | None = None
        self.while_signing: Callable[[dict], None] | None = None
        self.drip_every, self.drip_for = 0.3, 8.0
        signer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                signer.requests.append({"body": body, "token": self.headers.get("X-Vault-Token")})
                if self.headers.get("X-Vault-Token") != VAULT_TOKEN:
                    return self._send(403, {"errors": ["permission denied"]})
                if signer.while_signing is not None:
                    signer.while_signing(body)
                if signer.mode == "error":
                    return self._send(500, {"errors": ["internal"]})
                if signer.mode == "slow":
                    time.sleep(1)
                if signer.mode in ("drip-body", "drip-headers", "silent"):
                    return self._drip()
                if signer.delay and (
                    signer.slow_fingerprints is None
                    or lease_fingerprint(body["input"]) in signer.slow_fingerprints
                ):
                    time.sleep(signer.delay)
                key = Ed25519PrivateKey.generate() if signer.mode == "wrong-key" else signer.key
                raw = key.sign(base64.b64decode(body["input"]))
                if signer.mode == "plain":
                    return self._send(200, {"signature": base64.urlsafe_b64encode(raw).decode()})
                sig = "vault:v1:" + base64.b64encode(raw).decode()
                return self._send(200, {"data": {"signature": sig, "key_version": 1}})

            def _drip(self):
                """Keep the connection busy without ever finishing the answer."""
                with contextlib.suppress(OSError):
                    if signer.mode == "drip-body":
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", "100000")
                        self.end_headers()
                    elif signer.mode == "drip-headers":
                        self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Drip: ")
                    self.wfile.flush()
                    end = time.monotonic() + signer.drip_for
                    while time.monotonic() < end:
                        if signer.mode != "silent":
                            self.wfile.write(b" ")
                            self.wfile.flush()
                        time.sleep(signer.drip_every)

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # a client that timed out and hung up is expected here

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/transit/sign/leases"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def public_key_b64(self) -> str:
        raw = self.key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return base64.b64encode(raw).decode()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def lease_fingerprint(signing_input_b64: str) -> str:
    """The ``fp`` claim of the lease whose JWS signing input was sent for signing."""
    payload = base64.b64decode(signing_input_b64).split(b".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + b"=" * (-len(payload) % 4)))["fp"]


@contextlib.contextmanager
def fake_vault(mode: str = "vault"):
    signer = FakeVaultSigner(mode)
    try:
        yield signer
    finally:
        with contextlib.suppress(Exception):
            signer.stop()


def remote_settings(vault: FakeVaultSigner, **extra) -> dict:
    return {
        "cmsshop.license_signer": "remote",
        "cmsshop.license_remote_url": vault.url,
        "cmsshop.license_remote_token": VAULT_TOKEN,
        "cmsshop.license_remote_public_keys": vault.public_key_b64,
        "cmsshop.license_remote_timeout": "0.5",
        **extra,
    }
