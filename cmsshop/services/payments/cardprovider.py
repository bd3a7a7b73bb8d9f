"""The card provider: Stripe's webhook scheme, event format and API.

Everything Stripe-specific lives here, behind the provider-neutral contract of
``cmsshop.services.payments.base``; the shared machinery does the rest.

Verification (before any write), as Stripe documents it:

* header ``Stripe-Signature: t=<unix time>,v1=<hex>[,v1=<hex>...][,v0=...]``;
* the signed payload is ``<t>.`` followed by the raw body bytes, HMAC-SHA256 keyed with
  the whole ``whsec_...`` string; every ``v1`` is compared with every configured secret
  (current and previous, during a rotation) in constant time; ``v0`` (Stripe's test-mode
  legacy scheme) and unknown schemes are ignored;
* ``t`` further than ``signatureTolerance`` seconds (default 300) from now is rejected,
  in the past (replay) or in the future (a clock that cannot be trusted).

We verify the raw bytes ourselves rather than through ``stripe.WebhookSignature``: that
helper decodes the body as UTF-8 first (a non-UTF-8 body raises instead of failing
verification) and accepts timestamps from the future. The tests produce signatures
with the stripe library's own ``WebhookSignature.generate_signature_header`` and check
the result against ``stripe.Webhook.construct_event``.

Config keys read: ``webhookSecrets`` (list), ``apiKey``, ``apiBase`` (default
https://api.stripe.com), ``timeout`` (seconds), ``signatureTolerance``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import hmac
import json
import re
import secrets
import threading
import time
from collections.abc import Mapping
from typing import Any

import stripe

from cmsshop.services.payments import base as pb
from cmsshop.services.payments.lines import display_name
from cmsshop.services.payments.refund_api import ProviderRefund, RefundCall, RefundRefused

NAME = "cardprovider"
SIGNATURE_HEADER = "Stripe-Signature"
DEFAULT_API_BASE = "https://api.stripe.com"
DEFAULT_TIMEOUT = 10.0
MAX_HEADER_LENGTH = 4096
MAX_SIGNATURES = 16
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_OBJECT_ID = re.compile(r"^[A-Za-z0-9_]{1,255}$")
# The API version our event builder imitates (simulate-payment, tests, bench).
SIMULATED_API_VERSION = "2024-06-20"


# --- signatures --------------------------------------------------------------------------


def compute_signature(secret: str, timestamp: int, raw_body: bytes) -> str:
    """HMAC-SHA256 of ``<t>.<raw body>`` keyed with the whole ``whsec_...`` string."""
    signed = str(timestamp).encode() + b"." + raw_body
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def signature_header(secret: str, raw_body: bytes, timestamp: int | None = None) -> str:
    """A ``Stripe-Signature`` header value, as Stripe would send it."""
    timestamp = int(time.time()) if timestamp is None else timestamp
    return f"t={timestamp},v1={compute_signature(secret, timestamp, raw_body)}"


def parse_signature_header(header: str) -> tuple[int, list[str]]:
    """``(timestamp, [v1 signatures])``; raise SignatureInvalid when unusable."""
    if len(header) > MAX_HEADER_LENGTH:
        raise pb.SignatureInvalid("Stripe-Signature header is too long")
    timestamps, signatures = [], []
    for item in header.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep:
            continue
        if key == "t":
            timestamps.append(value)
        elif key == "v1":
            signatures.append(value.strip().lower())
        # v0 and unknown schemes are ignored on purpose.
    if len(timestamps) != 1 or not re.fullmatch(r"[0-9]{1,12}", timestamps[0]):
        raise pb.SignatureInvalid("Stripe-Signature header has no single valid timestamp")
    signatures = [s for s in signatures if _HEX64.match(s)][:MAX_SIGNATURES]
    if not signatures:
        raise pb.SignatureInvalid("Stripe-Signature header has no v1 signature")
    return int(timestamps[0]), signatures


def _secrets(config: Mapping[str, Any]) -> list[str]:
    value = config.get("webhookSecrets") or []
    if isinstance(value, str):
        value = value.split()
    return [str(s).strip() for s in value if str(s).strip()]


# --- the provider ------------------------------------------------------------------------


class CardProvider:
    """Stripe as the card provider; one instance per process holds its API clients."""

    name = NAME
    settings_fields = {"webhookSecrets": True, "apiKey": True, "apiBase": False}
    signature_headers = ("stripe-signature",)

    def __init__(self):
        self._clients: dict[tuple, stripe.StripeClient] = {}
        self._lock = threading.Lock()

    # -- verify ----------------------------------------------------------------------------

    def verify(
        self, headers: Mapping[str, str], raw_body: bytes, config: Mapping[str, Any]
    ) -> pb.VerifiedEvent:
        keys = _secrets(config)
        if not keys:
            raise pb.NotConfigured("cardprovider webhookSecrets is not configured")
        header = headers.get(SIGNATURE_HEADER)
        if not header:
            raise pb.SignatureInvalid("Stripe-Signature header is missing")
        timestamp, signatures = parse_signature_header(str(header))
        matched = False
        # Every candidate is compared (no early exit), each in constant time.
        for key in keys:
            expected = compute_signature(key, timestamp, raw_body)
            for candidate in signatures:
                matched |= hmac.compare_digest(expected, candidate)
        if not matched:
            raise pb.SignatureInvalid("no v1 signature matches a configured secret")
        tolerance = int(config.get("signatureTolerance") or 0)
        if tolerance and abs(time.time() - timestamp) > tolerance:
            raise pb.SignatureInvalid(f"timestamp is outside the tolerance of {tolerance} s")
        try:
            payload = json.loads(raw_body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise pb.SignatureInvalid("signed body is not UTF-8 JSON") from exc
        if not isinstance(payload, dict):
            raise pb.SignatureInvalid("signed body is not a JSON object")
        event_id, event_type = payload.get("id"), payload.get("type")
        if not isinstance(event_id, str) or not 1 <= len(event_id) <= 255:
            raise pb.SignatureInvalid("event has no id")
        if not isinstance(event_type, str) or not 1 <= len(event_type) <= 100:
            raise pb.SignatureInvalid("event has no type")
        return pb.VerifiedEvent(
            provider=NAME, event_id=event_id, event_type=event_type, payload=payload, raw=raw_body
        )

    # -- interpret -------------------------------------------------------------------------

    def interpret(self, event: pb.VerifiedEvent) -> pb.EventAction:
        data = event.payload.get("data")
        obj = data.get("object") if isinstance(data, dict) else None
        if not isinstance(obj, dict):
            return pb.EventAction(pb.IGNORE, reason="event has no data.object")
        kind = event.event_type
        if kind in ("checkout.session.completed", "checkout.session.async_payment_succeeded"):
            # A subscription that starts with a free trial completes with nothing to pay;
            # its first invoice (of 0) is refetched and must be paid like any other.
            settled = (
                ("paid", "no_payment_required") if obj.get("mode") == "subscription" else ("paid",)
            )
            if kind == "checkout.session.completed" and obj.get("payment_status") not in settled:
                return pb.EventAction(
                    pb.IGNORE,
                    order_number=_session_order_number(obj),
                    reason=f"payment_status is {str(obj.get('payment_status'))[:40]}",
                )
            if obj.get("mode") == "subscription":
                # Paid by the subscription's first invoice: the same step as that
                # invoice's own invoice.paid, so whichever comes first does it, once.
                return dataclasses.replace(
                    _session_action(pb.PERIOD_PAID, obj),
                    subscription_ref=_object_id(obj.get("subscription")),
                    invoice_ref=_object_id(obj.get("invoice")),
                    event_created=_event_time(event.payload),
                )
            return _session_action(pb.FULFIL, obj)
        if kind in SUBSCRIPTION_EVENTS:
            return _subscription_action(kind, obj, _event_time(event.payload))
        if kind == "checkout.session.async_payment_failed":
            return _session_action(pb.FAIL, obj)
        if kind == "checkout.session.expired":
            return _session_action(pb.CANCEL, obj)
        if kind == "payment_intent.succeeded":
            number = _text(_mapping(obj.get("metadata")).get("orderNumber"))
            if not number:
                return pb.EventAction(pb.IGNORE, reason="payment intent carries no orderNumber")
            amount = obj.get("amount_received", obj.get("amount"))
            return pb.EventAction(
                pb.FULFIL,
                order_number=number,
                payment_reference=_text(obj.get("id")),
                provider_object_id=_text(obj.get("id")),
                amount=amount if _is_int(amount) else None,
                currency=_currency(obj.get("currency")),
            )
        if kind == "charge.refunded":
            amount, refunded = obj.get("amount"), obj.get("amount_refunded")
            full = obj.get("refunded") is True or (
                _is_int(amount) and _is_int(refunded) and refunded >= amount
            )
            if not full and not (_is_int(refunded) and refunded > 0):
                return pb.EventAction(
                    pb.IGNORE,
                    payment_reference=_object_id(obj.get("payment_intent")),
                    reason=f"partial refund: {refunded} of {amount}",
                )
            # The refunded amount goes along, so the shared refund step checks it against
            # the order total: only a full refund revokes, a partial one is held for an
            # admin's review.
            action = dataclasses.replace(_charge_action(pb.REFUND, obj), **_latest_refund(obj))
            if _is_int(refunded) and refunded > 0:
                return dataclasses.replace(
                    action, amount=refunded, currency=_currency(obj.get("currency"))
                )
            return action
        if kind == "charge.dispute.created":
            return _charge_action(pb.DISPUTE_OPENED, obj)
        if kind == "charge.dispute.closed":
            status = obj.get("status")
            if status in ("won", "warning_closed"):
                return _charge_action(pb.DISPUTE_WON, obj)
            if status == "lost":
                return _charge_action(pb.DISPUTE_LOST, obj)
            return pb.EventAction(pb.IGNORE, reason=f"dispute closed as {str(status)[:40]}")
        return pb.EventAction(pb.IGNORE, reason=f"{kind[:100]} is not acted on")

    # -- the API ---------------------------------------------------------------------------

    sells_subscriptions = True
    # A coupon on a subscription: the first period discounted, every later one in full.
    discounts_first_period = True
    # The smallest charge the provider takes, in major units (Stripe's published
    # "minimum and maximum charge amounts", docs.stripe.com/currencies): its API refuses
    # a checkout below it (amount_too_small), so the checkout refuses it first.
    minimum_charges = {
        "USD": "0.50", "AED": "2.00", "AUD": "0.50", "BGN": "1.00", "BRL": "0.50",
        "CAD": "0.50", "CHF": "0.50", "CZK": "15.00", "DKK": "2.50", "EUR": "0.50",
        "GBP": "0.30", "HKD": "4.00", "HUF": "175.00", "INR": "0.50", "JPY": "50",
        "MXN": "10.00", "MYR": "2.00", "NOK": "3.00", "NZD": "0.50", "PLN": "2.00",
        "RON": "2.00", "SEK": "3.00", "SGD": "0.50", "THB": "10.00",
    }  # fmt: skip

    def _client(self, config: Mapping[str, Any]) -> stripe.StripeClient:
        api_key = _text(config.get("apiKey"))
        if not api_key:
            raise pb.NotConfigured("cardprovider apiKey is not configured")
        base = (_text(config.get("apiBase")) or DEFAULT_API_BASE).rstrip("/")
        timeout = float(config.get("timeout") or DEFAULT_TIMEOUT)
        key = (api_key, base, timeout)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                if len(self._clients) > 16:
                    self._clients.clear()  # keys were rotated many times; start afresh
                client = stripe.StripeClient(
                    api_key,
                    base_addresses={"api": base},
                    max_network_retries=1,
                    http_client=stripe.RequestsClient(timeout=timeout),
                )
                self._clients[key] = client
        return client

    def confirm(self, action: pb.EventAction, config: Mapping[str, Any]) -> pb.Confirmation:
        object_id = action.provider_object_id or action.payment_reference or ""
        if not _OBJECT_ID.match(object_id):
            raise pb.ProviderUnavailable("the event names no checkout session or payment intent")
        client = self._client(config)
        try:
            if object_id.startswith("pi_"):
                intent = client.v1.payment_intents.retrieve(object_id).to_dict()
                return pb.Confirmation(
                    final=intent.get("status") == "succeeded",
                    amount=_int(intent.get("amount_received")),
                    currency=_currency(intent.get("currency")) or "",
                    order_number=_text(_mapping(intent.get("metadata")).get("orderNumber")),
                    payment_reference=_text(intent.get("id")) or object_id,
                )
            session = client.v1.checkout.sessions.retrieve(object_id).to_dict()
        except stripe.StripeError as exc:
            raise pb.ProviderUnavailable(_describe(exc)) from None
        return pb.Confirmation(
            final=session.get("payment_status") == "paid" and session.get("status") == "complete",
            amount=_int(session.get("amount_total")),
            currency=_currency(session.get("currency")) or "",
            order_number=_session_order_number(session),
            payment_reference=_object_id(session.get("payment_intent"))
            or action.payment_reference
            or object_id,
            country=_text(
                _mapping(_mapping(session.get("customer_details")).get("address")).get("country")
            ),
        )

    def create_checkout(
        self, checkout: pb.CheckoutRequest, config: Mapping[str, Any]
    ) -> pb.CheckoutSession:
        client = self._client(config)
        currency = checkout.currency.lower()
        params: dict[str, Any] = {
            "mode": "payment",
            "client_reference_id": checkout.order_number,
            "metadata": {"orderNumber": checkout.order_number},
            # Copied onto the PaymentIntent so payment_intent.* events name the order too.
            "payment_intent_data": {"metadata": {"orderNumber": checkout.order_number}},
            "line_items": [
                {
                    "price_data": {
                        "currency": currency,
                        "unit_amount": item["amount"],
                        "product_data": {"name": _line_name(item)},
                    },
                    "quantity": 1,
                }
                for item in checkout.items
            ]
            + _tax_line(checkout, currency),
            "success_url": checkout.success_url,
            "cancel_url": checkout.cancel_url,
        }
        if checkout.recurring is not None:
            # Stripe Billing: the lines become the subscription's, charged every cycle;
            # the subscription carries our order number to its invoices' events.
            recurring = {
                "interval": checkout.recurring.interval,
                "interval_count": checkout.recurring.count,
            }
            for line in params["line_items"]:
                line["price_data"]["recurring"] = recurring
            del params["payment_intent_data"]
            params["mode"] = "subscription"
            params["subscription_data"] = {"metadata": {"orderNumber": checkout.order_number}}
            if checkout.recurring.first_period_discount > 0:
                self._discount_first_period(client, checkout, params)
            if checkout.recurring.trial_days:
                # Stripe charges nothing now: the first invoice is 0, for the trial.
                params["subscription_data"]["trial_period_days"] = checkout.recurring.trial_days
        if checkout.customer_email:
            params["customer_email"] = checkout.customer_email
        try:
            session = client.v1.checkout.sessions.create(
                params=params,  # type: ignore[arg-type]
                # A retried request for the same order gets the same session back.
                options={"idempotency_key": f"cmsshop-checkout-{checkout.order_number}"},
            ).to_dict()
        except stripe.StripeError as exc:
            raise pb.ProviderUnavailable(_describe(exc)) from None
        url, session_id = session.get("url"), session.get("id")
        if not isinstance(url, str) or not isinstance(session_id, str):
            raise pb.ProviderUnavailable("the checkout session has no url or id")
        return pb.CheckoutSession(redirect_url=url, provider_checkout_id=session_id)

    def _discount_first_period(
        self, client: stripe.StripeClient, checkout: pb.CheckoutRequest, params: dict
    ) -> None:
        """A coupon takes its discount off the first period only, as Stripe does it: the
        session's lines at their full price with the tax on top of that price (what each
        later period charges), and a Stripe coupon of the order's discount, tax
        included, applied once (``duration=once``, redeemable once, made once per order
        under its idempotency key). The first invoice is then the order's total."""
        recurring = checkout.recurring
        currency = checkout.currency.lower()
        lines = params["line_items"][: len(checkout.items)]
        for line, item in zip(lines, checkout.items, strict=True):
            line["price_data"]["unit_amount"] = item["unit_amount"] * item["quantity"]
        tax = _tax_line(checkout, currency, recurring.full_tax)
        for line in tax:
            line["price_data"]["recurring"] = lines[0]["price_data"]["recurring"]
        params["line_items"] = lines + tax
        full = sum(line["price_data"]["unit_amount"] for line in params["line_items"])
        if full - recurring.first_period_discount != checkout.total:
            raise pb.ProviderUnavailable(
                f"the first period's discount does not add up: {full} less "
                f"{recurring.first_period_discount} is not the order's {checkout.total}"
            )
        try:
            coupon = client.v1.coupons.create(
                params={
                    "amount_off": recurring.first_period_discount,
                    "currency": currency,
                    "duration": "once",
                    "max_redemptions": 1,
                    "name": f"Discount of {checkout.order_number}"[:40],
                    "metadata": {"orderNumber": checkout.order_number},
                },
                # A retried checkout of the same order gets the same coupon back.
                options={"idempotency_key": f"cmsshop-coupon-{checkout.order_number}"},
            ).to_dict()
        except stripe.StripeError as exc:
            raise pb.ProviderUnavailable(_describe(exc)) from None
        coupon_id = _object_id(coupon.get("id"))
        if coupon_id is None:
            raise pb.ProviderUnavailable("Stripe's coupon has no id")
        params["discounts"] = [{"coupon": coupon_id}]

    def refund(self, call: RefundCall, config: Mapping[str, Any]) -> ProviderRefund:
        """Refund ``call.amount`` of the PaymentIntent ``call.payment_reference``
        (``POST /v1/refunds``) under ``call.idempotency_key``: the same key twice is one
        refund at Stripe. A 4xx answer (over what is left, already refunded, unknown
        payment, wrong key) is RefundRefused; no answer, 429 or 5xx ProviderUnavailable."""
        if not _OBJECT_ID.match(call.payment_reference or ""):
            raise RefundRefused("the order has no Stripe PaymentIntent to refund")
        client = self._client(config)
        params: dict[str, Any] = {
            "payment_intent": call.payment_reference,
            "amount": call.amount,
            "reason": "requested_by_customer",
            "metadata": {"orderNumber": call.order_number, "note": call.reason[:500]},
        }
        try:
            refund = client.v1.refunds.create(
                params=params,  # type: ignore[arg-type]
                options={"idempotency_key": call.idempotency_key},
            ).to_dict()
        except stripe.StripeError as exc:
            status = getattr(exc, "http_status", None)
            if isinstance(status, int) and 400 <= status < 500 and status != 429:
                raise RefundRefused(_describe(exc)) from None
            raise pb.ProviderUnavailable(_describe(exc)) from None
        refund_id, status = _text(refund.get("id")), refund.get("status")
        if not refund_id:
            raise pb.ProviderUnavailable("Stripe's refund has no id")
        if status in ("failed", "canceled"):
            raise RefundRefused(f"Stripe refund {refund_id} is {status}")
        return ProviderRefund(refund_id, "succeeded" if status == "succeeded" else "pending")

    def fetch_invoice(self, invoice_ref: str, config: Mapping[str, Any]) -> pb.ProviderInvoice:
        """A subscription's invoice as Stripe holds it (``GET /v1/invoices/{id}``)."""
        return invoice_of(self._retrieve("invoices", invoice_ref, config))

    def fetch_subscription(
        self, subscription_ref: str, config: Mapping[str, Any]
    ) -> pb.ProviderSubscription:
        """A subscription as Stripe holds it (``GET /v1/subscriptions/{id}``)."""
        return subscription_of(self._retrieve("subscriptions", subscription_ref, config))

    def _retrieve(self, kind: str, object_id: str, config: Mapping[str, Any]) -> dict:
        if not _OBJECT_ID.match(object_id or ""):
            raise pb.ProviderUnavailable(f"the event names no {kind[:-1]}")
        try:
            return getattr(self._client(config).v1, kind).retrieve(object_id).to_dict()
        except stripe.StripeError as exc:
            raise pb.ProviderUnavailable(_describe(exc)) from None

    def list_paid_invoices(
        self, subscription_ref: str, config: Mapping[str, Any]
    ) -> list[pb.ProviderInvoice]:
        """Every paid invoice of the subscription (``GET /v1/invoices``, page by page):
        what the reconciliation compares with the periods recorded here."""
        if not _OBJECT_ID.match(subscription_ref or ""):
            raise pb.ProviderUnavailable("no such subscription")
        params = {"subscription": subscription_ref, "status": "paid", "limit": 100}
        try:
            found = self._client(config).v1.invoices.list(params=params)  # type: ignore[arg-type]
            return [invoice_of(item.to_dict()) for item in found.auto_paging_iter()]
        except stripe.StripeError as exc:
            raise pb.ProviderUnavailable(_describe(exc)) from None

    def card_expiry(
        self, subscription_ref: str, config: Mapping[str, Any]
    ) -> tuple[int, int] | None:
        """(month, year) the card the subscription is charged to expires, when it is a
        card (``default_payment_method``); None otherwise."""
        found = self._retrieve("subscriptions", subscription_ref, config)
        method_id = _object_id(found.get("default_payment_method"))
        if method_id is None:
            return None
        card = _mapping(self._retrieve("payment_methods", method_id, config).get("card"))
        month, year = card.get("exp_month"), card.get("exp_year")
        return (month, year) if _is_int(month) and _is_int(year) else None

    def preview_plan_change(
        self, subscription_ref: str, price: pb.PlanPrice, config: Mapping[str, Any]
    ) -> pb.PlanPreview:
        """What changing to ``price`` now would charge (``POST /v1/invoices/create_preview``
        with the new price and ``always_invoice``: the difference for the rest of the
        period, prorated by Stripe)."""
        found = self._retrieve("subscriptions", subscription_ref, config)
        item = _first_item(found)
        params = {
            "subscription": subscription_ref,
            "subscription_details": {
                "items": [{"id": item["id"], "price_data": _price_data(price, item)}],
                "proration_behavior": "always_invoice",
            },
        }
        try:
            preview = (
                self._client(config)
                .v1.invoices.create_preview(params=params)  # type: ignore[arg-type]
                .to_dict()
            )
        except stripe.StripeError as exc:
            raise pb.ProviderUnavailable(_describe(exc)) from None
        return pb.PlanPreview(
            charged_now=max(_int(preview.get("amount_due")), 0),
            currency=_currency(preview.get("currency")) or price.currency,
            next_amount=price.amount,
            next_at=subscription_of(found).current_period_end,
        )

    def change_plan(
        self, subscription_ref: str, price: pb.PlanPrice, config: Mapping[str, Any]
    ) -> pb.ProviderSubscription:
        """Move the subscription to ``price`` from now: Stripe invoices the difference for
        the rest of the period at once (``always_invoice``) and, with
        ``pending_if_incomplete``, changes nothing unless that payment succeeds; its
        ``invoice.paid`` then upgrades the license here. Our product goes along in the
        subscription's metadata. Idempotent per subscription, current price and target."""
        found = self._retrieve("subscriptions", subscription_ref, config)
        item = _first_item(found)
        client = self._client(config)
        key = f"cmsshop-plan-{subscription_ref}-{_object_id(item.get('price'))}-{price.slug}"
        try:
            product = client.v1.products.create(
                params={"name": price.name, "metadata": {"productSlug": price.slug}},
                options={"idempotency_key": f"{key}-product"},
            ).to_dict()
            params = {
                "items": [
                    {
                        "id": item["id"],
                        "price_data": {**_price_data(price, item), "product": product["id"]},
                    }
                ],
                "proration_behavior": "always_invoice",
                "payment_behavior": "pending_if_incomplete",
                "metadata": {"productSlug": price.slug},
            }
            updated = client.v1.subscriptions.update(
                subscription_ref,
                params=params,  # type: ignore[arg-type]
                options={"idempotency_key": key},
            ).to_dict()
        except stripe.StripeError as exc:
            raise pb.ProviderUnavailable(_describe(exc)) from None
        return subscription_of(updated)

    def set_cancel_at_period_end(
        self, subscription_ref: str, cancel: bool, config: Mapping[str, Any]
    ) -> pb.ProviderSubscription:
        """Schedule the subscription's end at its period end, or take that back
        (``POST /v1/subscriptions/{id}``; setting a flag twice is harmless)."""
        if not _OBJECT_ID.match(subscription_ref or ""):
            raise pb.ProviderUnavailable("no such subscription")
        try:
            found = (
                self._client(config)
                .v1.subscriptions.update(
                    subscription_ref,
                    params={"cancel_at_period_end": cancel},  # type: ignore[arg-type]
                )
                .to_dict()
            )
        except stripe.StripeError as exc:
            raise pb.ProviderUnavailable(_describe(exc)) from None
        return subscription_of(found)

    def cancel_subscription_now(
        self, subscription_ref: str, config: Mapping[str, Any]
    ) -> pb.ProviderSubscription:
        """End the subscription now (``DELETE /v1/subscriptions/{id}`` with ``invoice_now``
        and ``prorate`` false: no final invoice, no proration; Stripe charges nothing
        more), as a refund that takes its license back asks
        (services/subscriptions/refund_cancel.py). One Stripe already ended
        refuses the call: then its own account (canceled) is the answer, so asking twice
        is harmless."""
        if not _OBJECT_ID.match(subscription_ref or ""):
            raise pb.ProviderUnavailable("no such subscription")
        try:
            found = (
                self._client(config)
                .v1.subscriptions.cancel(
                    subscription_ref,
                    # No final invoice and no pending proration left to collect.
                    params={"invoice_now": False, "prorate": False},
                )
                .to_dict()
            )
        except stripe.StripeError as exc:
            status = getattr(exc, "http_status", None)
            if not (isinstance(status, int) and 400 <= status < 500 and status != 429):
                raise pb.ProviderUnavailable(_describe(exc)) from None
            found = self._retrieve("subscriptions", subscription_ref, config)
            if found.get("status") not in ("canceled", "incomplete_expired"):
                raise pb.ProviderUnavailable(_describe(exc)) from None
        return subscription_of(found)

    def payment_method_url(
        self, customer_ref: str, return_url: str, config: Mapping[str, Any]
    ) -> str:
        """Stripe's hosted page where the buyer replaces the card (a billing portal
        session for that one task; it lives a few minutes, so it is made on demand)."""
        if not _OBJECT_ID.match(customer_ref or ""):
            raise pb.ProviderUnavailable("no customer at the provider")
        params = {
            "customer": customer_ref,
            "return_url": return_url,
            "flow_data": {"type": "payment_method_update"},
        }
        try:
            portal = (
                self._client(config)
                .v1.billing_portal.sessions.create(params=params)  # type: ignore[arg-type]
                .to_dict()
            )
        except stripe.StripeError as exc:
            raise pb.ProviderUnavailable(_describe(exc)) from None
        url = portal.get("url")
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            raise pb.ProviderUnavailable("the billing portal session has no URL")
        return url


