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

Subscriptions (Stripe Billing) are played in the shapes of the API version stripe-python
16.x speaks (``BILLING_API_VERSION``): an invoice names its subscription under
``parent.subscription_details``, its payments under ``payments`` and the service period
under ``lines.data[].period``; a subscription's current period is on its items. A session
created with ``mode=subscription`` needs recurring lines of one interval and refuses
``payment_intent_data``. Paying it makes a customer, a subscription, its first invoice
(paid by a PaymentIntent kept in ``intents``, so refunds work on it) and sends
``checkout.session.completed`` -- and, unless ``subscription_events_on_pay`` is off,
``customer.subscription.created`` and ``invoice.paid`` -- as the payment-mode ``pay``
does. ``GET /v1/subscriptions/{id}`` and ``GET /v1/invoices/{id}`` serve them. What
happens later (``renew``, ``retry``, ``give_up``, ``schedule_cancel``, ``end``, ``pause``,
``resume_paused``, ``change_plan``) changes the objects and returns the events Stripe
would send without sending them, so a test chooses their order and duplicates and sends
them with ``send_webhook`` or ``send_all``. ``DELETE /v1/subscriptions/{id}`` cancels one
at once (``cancel_calls`` records each call with its query; a canceled one is a 400;
``cancel_fail_with`` fails these calls only),
its ``customer.subscription.deleted`` sent or held as an update's events are.

