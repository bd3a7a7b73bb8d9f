"""A fake Stripe API on loopback, and Stripe-style signed deliveries for tests.

Signatures are made with the stripe library's own helper
(``stripe.WebhookSignature.generate_signature_header``), independent of cmsshop's
verification code.

``FakeStripe`` serves ``POST /v1/checkout/sessions``, ``GET /v1/checkout/sessions/{id}``
and ``GET /v1/payment_intents/{id}``, checks the bearer key, records every request, and
can be told to fail (``fail_with = 500``) or hold whatever data a test puts in it --
including amounts that differ from the order's (a lying provider).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import stripe

API_KEY = "sk_test_fake_0123456789"
SECRET = "whsec_test_current_0123456789abcdef"
PREVIOUS_SECRET = "whsec_test_previous_0123456789abcdef"


def sign(body: bytes, secret: str = SECRET, timestamp: int | None = None) -> str:
    """The Stripe-Signature header for ``body``, made by the stripe library."""
    return stripe.WebhookSignature.generate_signature_header(
        body.decode("utf-8"), secret, timestamp=timestamp or int(time.time())
    )


def event(event_type: str, obj: dict, event_id: str | None = None) -> dict:
    return {
        "id": event_id or f"evt_{secrets.token_hex(12)}",
        "object": "event",
        "api_version": "2024-06-20",
        "created": int(time.time()),
        "data": {"object": obj},
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": None, "idempotency_key": None},
        "type": event_type,
    }


def session_object(
    order_number: str,
    amount: int,
    currency: str = "eur",
    *,
    session_id: str | None = None,
    payment_intent: str | None = None,
    payment_status: str = "paid",
    client_reference_id: str | None = "same",
) -> dict:
    return {
        "id": session_id or f"cs_test_{secrets.token_hex(10)}",
        "object": "checkout.session",
        "amount_total": amount,
        "client_reference_id": order_number if client_reference_id == "same" else None,
        "currency": currency.lower(),
        "metadata": {"orderNumber": order_number},
        "mode": "payment",
        "payment_intent": payment_intent or f"pi_{secrets.token_hex(10)}",
        "payment_status": payment_status,
        "status": "complete" if payment_status == "paid" else "open",
    }


def intent_object(
    order_number: str | None, amount: int, currency: str = "eur", pi: str = ""
) -> dict:
    return {
        "id": pi or f"pi_{secrets.token_hex(10)}",
        "object": "payment_intent",
        "amount": amount,
        "amount_received": amount,
        "currency": currency.lower(),
        "metadata": {"orderNumber": order_number} if order_number else {},
        "status": "succeeded",
    }


def charge_object(payment_intent: str, amount: int, refunded_amount: int | None = None) -> dict:
    refunded = amount if refunded_amount is None else refunded_amount
    return {
        "id": f"ch_{secrets.token_hex(10)}",
        "object": "charge",
        "amount": amount,
        "amount_refunded": refunded,
        "refunded": refunded >= amount,
        "payment_intent": payment_intent,
        "currency": "eur",
    }


def dispute_object(payment_intent: str, status: str = "needs_response") -> dict:
    return {
        "id": f"dp_{secrets.token_hex(10)}",
        "object": "dispute",
        "charge": f"ch_{secrets.token_hex(10)}",
        "payment_intent": payment_intent,
        "status": status,
        "amount": 4900,
        "currency": "eur",
    }


def delivery(payload: dict, secret: str = SECRET, timestamp: int | None = None):
    """(body, headers) of a signed delivery."""
    body = json.dumps(payload).encode()
    return body, {
        "Content-Type": "application/json; charset=utf-8",
        "Stripe-Signature": sign(body, secret, timestamp),
    }


def _unflatten(form: dict[str, str]) -> dict:
    """Stripe's form encoding (``a[b][0][c]=v``) back into nested dicts/lists."""
    result: dict = {}
    for key, value in form.items():
        parts = key.replace("]", "").split("[")
        node = result
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            if last:
                node[part] = value
            else:
                node = node.setdefault(part, {})
    return _lists(result)


def _lists(node):
    if isinstance(node, dict):
        if node and all(k.isdigit() for k in node):
            return [_lists(node[k]) for k in sorted(node, key=int)]
        return {k: _lists(v) for k, v in node.items()}
    return node


class FakeStripe:
    def __init__(self):
        self.sessions: dict[str, dict] = {}
        self.intents: dict[str, dict] = {}
        self.requests: list[tuple[str, str]] = []
        self.created: list[dict] = []
        self.fail_with: int | None = None
        self.on_create = None  # callable(params) run before answering a create
        self._server: ThreadingHTTPServer | None = None

    # -- arranging ---------------------------------------------------------------------

    def add_session(self, session: dict) -> dict:
        self.sessions[session["id"]] = session
        return session

    def add_intent(self, intent: dict) -> dict:
        self.intents[intent["id"]] = intent
        return intent

    # -- serving -----------------------------------------------------------------------

    def start(self) -> str:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, status: int, body: dict):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _check(self) -> bool:
                fake.requests.append((self.command, self.path))
                if fake.fail_with:
                    self._answer(
                        fake.fail_with, {"error": {"type": "api_error", "message": "fake outage"}}
                    )
                    return False
                if self.headers.get("Authorization") != f"Bearer {API_KEY}":
                    self._answer(
                        401,
                        {"error": {"type": "invalid_request_error", "message": "Invalid API Key"}},
                    )
                    return False
                return True

            def do_GET(self):
                if not self._check():
                    return
                path = urllib.parse.urlsplit(self.path).path
                for prefix, store in (
                    ("/v1/checkout/sessions/", fake.sessions),
                    ("/v1/payment_intents/", fake.intents),
                ):
                    if path.startswith(prefix) and path[len(prefix) :] in store:
                        return self._answer(200, store[path[len(prefix) :]])
                self._answer(
                    404,
                    {"error": {"type": "invalid_request_error", "message": "No such object"}},
                )

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode()
                if not self._check():
                    return
                if urllib.parse.urlsplit(self.path).path != "/v1/checkout/sessions":
                    return self._answer(404, {"error": {"type": "invalid_request_error"}})
                params = _unflatten(dict(urllib.parse.parse_qsl(raw)))
                fake.created.append(params)
                if fake.on_create is not None:
                    fake.on_create(params)
                items = params.get("line_items", [])
                session = session_object(
                    params["client_reference_id"],
                    sum(int(i["price_data"]["unit_amount"]) for i in items),
                    items[0]["price_data"]["currency"],
                    payment_status="unpaid",
                )
                session["metadata"] = params.get("metadata", {})
                session["url"] = f"https://checkout.stripe.test/c/pay/{session['id']}"
                session["payment_intent"] = None
                fake.add_session(session)
                self._answer(200, session)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self.url

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def closed_port_url() -> str:
    """A loopback URL where nothing listens (connection refused)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