# --- subscriptions -----------------------------------------------------------------------

# The events that may change a subscription; each is refetched before it is acted on.
SUBSCRIPTION_EVENTS = (
    "invoice.paid",
    "invoice.payment_succeeded",
    "invoice.payment_failed",
    "customer.subscription.created",
    "customer.subscription.updated",
    "customer.subscription.deleted",
    "customer.subscription.paused",
    "customer.subscription.resumed",
)
PAID_INVOICE_EVENTS = ("invoice.paid", "invoice.payment_succeeded")

# Stripe's subscription statuses in ours (models.SUBSCRIPTION_STATUSES). "unpaid" is
# Stripe having given up its retries while keeping the subscription open: access ends,
# as it does when Stripe cancels (a later payment is still honoured: its period counts).
_STATUSES = {
    "trialing": "trialing",
    "active": "active",
    "past_due": "past_due",
    "incomplete": "past_due",
    "paused": "paused",
    "unpaid": "ended",
    "canceled": "ended",
    "incomplete_expired": "ended",
}


def _stamp(value: Any) -> dt.datetime | None:
    """A Stripe unix time as an aware UTC datetime."""
    return dt.datetime.fromtimestamp(value, dt.UTC) if _is_int(value) and value > 0 else None


def _event_time(payload: Mapping[str, Any]) -> dt.datetime | None:
    return _stamp(payload.get("created"))


