"""A fake Stripe API on loopback, and Stripe-style signed deliveries for tests.

Signatures are made with the stripe library's own helper
(``stripe.WebhookSignature.generate_signature_header``), independent of cmsshop's
verification code.

``FakeStripe`` serves ``POST /v1/checkout/sessions``, ``GET /v1/checkout/sessions/{id}``,
``GET /v1/payment_intents/{id}`` and ``POST /v1/refunds`` (see "refunds" below), checks
the bearer key, records every request, and can be told to fail (``fail_with = 500``) or
hold whatever data a test puts in it -- including amounts that differ from the order's (a
lying provider). A session is created as Stripe creates it: its ``amount_total`` is the
sum of its lines' unit_amount x quantity, and lines Stripe refuses (no line, a quantity
below 1, a negative or fractional unit amount, no name, mixed currencies, a total below
the minimum charge) are a 400 ``invalid_request_error``.

With ``hosted = True`` it also plays Stripe's hosted checkout page for browser tests:
created sessions get ``url = <fake>/c/pay/<id>``, where ``GET`` shows a page with a
"Pay" button (and a link back to the cancel URL). Pressing it (``POST``) marks the
session paid and complete with a PaymentIntent, sends a signed
``checkout.session.completed`` delivery to ``webhook_url`` (from a thread, as Stripe
does, after the browser is on its way; or when the test calls ``release_webhooks()``
if ``hold_webhooks`` is set), and redirects the browser to the session's success URL.
"""

from __future__ import annotations

import html
import json
import secrets
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
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


# The least a Checkout Session may charge, in minor units of a two-decimal currency
# (Stripe's minimum charge amount; 0.50 in EUR and USD).
MINIMUM_CHARGE = 50


def _whole(value, least: int) -> int | None:
    """A form value Stripe reads as an integer of at least ``least`` (else None)."""
    if not isinstance(value, str) or not value.isdigit():
        return None
    number = int(value)
    return number if number >= least else None


def line_items_problem(items) -> tuple[str, str] | None:
    """What Stripe refuses in a Checkout Session's ``line_items`` (param, message), or
    None: at least one line, each with a quantity of at least 1, a non-negative integer
    ``unit_amount`` and a name, all in one currency; the session charges the sum of
    unit_amount x quantity, which must reach the minimum charge."""
    if not isinstance(items, list) or not items:
        return "line_items", "line_items is required in payment mode"
    currencies = set()
    total = 0
    for index, item in enumerate(items):
        where = f"line_items[{index}]"
        price = item.get("price_data") if isinstance(item, dict) else None
        if not isinstance(price, dict):
            return f"{where}[price_data]", "a price or price_data is required"
        quantity = _whole(item.get("quantity"), 1)
        if quantity is None:
            return f"{where}[quantity]", "quantity must be a positive integer"
        unit = _whole(price.get("unit_amount"), 0)
        if unit is None:
            return f"{where}[price_data][unit_amount]", "unit_amount must be an integer >= 0"
        name = (price.get("product_data") or {}).get("name")
        if not isinstance(name, str) or not name.strip():
            return f"{where}[price_data][product_data][name]", "a product name is required"
        currencies.add(price.get("currency"))
        total += unit * quantity
    if len(currencies) != 1:
        return "line_items", "all line items must be in the same currency"
    if total < MINIMUM_CHARGE:
        return "line_items", "the total amount due must add up to at least the minimum charge"
    return None