Coupons (``POST /v1/coupons``, ``GET /v1/coupons/{id}``): ``amount_off`` with a
``currency``, or ``percent_off``; ``duration`` ``once`` or ``forever``;
``max_redemptions``; an Idempotency-Key answered once. A session's ``discounts`` (one
coupon, valid, in the session's currency) takes its discount off the session's total
(``amount_subtotal`` stays the lines' sum; ``total_details.amount_discount``). In
subscription mode the coupon becomes the subscription's discount: the first invoice is
discounted (``total_discount_amounts``, ``amount_due`` the lines' sum less the discount),
a ``once`` coupon then leaves the subscription and renewals bill the full price, while a
``forever`` coupon discounts every renewal too. A coupon is redeemed when the session is
paid; one used up (``times_redeemed`` at ``max_redemptions``) refuses another session.
"""

from __future__ import annotations

import calendar
import copy
import html
import json
import secrets
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import stripe

API_KEY = "sk_test_fake_0123456789"
SECRET = "whsec_test_current_0123456789abcdef"
PREVIOUS_SECRET = "whsec_test_previous_0123456789abcdef"
# The API version of the Billing objects (stripe-python 16.x's): their events say so, while
# the payment-mode events keep the version cmsshop's own simulated events carry.
BILLING_API_VERSION = "2026-10-28.endive"


def sign(body: bytes, secret: str = SECRET, timestamp: int | None = None) -> str:
    """The Stripe-Signature header for ``body``, made by the stripe library."""
    return stripe.WebhookSignature.generate_signature_header(
        body.decode("utf-8"), secret, timestamp=timestamp or int(time.time())
    )


def event(
    event_type: str,
    obj: dict,
    event_id: str | None = None,
    *,
    api_version: str = "2024-06-20",
    previous_attributes: dict | None = None,
) -> dict:
    data = {"object": obj}
    if previous_attributes is not None:
        data["previous_attributes"] = previous_attributes
    return {
        "id": event_id or f"evt_{secrets.token_hex(12)}",
        "object": "event",
        "api_version": api_version,
        "created": int(time.time()),
        "data": data,
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
        "subscription": None,
        "invoice": None,
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


def line_items_problem(items, mode: str = "payment") -> tuple[str, str] | None:
    """What Stripe refuses in a Checkout Session's ``line_items`` (param, message), or
    None: at least one line, each with a quantity of at least 1, a non-negative integer
    ``unit_amount`` and a name, all in one currency; the session charges the sum of
    unit_amount x quantity, which must reach the minimum charge."""
    if not isinstance(items, list) or not items:
        return "line_items", f"line_items is required in {mode} mode"
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


INTERVALS = ("day", "week", "month", "year")
# Stripe bills at most every three years.
_LONGEST = {"day": 3 * 365, "week": 3 * 52, "month": 3 * 12, "year": 3}


def recurring_problem(params: dict) -> tuple[str, str] | None:
    """What Stripe refuses in a Checkout Session's mode and recurring prices (param,
    message), or None; run after ``line_items_problem`` passed. Subscription mode needs at
    least one recurring line, all of one interval and interval_count, and refuses
    ``payment_intent_data``; payment mode refuses recurring lines and ``subscription_data``."""
    mode = params.get("mode") or "payment"
    if mode not in ("payment", "subscription"):
        return "mode", f"the fake plays payment and subscription mode, not {mode!r}"
    cycles = set()
    for index, item in enumerate(params["line_items"]):
        recurring = item["price_data"].get("recurring")
        if recurring is None:
            continue
        where = f"line_items[{index}][price_data][recurring]"
        if mode == "payment":
            return where, (
                "You specified `payment` mode but passed a recurring price. Either switch to "
                "`subscription` mode or use only one-time prices."
            )
        interval = recurring.get("interval") if isinstance(recurring, dict) else None
        if interval not in INTERVALS:
            return f"{where}[interval]", "interval must be one of day, week, month or year"
        count = _whole(recurring.get("interval_count", "1"), 1)
        if count is None or count > _LONGEST[interval]:
            return f"{where}[interval_count]", "interval_count must be 1 to three years' worth"
        cycles.add((interval, count))
    if mode == "payment":
        if "subscription_data" in params:
            return "subscription_data", (
                "You can only pass `subscription_data` in `subscription` mode."
            )
        return None
    if not cycles:
        return "line_items", (
            "You must provide at least one recurring price in `subscription` mode when using "
            "prices."
        )
    if len(cycles) > 1:
        return "line_items", (
            "All prices on a subscription must have the same `recurring.interval` and "
            "`recurring.interval_count`."
        )
    if "payment_intent_data" in params:
        return "payment_intent_data", (
            "You can not pass `payment_intent_data` in `subscription` mode."
        )
    return None


def add_interval(start: int, interval: str, count: int = 1, anchor: int | None = None) -> int:
    """``start`` (unix seconds) plus ``count`` intervals in UTC calendar terms. Months and
    years land on the anchor's day of the month (``start``'s if none), or on the month's
    last day when it is shorter, as Stripe bills from a subscription's billing cycle
    anchor (31 January, 28 February, 31 March)."""
    if interval in ("day", "week"):
        return start + count * 86400 * (1 if interval == "day" else 7)
    moment = datetime.fromtimestamp(start, UTC)
    months = moment.year * 12 + moment.month - 1 + count * (12 if interval == "year" else 1)
    year, month = divmod(months, 12)
    day = datetime.fromtimestamp(anchor if anchor is not None else start, UTC).day
    day = min(day, calendar.monthrange(year, month + 1)[1])
    return int(moment.replace(year=year, month=month + 1, day=day).timestamp())


def _diff(before: dict, after: dict) -> dict:
    """Stripe's ``previous_attributes``: the earlier value of every top-level key that
    changed."""
    return {key: before.get(key) for key in after if before.get(key) != after[key]}


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
        # Subscriptions (see the module docstring). ``subscription_events_on_pay`` off
        # leaves pay() at checkout.session.completed alone. Stripe advances a
        # subscription's period when it bills the renewal, paid or not, and so does this
        # fake (``period_advances_at_renewal`` off leaves it where it was until paid).
        # ``POST /v1/subscriptions/{id}`` (cancel_at_period_end) and
        # ``POST /v1/billing_portal/sessions`` (kept in ``portal_sessions``) serve the
        # customer's self-service; the events an update causes go where pay()'s go.
        self.subscriptions: dict[str, dict] = {}
        self.invoices: dict[str, dict] = {}
        self.subscription_events_on_pay = True
        self.period_advances_at_renewal = True
        self.portal_sessions: list[dict] = []
        self.cancel_calls: list[dict] = []
        self.cancel_fail_with: int | None = None  # an HTTP status for DELETE calls only
        # The card a buyer pays a subscription with (``GET /v1/payment_methods/{id}``):
        # ``card_expiry`` (month, year) is the next new card's.
        self.payment_methods: dict[str, dict] = {}
        self.card_expiry = (12, 2099)
        self.products: dict[str, dict] = {}
        self.retry_delay = 3 * 86400  # seconds to an invoice's next_payment_attempt
        self._subscription_terms: dict[str, dict] = {}  # session id -> its subscription_data
        # Coupons (see the module docstring): by id, and the answers kept per
        # Idempotency-Key of POST /v1/coupons.
        self.coupons: dict[str, dict] = {}
        self.coupon_answers: dict[str, tuple[int, dict]] = {}
        self._product_names: dict[str, str] = {}  # price id -> the line's product name
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
        PaymentIntent on record, and a signed ``checkout.session.completed`` sent. In
        subscription mode the PaymentIntent pays the subscription's first invoice instead
        (the session names the subscription and invoice, no PaymentIntent), and the
        subscription's first events follow (see ``subscription_events_on_pay``)."""
        session = self.sessions[session_id]
        if session.get("mode") == "subscription":
            payloads = self._start_subscription(session)
        else:
            number = session["client_reference_id"]
            intent = self.add_intent(
                intent_object(number, session["amount_total"], session["currency"])
            )
            session.update(payment_status="paid", status="complete", payment_intent=intent["id"])
            self._redeem(session)
            payloads = [event("checkout.session.completed", dict(session))]
        for payload in payloads:
            if self.hold_webhooks:
                self.held.append(payload)
            else:
                # One thread each: Stripe does not promise the order of deliveries.
                threading.Thread(target=self.send_webhook, args=(payload,), daemon=True).start()
        return session

    def send_all(self, events: list[dict]) -> list[int]:
        """Send ``events`` one after the other; the app's status for each."""
        return [self.send_webhook(payload) for payload in events]

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

    # -- subscriptions ------------------------------------------------------------------

    def _start_subscription(self, session: dict) -> list[dict]:
        """A subscription from a paid session. With ``trial_period_days`` it is trialing
        until the trial ends: its first period is the trial, billed by an invoice of 0
        that is paid at once without a payment (``billing_reason`` subscription_create),
        the session completes with ``payment_status`` no_payment_required, and the
        billing cycle is anchored at the trial's end, where ``renew`` bills the first
        paid period (subscription_cycle)."""
        terms = self._subscription_terms[session["id"]]
        now = int(time.time())
        customer = f"cus_{secrets.token_hex(7)}"
        trial_days = terms.get("trial_period_days") or 0
        end = add_interval(now, terms["interval"], terms["interval_count"])
        if trial_days:
            end = now + trial_days * 86400
        items = []
        for line in session["line_items"]:
            if "recurring" not in line["price_data"]:
                continue
            price = self._price(
                int(line["price_data"]["unit_amount"]),
                session["currency"],
                terms["interval"],
                terms["interval_count"],
                line["price_data"]["product_data"]["name"],
            )
            items.append(
                {
                    "id": f"si_{secrets.token_hex(7)}",
                    "object": "subscription_item",
                    "current_period_start": now,
                    "current_period_end": end,
                    "quantity": int(line["quantity"]),
                    "price": price,
                }
            )
        card = self.add_payment_method(self.card_expiry)
        sub = {
            "id": f"sub_{secrets.token_hex(12)}",
            "object": "subscription",
            "status": "trialing" if trial_days else "active",
            "customer": customer,
            "default_payment_method": card["id"],
            "currency": session["currency"],
            "collection_method": "charge_automatically",
            "billing_cycle_anchor": end if trial_days else now,
            "trial_start": now if trial_days else None,
            "trial_end": end if trial_days else None,
            "cancel_at_period_end": False,
            "cancel_at": None,
            "canceled_at": None,
            "cancellation_details": {"reason": None, "comment": None, "feedback": None},
            "ended_at": None,
            "created": now,
            "start_date": now,
            "livemode": False,
            "metadata": dict(terms["metadata"]),
            "latest_invoice": None,
            "discounts": [],
            "items": {"object": "list", "data": items, "has_more": False},
        }
        self.subscriptions[sub["id"]] = sub
        # The first invoice bills every line of the session: the recurring ones for the
        # first period, one-time ones once (their period is the moment they were billed).
        lines = []
        for line in session["line_items"]:
            recurring = "recurring" in line["price_data"]
            name = line["price_data"]["product_data"]["name"]
            lines.append(
                self._invoice_line(
                    0
                    if trial_days
                    else int(line["price_data"]["unit_amount"]) * int(line["quantity"]),
                    session["currency"],
                    f"Trial period for {name}" if trial_days else name,
                    now,
                    end if recurring else now,
                    int(line["quantity"]),
                )
            )
        coupon = self._redeem(session)
        if coupon is not None:
            sub["discounts"] = [coupon["id"]]
        invoice = self._open_invoice(sub, lines, "subscription_create")
        if coupon is not None and coupon["duration"] == "once":
            sub["discounts"] = []  # applied to the first invoice, then gone
        if trial_days:
            # Nothing to charge: Stripe marks an invoice of 0 paid with no payment.
            invoice.update(status="paid", amount_paid=0, amount_remaining=0, attempted=True)
            invoice["status_transitions"]["paid_at"] = now
        else:
            self._attempt(invoice, paid=True)
        session.update(
            payment_status="no_payment_required" if trial_days else "paid",
            status="complete",
            customer=customer,
            subscription=sub["id"],
            invoice=invoice["id"],
        )
        payloads = [self._event("checkout.session.completed", session)]
        if self.subscription_events_on_pay:
            payloads.append(self._event("customer.subscription.created", sub))
            payloads.append(self._event("invoice.paid", invoice))
        return payloads

    def _redeem(self, session: dict) -> dict | None:
        """The coupon of a session being paid, redeemed once more (None: it has none)."""
        discounts = session.get("discounts") or [{}]
        coupon = self.coupons.get(discounts[0].get("coupon") or "")
        if coupon is not None:
            coupon["times_redeemed"] += 1
            limit = coupon["max_redemptions"]
            coupon["valid"] = limit is None or coupon["times_redeemed"] < limit
        return coupon

    @staticmethod
    def discount_of(coupon: dict, subtotal: int) -> int:
        """What ``coupon`` takes off ``subtotal`` (never more than it)."""
        if coupon.get("amount_off") is not None:
            return min(coupon["amount_off"], subtotal)
        return min(round(subtotal * coupon["percent_off"] / 100), subtotal)

    def create_coupon(self, params: dict, key: str | None) -> tuple[int, dict]:
        """``POST /v1/coupons``; the same Idempotency-Key again gets the same answer."""
        if key and key in self.coupon_answers:
            return self.coupon_answers[key]
        answer = self._new_coupon(params)
        if key:
            self.coupon_answers[key] = answer
        return answer

    def _new_coupon(self, params: dict) -> tuple[int, dict]:
        def refused(param: str, message: str):
            error = {"type": "invalid_request_error", "param": param, "message": message}
            return 400, {"error": error}

        amount_off = _whole(params.get("amount_off"), 1) if "amount_off" in params else None
        percent_off = params.get("percent_off")
        if "amount_off" in params and amount_off is None:
            return refused("amount_off", "amount_off must be a positive integer")
        if (amount_off is None) == (percent_off is None):
            return refused("amount_off", "a coupon needs amount_off or percent_off, not both")
        if amount_off is not None and not params.get("currency"):
            return refused("currency", "amount_off needs a currency")
        duration = params.get("duration", "once")
        if duration not in ("once", "forever"):
            return refused("duration", "the fake plays duration once and forever")
        limit = params.get("max_redemptions")
        if limit is not None and _whole(limit, 1) is None:
            return refused("max_redemptions", "max_redemptions must be a positive integer")
        coupon = {
            "id": secrets.token_hex(4),
            "object": "coupon",
            "amount_off": amount_off,
            "percent_off": float(percent_off) if percent_off is not None else None,
            "currency": params.get("currency"),
            "duration": duration,
            "max_redemptions": int(limit) if limit is not None else None,
            "times_redeemed": 0,
            "valid": True,
            "name": params.get("name"),
            "metadata": params.get("metadata") or {},
            "created": int(time.time()),
        }
        self.coupons[coupon["id"]] = coupon
        return 200, coupon

    def discounts_problem(self, params: dict) -> tuple[str, str] | None:
        """What Stripe refuses in a session's ``discounts`` (param, message), or None: at
        most one, naming a coupon that exists, is still valid and, with amount_off, is
        in the session's currency."""
        discounts = params.get("discounts")
        if discounts is None:
            return None
        if not isinstance(discounts, list) or len(discounts) != 1:
            return "discounts", "the fake plays one discount per session"
        coupon = self.coupons.get((discounts[0] or {}).get("coupon") or "")
        if coupon is None:
            return "discounts[0][coupon]", "No such coupon"
        if not coupon["valid"]:
            return "discounts[0][coupon]", f"Coupon {coupon['id']} is no longer valid"
        currency = params["line_items"][0]["price_data"].get("currency")
        if coupon["amount_off"] is not None and coupon["currency"] != currency:
            return "discounts[0][coupon]", "the coupon's currency is not the session's"
        return None

    def _price(self, unit_amount: int, currency: str, interval: str, count: int, name: str):
        price = {
            "id": f"price_{secrets.token_hex(7)}",
            "object": "price",
            "unit_amount": unit_amount,
            "currency": currency,
            "product": f"prod_{secrets.token_hex(7)}",
            "recurring": {"interval": interval, "interval_count": count},
        }
        self._product_names[price["id"]] = name
        return price

    @staticmethod
    def _invoice_line(amount, currency, description, start, end, quantity) -> dict:
        return {
            "id": f"il_{secrets.token_hex(7)}",
            "object": "line_item",
            "amount": amount,
            "currency": currency,
            "description": description,
            "period": {"start": start, "end": end},
            "quantity": quantity,
        }

    def _open_invoice(self, sub: dict, lines: list[dict], billing_reason: str) -> dict:
        """A finalized invoice of ``sub``, not yet attempted. Its period_start and
        period_end are its creation time, not the period it bills: on real invoices they
        are the usage window before it, and code that reads them as the paid period is
        wrong."""
        now = int(time.time())
        subtotal = sum(line["amount"] for line in lines)
        discounts = [
            {"amount": self.discount_of(self.coupons[coupon_id], subtotal), "discount": coupon_id}
            for coupon_id in sub.get("discounts") or []
        ]
        amount = max(subtotal - sum(d["amount"] for d in discounts), 0)
        invoice_id = f"in_{secrets.token_hex(12)}"
        invoice = {
            "id": invoice_id,
            "object": "invoice",
            "status": "open",
            "billing_reason": billing_reason,
            "collection_method": "charge_automatically",
            "customer": sub["customer"],
            "currency": sub["currency"],
            "subtotal": subtotal,
            "total": amount,
            "total_discount_amounts": discounts,
            "amount_due": amount,
            "amount_paid": 0,
            "amount_remaining": amount,
            "created": now,
            "attempt_count": 0,
            "attempted": False,
            "next_payment_attempt": None,
            "period_start": now,
            "period_end": now,
            "livemode": False,
            "parent": {
                "type": "subscription_details",
                "quote_details": None,
                "subscription_details": {
                    "subscription": sub["id"],
                    "metadata": dict(sub["metadata"]),
                },
            },
            "lines": {"object": "list", "data": lines, "has_more": False},
            "payments": {"object": "list", "data": [], "has_more": False},
            "status_transitions": {"finalized_at": now, "paid_at": None},
            "hosted_invoice_url": f"{self._base_url()}/i/{invoice_id}",
        }
        self.invoices[invoice_id] = invoice
        sub["latest_invoice"] = invoice_id
        return invoice

    def _attempt(self, invoice: dict, *, paid: bool) -> None:
        """One attempt to charge ``invoice``, through its one PaymentIntent (made at the
        first attempt, reused by retries as Stripe does)."""
        now = int(time.time())
        payments = invoice["payments"]["data"]
        if not payments:
            intent = intent_object(None, invoice["amount_due"], invoice["currency"])
            intent["customer"] = invoice["customer"]
            self.add_intent(intent)
            payments.append(
                {
                    "id": f"inpay_{secrets.token_hex(12)}",
                    "object": "invoice_payment",
                    "invoice": invoice["id"],
                    "is_default": True,
                    "status": "open",
                    "amount_paid": None,
                    "amount_requested": invoice["amount_due"],
                    "currency": invoice["currency"],
                    "payment": {"type": "payment_intent", "payment_intent": intent["id"]},
                    "status_transitions": {"paid_at": None, "canceled_at": None},
                }
            )
        payment = payments[0]
        intent = self.intents[payment["payment"]["payment_intent"]]
        invoice["attempt_count"] += 1
        invoice["attempted"] = True
        if paid:
            intent.update(status="succeeded", amount_received=intent["amount"])
            payment.update(status="paid", amount_paid=invoice["amount_due"])
            payment["status_transitions"]["paid_at"] = now
            invoice.update(
                status="paid",
                amount_paid=invoice["amount_due"],
                amount_remaining=0,
                next_payment_attempt=None,
            )
            invoice["status_transitions"]["paid_at"] = now
        else:
            intent.update(status="requires_payment_method", amount_received=0)
            invoice["next_payment_attempt"] = now + self.retry_delay

    @staticmethod
    def _event(event_type: str, obj: dict, previous: dict | None = None) -> dict:
        return event(
            event_type,
            copy.deepcopy(obj),
            api_version=BILLING_API_VERSION,
            previous_attributes=previous,
        )

    def _updated(self, sub: dict, before: dict) -> list[dict]:
        """``customer.subscription.updated`` with what changed since ``before`` (none if
        nothing did)."""
        previous = _diff(before, sub)
        if not previous:
            return []
        return [self._event("customer.subscription.updated", sub, copy.deepcopy(previous))]

    @staticmethod
    def _set_period(sub: dict, start: int, end: int) -> None:
        for item in sub["items"]["data"]:
            item.update(current_period_start=start, current_period_end=end)

    def _live(self, sub_id: str) -> dict:
        sub = self.subscriptions[sub_id]
        if sub["status"] == "canceled":
            raise ValueError(f"{sub_id} is canceled")
        return sub

    def renew(self, sub_id: str, *, paid: bool = True) -> list[dict]:
        """The renewal at the end of the current period: an invoice for the next period
        (every item's price x quantity), paid or declined. Paid, the period advances and
        the subscription is active; declined, the invoice stays open for a retry and the
        subscription is past_due. Returns the events, unsent."""
        sub = self._live(sub_id)
        before = copy.deepcopy(sub)
        items = sub["items"]["data"]
        recurring = items[0]["price"]["recurring"]
        start = items[0]["current_period_end"]
        end = add_interval(
            start, recurring["interval"], recurring["interval_count"], sub["billing_cycle_anchor"]
        )
        lines = [
            self._invoice_line(
                item["price"]["unit_amount"] * item["quantity"],
                sub["currency"],
                self._product_names.get(item["price"]["id"]),
                start,
                end,
                item["quantity"],
            )
            for item in items
        ]
        invoice = self._open_invoice(sub, lines, "subscription_cycle")
        self._attempt(invoice, paid=paid)
        if paid or self.period_advances_at_renewal:
            self._set_period(sub, start, end)
        if paid:
            sub["status"] = "active"
            events = [
                self._event("invoice.paid", invoice),
                self._event("invoice.payment_succeeded", invoice),
            ]
        else:
            sub["status"] = "past_due"
            events = [self._event("invoice.payment_failed", invoice)]
        return events + self._updated(sub, before)

    def retry(self, invoice_id: str, *, paid: bool = True) -> list[dict]:
        """A later attempt at an open invoice. Paid, its subscription is active again over
        the invoice's period; declined again, attempt_count grows and the next attempt is
        scheduled. Returns the events, unsent."""
        invoice = self.invoices[invoice_id]
        if invoice["status"] != "open":
            raise ValueError(f"{invoice_id} is {invoice['status']}, not open")
        sub = self.subscriptions[invoice["parent"]["subscription_details"]["subscription"]]
        before = copy.deepcopy(sub)
        self._attempt(invoice, paid=paid)
        if not paid:
            return [self._event("invoice.payment_failed", invoice)]
        if sub["status"] != "canceled":
            period = invoice["lines"]["data"][0]["period"]
            self._set_period(sub, period["start"], period["end"])
            sub["status"] = "active"
        return [
            self._event("invoice.paid", invoice),
            self._event("invoice.payment_succeeded", invoice),
        ] + self._updated(sub, before)

    def give_up(self, sub_id: str) -> list[dict]:
        """The last retry failed and the subscription is canceled for it (its open
        invoices get no further attempt). Returns the events, unsent."""
        sub = self._live(sub_id)
        now = int(time.time())
        for invoice in self.invoices.values():
            details = invoice["parent"]["subscription_details"]
            if details["subscription"] == sub_id and invoice["status"] == "open":
                invoice["next_payment_attempt"] = None
        sub.update(status="canceled", canceled_at=now, ended_at=now)
        sub["cancellation_details"]["reason"] = "payment_failed"
        return [self._event("customer.subscription.deleted", sub)]

    def update_subscription(self, sub_id: str, params: dict) -> tuple[int, dict]:
        """``POST /v1/subscriptions/{id}``: ``cancel_at_period_end`` (true/false), or a new
        price (``items``); the events it causes are sent (or held) as pay()'s are."""
        sub = self.subscriptions.get(sub_id)
        if sub is None:
            return 404, {
                "error": {"type": "invalid_request_error", "message": "No such subscription"}
            }
        if sub["status"] == "canceled":
            return 400, {
                "error": {
                    "type": "invalid_request_error",
                    "message": "A canceled subscription can only update its metadata.",
                }
            }
        events = []
        if "cancel_at_period_end" in params:
            events = self.schedule_cancel(sub_id, params["cancel_at_period_end"] == "true")
        if params.get("items"):
            events = self._change_price(sub, params)
        for payload in events:
            if self.hold_webhooks:
                self.held.append(payload)
            elif self.webhook_url:
                threading.Thread(target=self.send_webhook, args=(payload,), daemon=True).start()
        return 200, copy.deepcopy(sub)

    def cancel_now(self, sub_id: str, query: dict) -> tuple[int, dict]:
        """``DELETE /v1/subscriptions/{id}``: canceled now (ended_at now, nothing more
        billed); its ``customer.subscription.deleted`` is sent (or held) as an update's
        events are. One already canceled is refused, as Stripe refuses changing it."""
        self.cancel_calls.append({"subscription": sub_id, "query": query})
        if self.cancel_fail_with:
            return self.cancel_fail_with, {"error": {"type": "api_error", "message": "outage"}}
        sub = self.subscriptions.get(sub_id)
        if sub is None:
            return 404, {
                "error": {
                    "type": "invalid_request_error",
                    "code": "resource_missing",
                    "message": f"No such subscription: '{sub_id}'",
                }
            }
        if sub["status"] == "canceled":
            return 400, {
                "error": {
                    "type": "invalid_request_error",
                    "message": "A canceled subscription can only update its metadata.",
                }
            }
        now = int(time.time())
        sub.update(
            status="canceled", ended_at=now, canceled_at=now, cancel_at_period_end=False,
            cancel_at=None,
        )  # fmt: skip
        sub["cancellation_details"]["reason"] = "cancellation_requested"
        for payload in [self._event("customer.subscription.deleted", sub)]:
            if self.hold_webhooks:
                self.held.append(payload)
            elif self.webhook_url:
                threading.Thread(target=self.send_webhook, args=(payload,), daemon=True).start()
        return 200, copy.deepcopy(sub)

    def list_invoices(self, query: dict) -> dict:
        """``GET /v1/invoices?subscription=&status=&limit=&starting_after=``: newest
        first, a page at a time, as Stripe lists them."""
        found = [
            invoice
            for invoice in sorted(self.invoices.values(), key=lambda i: i["created"], reverse=True)
            if invoice["parent"]["subscription_details"]["subscription"]
            == query.get("subscription", invoice["parent"]["subscription_details"]["subscription"])
            and invoice["status"] == query.get("status", invoice["status"])
        ]
        after = query.get("starting_after")
        if after:
            ids = [invoice["id"] for invoice in found]
            found = found[ids.index(after) + 1 :] if after in ids else []
        limit = int(query.get("limit", 10))
        return {
            "object": "list",
            "url": "/v1/invoices",
            "has_more": len(found) > limit,
            "data": [copy.deepcopy(invoice) for invoice in found[:limit]],
        }

    def create_product(self, params: dict) -> dict:
        """``POST /v1/products``: a product a new price can name."""
        product = {
            "id": f"prod_{secrets.token_hex(7)}",
            "object": "product",
            "name": params.get("name"),
            "metadata": params.get("metadata") or {},
        }
        self.products[product["id"]] = product
        return product

    def _proration(self, sub: dict, price_data: dict) -> tuple[int, int, int]:
        """(the amount a change to ``price_data`` now charges, from, to): the new price
        less the old for the rest of the current period, rounded to the minor unit, as
        Stripe prorates by the second."""
        item = sub["items"]["data"][0]
        start, end = item["current_period_start"], item["current_period_end"]
        now = min(max(int(time.time()), start), end)
        difference = (int(price_data["unit_amount"]) - item["price"]["unit_amount"]) * item[
            "quantity"
        ]
        return round(difference * (end - now) / (end - start)), now, end

    def preview_invoice(self, params: dict) -> tuple[int, dict]:
        """``POST /v1/invoices/create_preview`` of a price change (the upcoming charge)."""
        sub = self.subscriptions.get(params.get("subscription") or "")
        details = params.get("subscription_details") or {}
        items = details.get("items") or []
        if sub is None or not items or "price_data" not in items[0]:
            return 400, {"error": {"type": "invalid_request_error", "message": "bad preview"}}
        amount, start, end = self._proration(sub, items[0]["price_data"])
        return 200, {
            "object": "invoice",
            "id": None,
            "amount_due": max(amount, 0),
            "total": amount,
            "currency": sub["currency"],
            "subscription": sub["id"],
            "lines": {
                "object": "list",
                "data": [self._invoice_line(amount, sub["currency"], "proration", start, end, 1)],
            },
        }

    def _change_price(self, sub: dict, params: dict) -> list[dict]:
        """``POST /v1/subscriptions/{id}`` with ``items[0][price_data]`` and
        ``proration_behavior=always_invoice``: the new price from now, the difference for
        the rest of the period invoiced and charged at once."""
        before = copy.deepcopy(sub)
        price_data = params["items"][0]["price_data"]
        amount, start, end = self._proration(sub, price_data)
        item = sub["items"]["data"][0]
        recurring = price_data.get("recurring") or {}
        item["price"] = {
            "id": f"price_{secrets.token_hex(7)}",
            "object": "price",
            "unit_amount": int(price_data["unit_amount"]),
            "currency": price_data.get("currency", sub["currency"]),
            "product": price_data.get("product"),
            "recurring": {
                "interval": recurring.get("interval", item["price"]["recurring"]["interval"]),
                "interval_count": int(recurring.get("interval_count", 1)),
            },
        }
        sub["metadata"].update(params.get("metadata") or {})
        events = []
        if amount > 0 and params.get("proration_behavior") == "always_invoice":
            line = self._invoice_line(amount, sub["currency"], "Remaining time", start, end, 1)
            invoice = self._open_invoice(sub, [line], "subscription_update")
            self._attempt(invoice, paid=True)
            events += [
                self._event("invoice.paid", invoice),
                self._event("invoice.payment_succeeded", invoice),
            ]
        return events + self._updated(sub, before)

    def add_payment_method(self, expiry: tuple[int, int]) -> dict:
        card = {
            "id": f"pm_{secrets.token_hex(10)}",
            "object": "payment_method",
            "type": "card",
            "card": {
                "brand": "visa",
                "last4": "4242",
                "exp_month": expiry[0],
                "exp_year": expiry[1],
            },
        }
        self.payment_methods[card["id"]] = card
        return card

    def portal_session(self, params: dict) -> dict:
        """``POST /v1/billing_portal/sessions``: a page where the customer replaces the card."""
        portal = {
            "id": f"bps_{secrets.token_hex(10)}",
            "object": "billing_portal.session",
            "customer": params.get("customer"),
            "return_url": params.get("return_url"),
            "flow_data": params.get("flow_data"),
            "url": f"{self.url}/p/session/{secrets.token_hex(8)}",
        }
        self.portal_sessions.append(portal)
        return portal

    def schedule_cancel(self, sub_id: str, cancel: bool = True) -> list[dict]:
        """Cancel at the end of the current period (or take that back). As on Stripe,
        canceled_at is the time of the request while the subscription runs on."""
        sub = self._live(sub_id)
        before = copy.deepcopy(sub)
        end = sub["items"]["data"][0]["current_period_end"]
        sub.update(
            cancel_at_period_end=cancel,
            cancel_at=end if cancel else None,
            canceled_at=int(time.time()) if cancel else None,
            cancellation_details={
                "reason": "cancellation_requested" if cancel else None,
                "comment": None,
                "feedback": None,
            },
        )
        return self._updated(sub, before)

    def end(self, sub_id: str) -> list[dict]:
        """The subscription ends: a scheduled cancellation taking effect (ended at the
        period end it was scheduled for) or an immediate one (ended now). Returns the
        events, unsent."""
        sub = self._live(sub_id)
        now = int(time.time())
        if sub["cancel_at"] is not None:
            ended = sub["cancel_at"]
        else:
            ended = now
            sub["cancellation_details"]["reason"] = "cancellation_requested"
        sub.update(status="canceled", ended_at=ended, canceled_at=sub["canceled_at"] or now)
        return [self._event("customer.subscription.deleted", sub)]

    def pause(self, sub_id: str) -> list[dict]:
        """The subscription paused. Returns the events, unsent."""
        sub = self._live(sub_id)
        before = copy.deepcopy(sub)
        sub["status"] = "paused"
        return self._updated(sub, before) + [self._event("customer.subscription.paused", sub)]

    def resume_paused(self, sub_id: str) -> list[dict]:
        """A paused subscription active again. Returns the events, unsent."""
        sub = self._live(sub_id)
        before = copy.deepcopy(sub)
        sub["status"] = "active"
        return self._updated(sub, before) + [self._event("customer.subscription.resumed", sub)]

    def change_plan(
        self,
        sub_id: str,
        unit_amount: int,
        interval: str | None = None,
        interval_count: int | None = None,
    ) -> list[dict]:
        """The first item moved to a new price (and interval), from its next renewal on;
        no proration invoice. Returns the events, unsent."""
        sub = self._live(sub_id)
        before = copy.deepcopy(sub)
        item = sub["items"]["data"][0]
        old = item["price"]
        recurring = old["recurring"]
        item["price"] = self._price(
            unit_amount,
            old["currency"],
            interval or recurring["interval"],
            interval_count or (1 if interval else recurring["interval_count"]),
            self._product_names.get(old["id"], ""),
        )
        return self._updated(sub, before)

    def _base_url(self) -> str:
        if self._server is None:
            return "https://invoice.stripe.test"
        return self.url

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
                if path == "/v1/invoices":
                    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
                    return self._answer(200, fake.list_invoices(query))
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
                    ("/v1/subscriptions/", fake.subscriptions),
                    ("/v1/invoices/", fake.invoices),
                    ("/v1/payment_methods/", fake.payment_methods),
                    ("/v1/coupons/", fake.coupons),
                ):
                    if path.startswith(prefix) and path[len(prefix) :] in store:
                        return self._answer(200, store[path[len(prefix) :]])
                self._answer(
                    404,
                    {"error": {"type": "invalid_request_error", "message": "No such object"}},
                )

            def do_DELETE(self):
                if not self._check():
                    return
                parts = urllib.parse.urlsplit(self.path)
                if not parts.path.startswith("/v1/subscriptions/"):
                    return self._answer(404, {"error": {"type": "invalid_request_error"}})
                query = dict(urllib.parse.parse_qsl(parts.query))
                return self._answer(*fake.cancel_now(parts.path.rsplit("/", 1)[1], query))

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
                path = urllib.parse.urlsplit(self.path).path
                if path.startswith("/v1/subscriptions/"):
                    params = _unflatten(dict(urllib.parse.parse_qsl(raw)))
                    status, body = fake.update_subscription(path.rsplit("/", 1)[1], params)
                    return self._answer(status, body)
                if path == "/v1/products":
                    params = _unflatten(dict(urllib.parse.parse_qsl(raw)))
                    return self._answer(200, fake.create_product(params))
                if path == "/v1/invoices/create_preview":
                    params = _unflatten(dict(urllib.parse.parse_qsl(raw)))
                    return self._answer(*fake.preview_invoice(params))
                if path == "/v1/billing_portal/sessions":
                    params = _unflatten(dict(urllib.parse.parse_qsl(raw)))
                    return self._answer(200, fake.portal_session(params))
                if path == "/v1/coupons":
                    params = _unflatten(dict(urllib.parse.parse_qsl(raw)))
                    return self._answer(
                        *fake.create_coupon(params, self.headers.get("Idempotency-Key"))
                    )
                if path != "/v1/checkout/sessions":
                    return self._answer(404, {"error": {"type": "invalid_request_error"}})
                params = _unflatten(dict(urllib.parse.parse_qsl(raw)))
                fake.created.append(params)
                if fake.on_create is not None:
                    fake.on_create(params)
                mode = params.get("mode") or "payment"
                refused = line_items_problem(params.get("line_items"), mode)
                refused = refused or recurring_problem(params)
                refused = refused or fake.discounts_problem(params)
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
                    params.get("client_reference_id"),
                    sum(int(i["price_data"]["unit_amount"]) * int(i["quantity"]) for i in items),
                    items[0]["price_data"]["currency"],
                    payment_status="unpaid",
                )
                session["line_items"] = items
                if params.get("discounts"):
                    coupon = fake.coupons[params["discounts"][0]["coupon"]]
                    off = fake.discount_of(coupon, session["amount_total"])
                    session["discounts"] = [{"coupon": coupon["id"]}]
                    session["amount_subtotal"] = session["amount_total"]
                    session["amount_total"] -= off
                    session["total_details"] = {"amount_discount": off, "amount_tax": 0}
                session["metadata"] = params.get("metadata", {})
                session["url"] = f"https://checkout.stripe.test/c/pay/{session['id']}"
                if fake.hosted:
                    session["url"] = f"{fake.url}/c/pay/{session['id']}"
                    session["success_url"] = params.get("success_url")
                    session["cancel_url"] = params.get("cancel_url")
                session["payment_intent"] = None
                session["mode"] = mode
                if mode == "subscription":
                    recurring = next(
                        i["price_data"]["recurring"]
                        for i in items
                        if "recurring" in i["price_data"]
                    )
                    subscription_data = params.get("subscription_data") or {}
                    trial = subscription_data.get("trial_period_days")
                    days = _whole(trial, 1) if trial is not None else 0
                    if days is None or days > 730:
                        return self._answer(
                            400,
                            {
                                "error": {
                                    "type": "invalid_request_error",
                                    "param": "subscription_data[trial_period_days]",
                                    "message": "trial_period_days must be 1 to 730",
                                }
                            },
                        )
                    fake._subscription_terms[session["id"]] = {
                        "interval": recurring["interval"],
                        "interval_count": int(recurring.get("interval_count", "1")),
                        "metadata": subscription_data.get("metadata") or {},
                        "trial_period_days": days,
                    }
                    if days:
                        # Nothing is due today: the session's total is the trial's 0.
                        session.update(amount_subtotal=0, amount_total=0)
                    session["customer"] = None
                fake.add_session(session)
                self._answer(200, session)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # stop() waits for the loop's next poll: a short one saves each test half a second.
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
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