def _invoice_subscription(invoice: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(subscription id, our order number) of an invoice: under ``parent`` since API
    version 2025-03-31, at the top level before."""
    details = _mapping(_mapping(invoice.get("parent")).get("subscription_details"))
    legacy = _mapping(invoice.get("subscription_details"))
    ref = _object_id(details.get("subscription")) or _object_id(invoice.get("subscription"))
    metadata = _mapping(details.get("metadata")) or _mapping(legacy.get("metadata"))
    return ref, _text(metadata.get("orderNumber"))


def _subscription_action(kind: str, obj: Mapping[str, Any], created) -> pb.EventAction:
    if kind.startswith("invoice."):
        ref, number = _invoice_subscription(obj)
        if ref is None:
            return pb.EventAction(pb.IGNORE, reason="the invoice is not a subscription's")
        action = pb.PERIOD_PAID if kind in PAID_INVOICE_EVENTS else pb.SUBSCRIPTION_SYNC
        return pb.EventAction(
            action,
            order_number=number,
            subscription_ref=ref,
            invoice_ref=_text(obj.get("id")),
            event_created=created,
        )
    return pb.EventAction(
        pb.SUBSCRIPTION_SYNC,
        order_number=_text(_mapping(obj.get("metadata")).get("orderNumber")),
        subscription_ref=_text(obj.get("id")),
        event_created=created,
    )


def _invoice_payment(invoice: Mapping[str, Any]) -> str | None:
    """The PaymentIntent that paid an invoice (``payments`` since 2025-03-31)."""
    for entry in _mapping(invoice.get("payments")).get("data") or []:
        payment = _mapping(_mapping(entry).get("payment"))
        if _mapping(entry).get("status") == "paid":
            return _object_id(payment.get("payment_intent")) or _object_id(payment.get("charge"))
    return _object_id(invoice.get("payment_intent"))


_REASONS = {"subscription_create": "create", "subscription_update": "update"}


def invoice_of(invoice: Mapping[str, Any]) -> pb.ProviderInvoice:
    """Our account of a Stripe invoice. The period it pays for is its subscription lines'
    (``lines[].period``): the invoice's own ``period_start``/``period_end`` are the
    billing run's, the previous period for a renewal."""
    ref, number = _invoice_subscription(invoice)
    periods = [
        _mapping(_mapping(line).get("period"))
        for line in _mapping(invoice.get("lines")).get("data") or []
    ]
    starts = [s for s in (_stamp(p.get("start")) for p in periods) if s is not None]
    ends = [e for e in (_stamp(p.get("end")) for p in periods) if e is not None]
    if not ref or not ends or not starts:
        raise pb.ProviderUnavailable("Stripe's invoice names no subscription or period")
    return pb.ProviderInvoice(
        invoice_id=_text(invoice.get("id")) or "",
        subscription_ref=ref,
        paid=invoice.get("status") == "paid",
        amount=_int(invoice.get("amount_paid")),
        currency=_currency(invoice.get("currency")) or "",
        period_start=min(starts),
        period_end=max(ends),
        payment_reference=_invoice_payment(invoice),
        first=invoice.get("billing_reason") == "subscription_create",
        order_number=number,
        reason=_REASONS.get(str(invoice.get("billing_reason")), "cycle"),
    )


def subscription_of(found: Mapping[str, Any]) -> pb.ProviderSubscription:
    """Our account of a Stripe subscription (its period is on its items since
    2025-03-31, on the subscription before)."""
    items = _mapping(found.get("items")).get("data") or []
    ends = [_stamp(_mapping(item).get("current_period_end")) for item in items]
    period_end = max((e for e in ends if e is not None), default=None) or _stamp(
        found.get("current_period_end")
    )
    status = _STATUSES.get(str(found.get("status")), "past_due")
    cancelling = found.get("cancel_at_period_end") is True or _is_int(found.get("cancel_at"))
    if status == "active" and cancelling:
        status = "cancel_scheduled"
    return pb.ProviderSubscription(
        subscription_ref=_text(found.get("id")) or "",
        status=status,
        current_period_end=period_end,
        cancel_at_period_end=cancelling,
        ended_at=_stamp(found.get("ended_at")),
        order_number=_text(_mapping(found.get("metadata")).get("orderNumber")),
        customer_ref=_object_id(found.get("customer")),
        product_ref=_text(_mapping(found.get("metadata")).get("productSlug")),
    )


def _first_item(found: Mapping[str, Any]) -> dict[str, Any]:
    items = _mapping(found.get("items")).get("data") or []
    if not items or not isinstance(items[0], dict) or not _text(items[0].get("id")):
        raise pb.ProviderUnavailable("Stripe's subscription has no item")
    return items[0]


def _price_data(price: pb.PlanPrice, item: Mapping[str, Any]) -> dict[str, Any]:
    """A new price for the subscription's one item (one unit at the cycle's amount, as
    checkout made it); the preview may name the item's own product."""
    return {
        "currency": price.currency.lower(),
        "unit_amount": price.amount,
        "product": _object_id(_mapping(item.get("price")).get("product")),
        "recurring": {
            "interval": price.recurring.interval,
            "interval_count": price.recurring.count,
        },
    }


def _tax_line(
    checkout: pb.CheckoutRequest, currency: str, tax: int | None = None
) -> list[dict[str, Any]]:
    """The tax added on top of prices entered without tax (``checkout.tax`` unless
    ``tax`` is given), as a line of its own ("VAT 19 %"), so the session's total is the
    order's gross; none when prices include it."""
    tax = checkout.tax if tax is None else tax
    if tax <= 0:
        return []
    return [
        {
            "price_data": {
                "currency": currency,
                "unit_amount": tax,
                "product_data": {"name": checkout.tax_label},
            },
            "quantity": 1,
        }
    ]


def _line_name(item: Mapping[str, Any]) -> str:
    """The session line of an order line is one unit at the line's amount, named
    ``Name × q``: Stripe charges unit_amount x quantity per line and has no per-line
    discount, so a line whose coupon share does not divide by its quantity (3 seats at
    49.00 less 10.00) cannot be sent as quantity 3 of a unit price. One unit at the
    line's amount makes the session's total the order's total, to the cent, always."""
    return display_name(
        str(item.get("name") or item.get("product") or "Item"), item.get("quantity") or 1
    )


# --- event helpers -----------------------------------------------------------------------


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    return value.strip()[:255] or None if isinstance(value, str) else None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int(value: Any) -> int:
    return value if _is_int(value) else -1


def _currency(value: Any) -> str | None:
    return value.upper()[:3] if isinstance(value, str) and value else None


def _object_id(value: Any) -> str | None:
    """An id, whether the field holds the id or the expanded object."""
    if isinstance(value, dict):
        value = value.get("id")
    return _text(value)


def _session_order_number(session: Mapping[str, Any]) -> str | None:
    return _text(session.get("client_reference_id")) or _text(
        _mapping(session.get("metadata")).get("orderNumber")
    )


def _session_action(action: str, session: Mapping[str, Any]) -> pb.EventAction:
    amount = session.get("amount_total")
    return pb.EventAction(
        action,
        order_number=_session_order_number(session),
        payment_reference=_object_id(session.get("payment_intent")),
        provider_object_id=_text(session.get("id")),
        amount=amount if _is_int(amount) else None,
        currency=_currency(session.get("currency")),
    )


def _charge_action(action: str, obj: Mapping[str, Any]) -> pb.EventAction:
    """Charges and disputes name the PaymentIntent (our payment reference)."""
    return pb.EventAction(
        action,
        payment_reference=_object_id(obj.get("payment_intent")),
        provider_object_id=_object_id(obj.get("charge")) or _text(obj.get("id")),
    )


def _latest_refund(charge: Mapping[str, Any]) -> dict[str, Any]:
    """The refund a charge.refunded event is about: the newest of the charge's
    ``refunds`` list (Stripe lists them newest first), when the event carries it (API
    versions since 2022-11-15 leave it out: the refund mail is then keyed by the event)."""
    refunds = _mapping(charge.get("refunds")).get("data")
    latest = refunds[0] if isinstance(refunds, list) and refunds else None
    if not isinstance(latest, Mapping) or not _text(latest.get("id")):
        return {}
    amount = latest.get("amount")
    return {
        "refund_id": _text(latest.get("id")),
        "refund_amount": amount if _is_int(amount) and amount > 0 else None,
    }


def _describe(exc: stripe.StripeError) -> str:
    """A loggable account of an API failure (no key, no request body)."""
    status = getattr(exc, "http_status", None)
    kind = type(exc).__name__
    message = (getattr(exc, "user_message", None) or str(exc) or "").splitlines()
    first = message[0][:200] if message else ""
    return f"{kind}{f' HTTP {status}' if status else ''}: {first}"


# --- realistic events (simulate-payment, tests, the benchmark) ---------------------------


def checkout_session_object(
    *,
    order_number: str,
    amount: int,
    currency: str,
    session_id: str | None = None,
    payment_intent: str | None = None,
    payment_status: str = "paid",
    customer_email: str | None = None,
) -> dict[str, Any]:
    """A Checkout Session as Stripe's API and events show it (the fields we use and then
    some, so the payload looks like the real thing)."""
    now = int(time.time())
    return {
        "id": session_id or f"cs_test_{secrets.token_hex(12)}",
        "object": "checkout.session",
        "amount_subtotal": amount,
        "amount_total": amount,
        "client_reference_id": order_number,
        "created": now - 60,
        "currency": currency.lower(),
        "customer_details": {"email": customer_email, "name": None},
        "customer_email": customer_email,
        "expires_at": now + 86400,
        "livemode": False,
        "metadata": {"orderNumber": order_number},
        "mode": "payment",
        "payment_intent": payment_intent or f"pi_test_{secrets.token_hex(12)}",
        "payment_method_types": ["card"],
        "payment_status": payment_status,
        "status": "complete" if payment_status == "paid" else "open",
        "success_url": "https://example.com/success",
        "url": None,
    }


def build_event(event_type: str, obj: dict[str, Any], event_id: str | None = None) -> dict:
    """A Stripe event envelope around ``obj``."""
    return {
        "id": event_id or f"evt_test_{secrets.token_hex(12)}",
        "object": "event",
        "api_version": SIMULATED_API_VERSION,
        "created": int(time.time()),
        "data": {"object": obj},
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": None, "idempotency_key": None},
        "type": event_type,
    }


def signed_delivery(
    event: dict[str, Any], secret: str, timestamp: int | None = None
) -> tuple[dict[str, str], bytes]:
    """(headers, body) of a delivery of ``event`` signed with ``secret``."""
    body = json.dumps(event, separators=(",", ":")).encode()
    return (
        {
            "Content-Type": "application/json; charset=utf-8",
            "User-Agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
            SIGNATURE_HEADER: signature_header(secret, body, timestamp),
        },
        body,
    )


def simulate_payment(order, config: Mapping[str, Any]) -> tuple[dict[str, str], bytes]:
    """simulate-payment: a signed ``checkout.session.completed`` paying ``order`` in full
    (``order`` is a cmsshop.services.payments.settings.SimulatedOrder)."""
    keys = _secrets(config)
    if not keys:
        raise pb.NotConfigured("cardprovider webhookSecrets is not configured")
    session = checkout_session_object(
        order_number=order.number,
        amount=order.total,
        currency=order.currency,
        session_id=order.provider_checkout_id,
        customer_email=order.customer_email,
    )
    return signed_delivery(build_event("checkout.session.completed", session), keys[0])