class FakeStripe:
    def __init__(self):
        self.sessions: dict[str, dict] = {}
        self.intents: dict[str, dict] = {}
        # GET /v1/account (Test connection); a restricted key gets 403 there when
        # account_forbidden is set, and GET /v1/balance answers instead.
        self.account = {
            "id": "acct_fake0123456789",
            "object": "account",
            "country": "DE",
            "business_profile": {"name": "Fake Shop GmbH"},
        }
        self.account_forbidden = False
        self.requests: list[tuple[str, str]] = []
        self.created: list[dict] = []
        self.fail_with: int | None = None
        self.on_create = None  # callable(params) run before answering a create
        # The hosted checkout page (see the module docstring).
        self.hosted = False
        self.webhook_url: str | None = None
        self.hold_webhooks = False
        self.held: list[dict] = []
        self.delivered: list[tuple[str, int]] = []  # (event type, the app's status)
        # Refunds (POST /v1/refunds): every call, the refunds made, the answers kept per
        # Idempotency-Key (the same key again gets the same answer, nothing refunded),
        # and switches: ``refund_fail_with`` (an HTTP status for refund calls only),
        # ``refund_status`` (what a new refund is: succeeded, as card refunds usually
        # are, or pending).
        self.refund_calls: list[dict] = []
        self.refunds: dict[str, dict] = {}
        self.idempotent: dict[str, tuple[int, dict]] = {}
        self.refund_fail_with: int | None = None
        self.refund_status = "succeeded"
        self._refund_lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- arranging ---------------------------------------------------------------------

    def add_session(self, session: dict) -> dict:
        self.sessions[session["id"]] = session
        return session

    def add_intent(self, intent: dict) -> dict:
        self.intents[intent["id"]] = intent
        return intent

    # -- refunds -----------------------------------------------------------------------

    def refunded_of(self, intent_id: str) -> int:
        return sum(r["amount"] for r in self.refunds.values() if r["payment_intent"] == intent_id)

    def create_refund(self, params: dict, key: str | None) -> tuple[int, dict]:
        """Stripe's POST /v1/refunds: at most what is left of the PaymentIntent (received
        less refunded), an Idempotency-Key answered once."""
        with self._refund_lock:
            self.refund_calls.append({"params": params, "idempotency_key": key})
            if key and key in self.idempotent:
                return self.idempotent[key]
            answer = self._new_refund(params)
            if key and answer[0] < 500:
                self.idempotent[key] = answer
            return answer

    def _new_refund(self, params: dict) -> tuple[int, dict]:
        def refused(message: str, code: str, param: str | None = None):
            error = {"type": "invalid_request_error", "code": code, "message": message}
            if param:
                error["param"] = param
            return 400, {"error": error}

        intent = self.intents.get(params.get("payment_intent") or "")
        if intent is None:
            return refused(
                f"No such payment_intent: '{params.get('payment_intent')}'",
                "resource_missing",
                "payment_intent",
            )
        received = intent.get("amount_received", intent["amount"])
        left = received - self.refunded_of(intent["id"])
        raw = params.get("amount")
        amount = left if raw is None else _whole(raw, 1)
        if amount is None:
            return refused("Invalid positive integer", "parameter_invalid_integer", "amount")
        if left <= 0:
            return refused(
                f"Charge for {intent['id']} has already been refunded.", "charge_already_refunded"
            )
        if amount > left:
            return refused(
                f"Refund amount ({amount}) is greater than unrefunded amount on charge ({left})",
                "amount_too_large",
                "amount",
            )
        refund = {
            "id": f"re_{secrets.token_hex(10)}",
            "object": "refund",
            "amount": amount,
            "currency": intent["currency"],
            "payment_intent": intent["id"],
            "charge": intent.get("latest_charge") or f"ch_{intent['id'][3:]}",
            "metadata": params.get("metadata", {}),
            "reason": params.get("reason"),
            "status": self.refund_status,
            "created": int(time.time()),
        }
        self.refunds[refund["id"]] = refund
        return 200, refund

    def refund_event(self, refund_id: str, *, list_refunds: bool = True) -> dict:
        """The ``charge.refunded`` event Stripe sends after ``refund_id``: the charge with
        its cumulative amount_refunded (and, if ``list_refunds``, its refunds newest first,
        as API versions before 2022-11-15 sent them)."""
        refund = self.refunds[refund_id]
        intent = self.intents[refund["payment_intent"]]
        received = intent.get("amount_received", intent["amount"])
        refunded = self.refunded_of(intent["id"])
        charge = {
            "id": refund["charge"],
            "object": "charge",
            "amount": received,
            "amount_refunded": refunded,
            "refunded": refunded >= received,
            "payment_intent": intent["id"],
            "currency": intent["currency"],
        }
        if list_refunds:
            mine = [r for r in self.refunds.values() if r["payment_intent"] == intent["id"]]
            charge["refunds"] = {"object": "list", "data": list(reversed(mine))}
        return event("charge.refunded", charge)

    # -- the hosted checkout page ------------------------------------------------------

    def pay(self, session_id: str) -> dict:
        """What Stripe does when the buyer pays: the session paid and complete, its
        PaymentIntent on record, and a signed ``checkout.session.completed`` sent."""
        session = self.sessions[session_id]
        number = session["client_reference_id"]
        intent = self.add_intent(
            intent_object(number, session["amount_total"], session["currency"])
        )
        session.update(payment_status="paid", status="complete", payment_intent=intent["id"])
        payload = event("checkout.session.completed", dict(session))
        if self.hold_webhooks:
            self.held.append(payload)
        else:
            threading.Thread(target=self.send_webhook, args=(payload,), daemon=True).start()
        return session

    def release_webhooks(self) -> None:
        """Send the deliveries held back by ``hold_webhooks``."""
        held, self.held = self.held, []
        for payload in held:
            self.send_webhook(payload)

    def send_webhook(self, payload: dict) -> int:
        """POST a signed delivery of ``payload`` to ``webhook_url``; the app's status."""
        assert self.webhook_url, "set fake.webhook_url to the app's webhook route"
        body, headers = delivery(payload)
        request = urllib.request.Request(self.webhook_url, data=body, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        self.delivered.append((payload["type"], status))
        return status

    def hosted_page(self, session: dict) -> bytes:
        amount = session["amount_total"]
        total = f"{amount // 100}.{amount % 100:02d} {session['currency'].upper()}"
        cancel = html.escape(session.get("cancel_url") or "/", quote=True)
        return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Pay {total} - Fake Stripe Checkout</title></head>
<body><main><h1>Fake Stripe Checkout</h1>
<p>Order {html.escape(session["client_reference_id"] or "")}: {total}</p>
<form method="post" action="/c/pay/{session["id"]}"><button type="submit">Pay</button></form>
<p><a href="{cancel}">Cancel and go back</a></p>
</main></body></html>
""".encode()

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

            def _hosted_session(self) -> dict | None:
                path = urllib.parse.urlsplit(self.path).path
                if not (fake.hosted and path.startswith("/c/pay/")):
                    return None
                return fake.sessions.get(path[len("/c/pay/") :], {})

            def _page(self, status: int, body: bytes, location: str | None = None):
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                if location:
                    self.send_header("Location", location)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                hosted = self._hosted_session()
                if hosted is not None:
                    if not hosted:
                        return self._page(404, b"no such checkout session")
                    return self._page(200, fake.hosted_page(hosted))
                if not self._check():
                    return
                path = urllib.parse.urlsplit(self.path).path
                if path == "/v1/account":
                    if fake.account_forbidden:
                        return self._answer(
                            403,
                            {"error": {"type": "invalid_request_error", "message": "restricted"}},
                        )
                    return self._answer(200, fake.account)
                if path == "/v1/balance":
                    return self._answer(200, {"object": "balance", "available": []})
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
                hosted = self._hosted_session()
                if hosted is not None:
                    if not hosted or hosted["payment_status"] == "paid":
                        return self._page(404, b"no checkout session to pay")
                    paid = fake.pay(hosted["id"])
                    return self._page(303, b"", location=paid["success_url"])
                if not self._check():
                    return
                if urllib.parse.urlsplit(self.path).path == "/v1/refunds":
                    if fake.refund_fail_with:
                        fake.refund_calls.append({"failed": fake.refund_fail_with})
                        return self._answer(
                            fake.refund_fail_with,
                            {"error": {"type": "api_error", "message": "fake refund outage"}},
                        )
                    params = _unflatten(dict(urllib.parse.parse_qsl(raw)))
                    status, body = fake.create_refund(params, self.headers.get("Idempotency-Key"))
                    return self._answer(status, body)
                if urllib.parse.urlsplit(self.path).path != "/v1/checkout/sessions":
                    return self._answer(404, {"error": {"type": "invalid_request_error"}})
                params = _unflatten(dict(urllib.parse.parse_qsl(raw)))
                fake.created.append(params)
                if fake.on_create is not None:
                    fake.on_create(params)
                refused = line_items_problem(params.get("line_items"))
                if refused:
                    param, message = refused
                    return self._answer(
                        400,
                        {
                            "error": {
                                "type": "invalid_request_error",
                                "param": param,
                                "message": message,
                            }
                        },
                    )
                items = params["line_items"]
                session = session_object(
                    params["client_reference_id"],
                    sum(int(i["price_data"]["unit_amount"]) * int(i["quantity"]) for i in items),
                    items[0]["price_data"]["currency"],
                    payment_status="unpaid",
                )
                session["line_items"] = items
                session["metadata"] = params.get("metadata", {})
                session["url"] = f"https://checkout.stripe.test/c/pay/{session['id']}"
                if fake.hosted:
                    session["url"] = f"{fake.url}/c/pay/{session['id']}"
                    session["success_url"] = params.get("success_url")
                    session["cancel_url"] = params.get("cancel_url")
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
