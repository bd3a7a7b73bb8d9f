"""The wallet provider: PayPal's webhook scheme and REST API (Orders v2, Payments v2,
Subscriptions v1).

Everything PayPal-specific lives here, behind the provider-neutral contract of
``cmsshop.services.payments.base``; the shared machinery does the rest.

Verification (no PayPal SDK does it offline for Python, and PayPal's own
``verify-webhook-signature`` API would make every delivery depend on a second call):

* headers ``PAYPAL-TRANSMISSION-ID``, ``-TIME``, ``-SIG`` (base64), ``PAYPAL-CERT-URL`` and
  ``PAYPAL-AUTH-ALGO``, of which only ``SHA256withRSA`` is accepted;
* signed message ``transmission_id|transmission_time|webhook_id|crc32`` where crc32 is the
  unsigned decimal CRC-32 of the raw body bytes and webhook_id is OUR configured Webhook
  ID (so an event signed for another merchant's webhook does not verify here);
* RSASSA-PKCS1-v1_5 / SHA-256 with the public key of the certificate at the cert URL.

The cert URL is attacker-supplied, so it is checked before anything is fetched: https
only, no userinfo, a host on the allow-list (suffix match on a dot boundary), the port
the allow-list names (443 unless an entry says ``host:port``), and the request is made to
the URL rebuilt from the parsed parts, with redirects not followed and a size cap. The
certificate chain must be currently valid, chain to a trusted root (certifi's bundle,
or ``caBundle``) and be issued for PayPal's message-verification name -- without that
last check any certificate from any public CA on an allowed host would do.

Config keys read (camelCase, as in the admin settings body):

``webhookId``      our Webhook ID from the PayPal developer dashboard (verify)
``certHosts``      allow-list of cert URL hosts, list or whitespace/comma separated string;
                   default ``["paypal.com"]``; ``host:port`` allows a non-443 port
``certSubjects``   DNS names the signing certificate may be issued for; default
                   ``messageverificationcerts.paypal.com`` and its sandbox twin
``caBundle``       path of a PEM bundle of trusted roots, used both for the certificate
                   chain and for TLS to PayPal; default certifi's bundle / system trust
``clientId``, ``clientSecret``   REST app credentials (confirm, create_checkout)
``apiBase``        default ``https://api-m.paypal.com`` (sandbox:
                   ``https://api-m.sandbox.paypal.com``)
``timeout``        seconds for one HTTP read, default 10 (connect: at most 5)

Modules: ``config`` (constants, config readers), ``money``, ``certificates``
(allow-list, trust store, cache), ``actions`` (event interpretation), ``api`` (REST
errors and bodies), ``subscriptions`` (PayPal subscriptions in our terms), ``simulate``
(development).
"""

from __future__ import annotations

import base64
import binascii
import collections
import dataclasses
import datetime as dt
import hashlib
import json
import threading
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

import certifi
import requests
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.verification import DNSName, PolicyBuilder, VerificationError

from cmsshop.services.payments import base as pb
from cmsshop.services.payments.refund_api import ProviderRefund, RefundCall, RefundRefused
from cmsshop.services.payments.walletprovider import subscriptions as subs
from cmsshop.services.payments.walletprovider.actions import (
    DISPUTE_LOST_OUTCOMES,
    DISPUTE_WON_OUTCOMES,
    approved_action,
    capture_action,
    dispute_action,
    link_of,
    order_number_of,
    paypal_object_id,
    refund_action,
)
from cmsshop.services.payments.walletprovider.api import (
    PayPalApiError,
    api_error_name,
    api_issues,
    checkout_order_body,
    refund_body,
    sale_refund_body,
)
from cmsshop.services.payments.walletprovider.certificates import (
    CachedCert,
    FailureMemory,
    TrustStores,
    check_cert_url,
    origin_of,
    signed_message,
)
from cmsshop.services.payments.walletprovider.config import (
    ACCEPTED_ALGORITHM,
    CERT_CACHE_SIZE,
    CERT_FAILURE_MEMORY,
    CERT_FAILURE_SLOTS,
    DEFAULT_CERT_SUBJECTS,
    HEADER_AUTH_ALGO,
    HEADER_CERT_URL,
    HEADER_TRANSMISSION_ID,
    HEADER_TRANSMISSION_SIG,
    HEADER_TRANSMISSION_TIME,
    MAX_CERT_BYTES,
    MAX_CHAIN_LENGTH,
    MIN_RSA_BITS,
    NAME,
    REQUIRED_HEADERS,
    TOKEN_EARLY_REFRESH,
    api_base_of,
    cert_hosts_of,
    check_transmission_age,
    config_list,
    config_text,
    signature_tolerance,
    timeouts,
    tls_verify,
)
from cmsshop.services.payments.walletprovider.money import money_of

# --- the provider ----------------------------------------------------------------------


class WalletProvider:
    """PayPal as the wallet provider; one instance per process holds its caches."""

    name = NAME
    signature_headers = REQUIRED_HEADERS
    settings_fields = {
        "webhookId": False,
        "clientId": False,
        "clientSecret": True,
        "apiBase": False,
        "certHosts": False,
    }

    def __init__(self, cert_cache_size: int = CERT_CACHE_SIZE):
        self._cert_cache: collections.OrderedDict[tuple, CachedCert] = collections.OrderedDict()
        self._cert_cache_size = cert_cache_size
        self._cert_lock = threading.Lock()
        self._cert_failures = FailureMemory(CERT_FAILURE_MEMORY, CERT_FAILURE_SLOTS)
        self._cert_fetches: dict[str, threading.Event] = {}  # by origin, while in flight
        self._stores = TrustStores()
        self._tokens: dict[tuple, tuple[str, float]] = {}
        self._token_lock = threading.Lock()
        self._http = requests.Session()

    # -- verify --------------------------------------------------------------------------

    def verify(
        self, headers: Mapping[str, str], raw_body: bytes, config: Mapping[str, Any]
    ) -> pb.VerifiedEvent:
        webhook_id = config_text(config, "webhookId")
        if not webhook_id:
            raise pb.NotConfigured("walletprovider webhookId is not configured")
        lowered = {str(k).lower(): v for k, v in headers.items()}
        missing = [h.upper() for h in REQUIRED_HEADERS if not str(lowered.get(h) or "").strip()]
        if missing:
            raise pb.SignatureInvalid(f"missing header(s): {', '.join(missing)}")
        algorithm = str(lowered[HEADER_AUTH_ALGO]).strip()
        if algorithm != ACCEPTED_ALGORITHM:
            raise pb.SignatureInvalid(f"auth algorithm {algorithm[:40]!r} is not accepted")
        transmission_id = str(lowered[HEADER_TRANSMISSION_ID]).strip()
        transmission_time = str(lowered[HEADER_TRANSMISSION_TIME]).strip()
        if len(transmission_id) > 255 or len(transmission_time) > 64:
            raise pb.SignatureInvalid("transmission headers are too long")
        check_transmission_age(transmission_time, signature_tolerance(config))
        try:
            signature = base64.b64decode(
                str(lowered[HEADER_TRANSMISSION_SIG]).strip(), validate=True
            )
        except (binascii.Error, ValueError) as exc:
            raise pb.SignatureInvalid("transmission signature is not valid base64") from exc
        if not signature:
            raise pb.SignatureInvalid("transmission signature is empty")
        # The URL is checked before the (possibly cached) certificate is looked up, so a
        # host removed from the allow-list stops being trusted at once.
        url = check_cert_url(str(lowered[HEADER_CERT_URL]).strip(), cert_hosts_of(config))
        public_key = self._certificate_key(url, config)
        message = signed_message(transmission_id, transmission_time, webhook_id, raw_body)
        try:
            public_key.verify(signature, message, padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature as exc:
            raise pb.SignatureInvalid("signature does not match") from exc
        try:
            payload = json.loads(raw_body)
        except (UnicodeDecodeError, ValueError) as exc:
            raise pb.SignatureInvalid("signed body is not JSON") from exc
        if not isinstance(payload, dict):
            raise pb.SignatureInvalid("signed body is not a JSON object")
        event_id, event_type = payload.get("id"), payload.get("event_type")
        if not isinstance(event_id, str) or not event_id or len(event_id) > 255:
            raise pb.SignatureInvalid("event has no id")
        if not isinstance(event_type, str) or not event_type or len(event_type) > 100:
            raise pb.SignatureInvalid("event has no event_type")
        return pb.VerifiedEvent(
            provider=NAME, event_id=event_id, event_type=event_type, payload=payload, raw=raw_body
        )

    def _certificate_key(self, url: str, config: Mapping[str, Any]) -> rsa.RSAPublicKey:
        ca_bundle = config_text(config, "caBundle") or certifi.where()
        subjects = tuple(config_list(config, "certSubjects", DEFAULT_CERT_SUBJECTS))
        key = (url, ca_bundle, subjects)
        origin = origin_of(url)
        deadline = time.monotonic() + sum(timeouts(config))
        while True:
            now = dt.datetime.now(dt.UTC)
            with self._cert_lock:
                cached = self._cert_cache.get(key)
                if cached is not None:
                    if cached.valid_at(now):
                        self._cert_cache.move_to_end(key)
                        return cached.public_key
                    del self._cert_cache[key]
                failed = self._cert_failures.recent(origin, url)
                if failed is not None:
                    raise pb.ProviderUnavailable(failed)
                fetching = self._cert_fetches.get(origin)
                if fetching is None:
                    fetching = self._cert_fetches[origin] = threading.Event()
                    break
            # One fetch per host at a time: the others wait for its outcome (a cached
            # certificate or a remembered failure) instead of each opening a connection
            # to a host that may not answer.
            if not fetching.wait(max(0.0, deadline - time.monotonic())):
                raise pb.ProviderUnavailable("certificate host is slow to answer")
        try:
            cached = self._fetch_and_check(url, ca_bundle, subjects, config, now)
        finally:
            with self._cert_lock:
                del self._cert_fetches[origin]
            fetching.set()
        with self._cert_lock:
            self._cert_cache[key] = cached
            self._cert_cache.move_to_end(key)
            while len(self._cert_cache) > self._cert_cache_size:
                self._cert_cache.popitem(last=False)
        return cached.public_key

    def _fetch_and_check(
        self,
        url: str,
        ca_bundle: str,
        subjects: tuple[str, ...],
        config: Mapping[str, Any],
        now: dt.datetime,
    ) -> CachedCert:
        pem = self._fetch_certificate(url, config)
        try:
            chain = x509.load_pem_x509_certificates(pem)
        except ValueError as exc:
            raise pb.SignatureInvalid("certificate URL did not return PEM certificates") from exc
        if not chain or len(chain) > MAX_CHAIN_LENGTH:
            raise pb.SignatureInvalid("certificate URL returned too many or no certificates")
        leaf, intermediates = chain[0], chain[1:]
        if now < leaf.not_valid_before_utc:
            raise pb.SignatureInvalid("signing certificate is not valid yet")
        if now > leaf.not_valid_after_utc:
            raise pb.SignatureInvalid("signing certificate has expired")
        public_key = leaf.public_key()
        if not isinstance(public_key, rsa.RSAPublicKey) or public_key.key_size < MIN_RSA_BITS:
            raise pb.SignatureInvalid("signing certificate does not hold an RSA key of 2048+ bits")
        store = self._stores.get(ca_bundle)
        builder = PolicyBuilder().store(store).time(now).max_chain_depth(MAX_CHAIN_LENGTH)
        verified = None
        for subject in subjects:
            try:
                verifier = builder.build_server_verifier(DNSName(subject))
                verified = verifier.verify(leaf, intermediates)
                break
            except (VerificationError, ValueError):
                continue
        if verified is None:
            raise pb.SignatureInvalid(
                "signing certificate does not chain to a trusted root or is not issued for "
                + " / ".join(subjects)
            )
        return CachedCert(
            public_key,
            max(c.not_valid_before_utc for c in verified),
            min(c.not_valid_after_utc for c in verified),
        )

    def _fetch_certificate(self, url: str, config: Mapping[str, Any]) -> bytes:
        try:
            with self._http.get(
                url,
                timeout=timeouts(config),
                verify=tls_verify(config),
                allow_redirects=False,
                stream=True,
                headers={"Accept": "application/x-pem-file, text/plain, */*"},
            ) as response:
                status = response.status_code
                if status >= 500 or status == 429:
                    reason = f"certificate host answered HTTP {status}"
                    self._cert_failures.remember(url, reason)
                    raise pb.ProviderUnavailable(reason)
                if status != 200:
                    raise pb.SignatureInvalid(
                        f"certificate URL answered HTTP {status} (no redirects)"
                    )
                body = b""
                for chunk in response.iter_content(8192):
                    body += chunk
                    if len(body) > MAX_CERT_BYTES:
                        raise pb.SignatureInvalid("certificate URL answered with too much data")
                return body
        # Order matters: SSLError is a ConnectionError, and every RequestException is an
        # OSError. A certificate we cannot trust is a rejection; a host that does not
        # answer is a temporary failure (503, the provider delivers again).
        except requests.exceptions.SSLError as exc:
            raise pb.SignatureInvalid("TLS to the certificate host is not trusted") from exc
        except (requests.ConnectionError, requests.Timeout) as exc:
            reason = f"certificate could not be fetched: {type(exc).__name__}"
            self._cert_failures.remember(origin_of(url), reason)
            raise pb.ProviderUnavailable(reason) from exc
        except requests.RequestException as exc:
            raise pb.SignatureInvalid(
                f"certificate could not be fetched: {type(exc).__name__}"
            ) from exc
        except OSError as exc:
            raise pb.NotConfigured(
                f"caBundle {config_text(config, 'caBundle')!r} cannot be read"
            ) from exc

    def cached_certificate_count(self) -> int:
        return len(self._cert_cache)

    # -- interpret ---------------------------------------------------------------------

    def interpret(self, event: pb.VerifiedEvent) -> pb.EventAction:
        resource = event.payload.get("resource")
        if not isinstance(resource, Mapping):
            return pb.EventAction(pb.IGNORE, reason=f"{event.event_type} has no resource object")
        kind = event.event_type
        if kind == "PAYMENT.CAPTURE.COMPLETED":
            return capture_action(pb.FULFIL, resource, kind)
        if kind in ("PAYMENT.CAPTURE.DENIED", "PAYMENT.CAPTURE.DECLINED"):
            return capture_action(pb.FAIL, resource, kind)
        if kind in ("PAYMENT.CAPTURE.REFUNDED", "PAYMENT.CAPTURE.REVERSED"):
            return refund_action(resource, kind)
        if kind == "CUSTOMER.DISPUTE.CREATED":
            return dispute_action(pb.DISPUTE_OPENED, resource, kind)
        if kind == "CUSTOMER.DISPUTE.RESOLVED":
            outcome = resource.get("dispute_outcome")
            code = outcome.get("outcome_code") if isinstance(outcome, Mapping) else None
            if code in DISPUTE_LOST_OUTCOMES:
                return dispute_action(pb.DISPUTE_LOST, resource, f"{kind} {code}")
            if code in DISPUTE_WON_OUTCOMES:
                return dispute_action(pb.DISPUTE_WON, resource, f"{kind} {code}")
            return pb.EventAction(pb.IGNORE, reason=f"{kind} with outcome {code!r}")
        if kind == "CHECKOUT.ORDER.APPROVED":
            return approved_action(resource, kind)
        created = subs.parse_time(event.payload.get("create_time"))
        if kind == subs.SALE_COMPLETED:
            return subs.sale_action(resource, created)
        if kind == subs.SALE_REFUNDED:
            return subs.sale_refund_action(resource)
        if kind in subs.STATE_EVENTS:
            return subs.state_action(kind, resource, created)
        if kind == "PAYMENT.CAPTURE.PENDING":
            details = resource.get("status_details")
            why = details.get("reason") if isinstance(details, Mapping) else None
            action = capture_action(pb.IGNORE, resource, kind)
            return pb.EventAction(
                pb.IGNORE,
                order_number=action.order_number,
                payment_reference=action.payment_reference,
                reason=f"capture pending ({why or 'no reason given'}); waiting for COMPLETED",
            )
        return pb.EventAction(pb.IGNORE, reason=f"event type {kind} is not used")

    # -- REST API ------------------------------------------------------------------------

    def confirm(self, action: pb.EventAction, config: Mapping[str, Any]) -> pb.Confirmation:
        capture_id = paypal_object_id(action.payment_reference)
        if capture_id is None:
            raise pb.ProviderUnavailable("no capture id to confirm")
        data = self._api("GET", f"/v2/payments/captures/{capture_id}", config)
        if data.get("id") != capture_id:
            raise pb.ProviderUnavailable("PayPal answered for a different capture")
        amount, currency = money_of(data.get("amount"))
        if amount is None or currency is None:
            raise pb.ProviderUnavailable("PayPal's capture has no readable amount")
        return pb.Confirmation(
            final=data.get("status") == "COMPLETED",
            amount=amount,
            currency=currency,
            order_number=order_number_of(data),
            payment_reference=capture_id,
        )

    def create_checkout(
        self, checkout: pb.CheckoutRequest, config: Mapping[str, Any]
    ) -> pb.CheckoutSession:
        if checkout.recurring is not None:
            return self._create_subscription(checkout, config)
        body = checkout_order_body(checkout)
        data = self._api(
            "POST",
            "/v2/checkout/orders",
            config,
            json_body=body,
            # Idempotency: a retried request (pyramid_retry, a double click) gets the
            # same PayPal order back instead of a second one.
            headers={"PayPal-Request-Id": f"cmsshop-checkout-{checkout.order_number}"},
        )
        order_id = paypal_object_id(data.get("id"))
        approval = link_of(data, "payer-action") or link_of(data, "approve")
        if order_id is None or not approval or not approval.startswith("https://"):
            raise pb.ProviderUnavailable("PayPal's order has no id or approval link")
        return pb.CheckoutSession(redirect_url=approval, provider_checkout_id=order_id)

    def capture_order(self, paypal_order_id: str, config: Mapping[str, Any]) -> dict[str, Any]:
        """Capture an approved PayPal order (``POST /v2/checkout/orders/{id}/capture``).

        Idempotent through PayPal-Request-Id; the resulting PAYMENT.CAPTURE.COMPLETED
        webhook, not this call, fulfils the order.
        """
        order_id = paypal_object_id(paypal_order_id)
        if order_id is None:
            raise pb.ProviderUnavailable("not a PayPal order id")
        return self._api(
            "POST",
            f"/v2/checkout/orders/{order_id}/capture",
            config,
            json_body={},
            headers={"PayPal-Request-Id": f"cmsshop-capture-{order_id}"},
        )

    def capture(self, action: pb.EventAction, config: Mapping[str, Any]) -> None:
        """The machinery's CAPTURE hook: capture the approved PayPal order named by
        ``action.provider_object_id``. Idempotent: the PayPal-Request-Id is derived from
        the PayPal order id, and "already captured" (422 ORDER_ALREADY_CAPTURED) counts
        as success. Nothing is marked paid here; PAYMENT.CAPTURE.COMPLETED fulfils."""
        try:
            self.capture_order(action.provider_object_id or "", config)
        except PayPalApiError as exc:
            if exc.status == 422 and "ORDER_ALREADY_CAPTURED" in exc.issues:
                return
            raise

    def refund(self, call: RefundCall, config: Mapping[str, Any]) -> ProviderRefund:
        """Refund ``call.amount`` of the capture ``call.payment_reference`` (``POST
        /v2/payments/captures/{id}/refund``) with ``PayPal-Request-Id`` =
        ``call.idempotency_key``: the same id twice is one refund at PayPal. A 4xx answer
        (REFUND_AMOUNT_EXCEEDED, CAPTURE_FULLY_REFUNDED, wrong credentials...) is
        RefundRefused; no answer, 429 or 5xx ProviderUnavailable. A subscription's
        payment is a v1 sale, refunded through the sales API (``_refund_sale``)."""
        if call.subscription_payment:
            return self._refund_sale(call, config)
        capture_id = paypal_object_id(call.payment_reference)
        if capture_id is None:
            raise RefundRefused("the order has no PayPal capture to refund")
        data = self._refund_call(
            f"/v2/payments/captures/{capture_id}/refund",
            refund_body(call.amount, call.currency, call.reason),
            call,
            config,
        )
        refund_id, status = paypal_object_id(data.get("id")), data.get("status")
        if refund_id is None:
            raise pb.ProviderUnavailable("PayPal's refund has no id")
        if status in ("CANCELLED", "FAILED"):
            raise RefundRefused(f"PayPal refund {refund_id} is {status}")
        return ProviderRefund(refund_id, "succeeded" if status == "COMPLETED" else "pending")

    def _refund_call(
        self, path: str, body: dict, call: RefundCall, config: Mapping[str, Any]
    ) -> dict:
        """POST a refund ``body`` to ``path`` under ``call.idempotency_key`` (PayPal's
        request id): a 4xx answer but 429 is RefundRefused, the rest PayPal's errors."""
        try:
            return self._api(
                "POST", path, config, json_body=body,
                headers={"PayPal-Request-Id": call.idempotency_key},
            )  # fmt: skip
        except PayPalApiError as exc:
            if 400 <= exc.status < 500 and exc.status != 429:
                raise RefundRefused(str(exc)) from None
            raise

    def _refund_sale(self, call: RefundCall, config: Mapping[str, Any]) -> ProviderRefund:
        """Refund ``call.amount`` of the sale ``call.payment_reference`` (``POST
        /v1/payments/sale/{id}/refund``, the amount always stated) under the same
        ``PayPal-Request-Id``. Its answer's ``state``: completed (succeeded), pending, or
        failed (RefundRefused); a 4xx (REFUND_EXCEEDED_TRANSACTION_AMOUNT,
        TRANSACTION_ALREADY_REFUNDED, an unknown sale, wrong credentials) is
        RefundRefused; no answer, 429 or 5xx ProviderUnavailable. The refund's
        ``PAYMENT.SALE.REFUNDED`` names this refund's id, so it confirms this row."""
        sale_id = paypal_object_id(call.payment_reference)
        if sale_id is None:
            raise RefundRefused("the order has no PayPal sale to refund")
        data = self._refund_call(
            f"/v1/payments/sale/{sale_id}/refund",
            sale_refund_body(call.amount, call.currency, call.reason),
            call,
            config,
        )
        refund_id, state = paypal_object_id(data.get("id")), data.get("state")
        if refund_id is None:
            raise pb.ProviderUnavailable("PayPal's sale refund has no id")
        if state == "failed":
            raise RefundRefused(f"PayPal refund {refund_id} of sale {sale_id} failed")
        return ProviderRefund(refund_id, "succeeded" if state == "completed" else "pending")

    # -- subscriptions (Subscriptions API v1) ---------------------------------------------

    sells_subscriptions = True
    subscription_cycle_limits = subs.CYCLE_LIMITS
    # PayPal has no cancellation at the period end: cancelling ends the subscription at
    # once (the paid period is kept here), and a cancelled subscription cannot be resumed.
    cancels_at_once = True
    # A coupon discounts the first period only: the plan opens with a TRIAL cycle of the
    # discounted total, then the regular cycles at the full price (subs.plan_body).
    discounts_first_period = True

    def create_plan(
        self, checkout: pb.CheckoutRequest, config: Mapping[str, Any], sibling_plan_ref
    ) -> str:
        """A PayPal plan billing ``checkout.total`` every ``checkout.recurring`` cycle
        (after a coupon: the total for the first cycle, the full price after; see
        subs.plan_body) (``POST /v1/billing/plans``), for the catalog product of a plan
        made earlier for the same product (``GET /v1/billing/plans/{id}``) or a new one (``POST
        /v1/catalogs/products``). Each POST has a PayPal-Request-Id derived from our
        keys, so a retried or concurrent first checkout makes one product and one plan."""
        product_id = None
        sibling = paypal_object_id(sibling_plan_ref)
        if sibling is not None:
            found = self._api("GET", f"/v1/billing/plans/{sibling}", config)
            product_id = paypal_object_id(found.get("product_id"))
        if product_id is None:
            product = self._api(
                "POST",
                "/v1/catalogs/products",
                config,
                json_body=subs.product_body(checkout),
                headers={
                    "PayPal-Request-Id": f"cmsshop-product-{checkout.recurring.plan_id}",
                    "Prefer": "return=representation",
                },
            )
            product_id = paypal_object_id(product.get("id"))
        if product_id is None:
            raise pb.ProviderUnavailable("PayPal's catalog product has no id")
        plan = self._api(
            "POST",
            "/v1/billing/plans",
            config,
            json_body=subs.plan_body(checkout, product_id),
            headers={
                "PayPal-Request-Id": subs.plan_request_id(checkout),
                "Prefer": "return=representation",
            },
        )
        plan_id = paypal_object_id(plan.get("id"))
        if plan_id is None or plan.get("status", "ACTIVE") != "ACTIVE":
            raise pb.ProviderUnavailable("PayPal's plan has no id or is not active")
        return plan_id

    def _create_subscription(
        self, checkout: pb.CheckoutRequest, config: Mapping[str, Any]
    ) -> pb.CheckoutSession:
        """``POST /v1/billing/subscriptions`` for the plan the checkout found or made;
        the buyer approves it on PayPal's page (the ``approve`` link). The
        PayPal-Request-Id is the order number's: a retried request gets the same
        subscription back instead of a second one."""
        if paypal_object_id(checkout.recurring.provider_plan_ref) is None:
            raise pb.ProviderUnavailable("no PayPal plan to subscribe to")
        data = self._api(
            "POST",
            "/v1/billing/subscriptions",
            config,
            json_body=subs.subscription_body(checkout),
            headers={
                "PayPal-Request-Id": f"cmsshop-subscription-{checkout.order_number}",
                "Prefer": "return=representation",
            },
        )
        ref = paypal_object_id(data.get("id"))
        approval = link_of(data, "approve")
        if ref is None or not approval or not approval.startswith("https://"):
            raise pb.ProviderUnavailable("PayPal's subscription has no id or approval link")
        return pb.CheckoutSession(redirect_url=approval, provider_checkout_id=ref)

    def _subscription(self, ref: str | None, config: Mapping[str, Any]) -> dict[str, Any]:
        checked = paypal_object_id(ref)
        if checked is None:
            raise pb.ProviderUnavailable("not a PayPal subscription id")
        return self._api("GET", f"/v1/billing/subscriptions/{checked}", config)

    def fetch_subscription(
        self, subscription_ref: str, config: Mapping[str, Any]
    ) -> pb.ProviderSubscription:
        """A subscription as PayPal holds it (``GET /v1/billing/subscriptions/{id}``). One
        that opened with a free trial, once the trial is over, also brings its
        transactions: the trial ends at the first payment."""
        found = self._subscription(subscription_ref, config)
        _, free_trial = self._plan_facts(found, config)
        transactions = None
        if subs.began_with_trial(found, free_trial) and not subs.in_trial(found, free_trial):
            transactions = self._transactions(subscription_ref, found, config)
        return subs.subscription_of(found, subscription_ref, transactions, free_trial)

    def _sale(self, sale_id: str, config: Mapping[str, Any]) -> dict[str, Any]:
        checked = paypal_object_id(sale_id)
        if checked is None:
            raise pb.ProviderUnavailable("not a PayPal sale id")
        sale = self._api("GET", f"/v1/payments/sale/{checked}", config)
        if sale.get("id") != checked:
            raise pb.ProviderUnavailable("PayPal answered for a different sale")
        return sale

    def _transactions(
        self, ref: str, found: Mapping[str, Any], config, also: dt.datetime | None = None
    ) -> list[Any]:
        """The subscription's transactions (``GET /v1/billing/subscriptions/{id}/
        transactions``, every page)."""
        start, end = subs.transactions_window(found, dt.datetime.now(dt.UTC), also)
        query = urllib.parse.urlencode({"start_time": start, "end_time": end})
        listing = f"/v1/billing/subscriptions/{ref}/transactions"
        path: str | None = f"{listing}?{query}"
        listed: list[Any] = []
        for _ in range(50):  # PayPal pages by 20 or more; 1000 payments is decades
            if path is None:
                break
            data = self._api("GET", path, config)
            page = data.get("transactions")
            listed.extend(page if isinstance(page, list) else [])
            following = subs.next_link(data)
            parts = urllib.parse.urlsplit(following) if following else None
            # Only a next page of the same list is followed, never another address.
            same = parts is not None and parts.path == listing
            path = f"{parts.path}?{parts.query}" if same else None
        return listed

    def _invoice_in(
        self, sale: Mapping[str, Any], ref: str, config, *, listed_only: bool
    ) -> pb.ProviderInvoice | None:
        """Sale ``sale`` as a period of subscription ``ref``; None when ``listed_only``
        and PayPal does not list it among the subscription's transactions."""
        found = self._subscription(ref, config)
        subs.subscription_of(found, ref)  # refuses one that is not live yet
        sale_time = subs.parse_time(sale.get("create_time"))
        transactions = self._transactions(ref, found, config, sale_time)
        if not any(isinstance(t, Mapping) and t.get("id") == sale["id"] for t in transactions):
            if listed_only:
                return None
            # PayPal's list may not show a sale of a moment ago yet: the sale's own
            # record stands in for it.
            transactions.append(subs.sale_as_transaction(sale))
        frequency, free_trial = self._plan_facts(found, config)
        for invoice, sale_id in subs.invoices_of(found, ref, transactions, frequency, free_trial):
            if sale_id != sale["id"]:
                continue
            if invoice is None:
                raise pb.ProviderUnavailable(
                    f"PayPal states no end of the period sale {sale_id} pays for "
                    f"(subscription {ref} is {str(found.get('status'))[:40]})"
                )
            paid = sale.get("state") in subs.PAID_SALE_STATES and invoice.paid
            return dataclasses.replace(invoice, paid=paid)
        raise pb.ProviderUnavailable(f"sale {sale['id']} cannot be read as a payment")

    def _plan_facts(
        self, found: Mapping[str, Any], config
    ) -> tuple[tuple[str, int] | None, bool | None]:
        """What the subscription's plan (``GET /v1/billing/plans/{id}``) says and its own
        record does not, asked only where it is needed (else None): the billing
        frequency of a subscription PayPal bills no more (its latest sale's period ends
        one cycle after it, see the ``subscriptions`` module), and whether the TRIAL
        cycle a subscription ran was a free trial or a first period a coupon discounted
        (``subs.plan_free_trial``). One call for both, none for any other subscription."""
        wants_frequency, wants_trial = subs.billed_no_more(found), subs.ran_a_trial_cycle(found)
        plan_id = paypal_object_id(found.get("plan_id"))
        if plan_id is None or not (wants_frequency or wants_trial):
            return None, None
        plan = self._api("GET", f"/v1/billing/plans/{plan_id}", config)
        if plan.get("id") != plan_id:
            return None, None
        return (
            subs.plan_frequency(plan) if wants_frequency else None,
            subs.plan_free_trial(plan) if wants_trial else None,
        )

    def fetch_invoice(self, invoice_ref: str, config: Mapping[str, Any]) -> pb.ProviderInvoice:
        """A subscription's sale as a period (``GET /v1/payments/sale/{id}``, the
        subscription and its transactions): see the ``subscriptions`` module for the
        period's dates and ``first``."""
        sale = self._sale(invoice_ref, config)
        ref = paypal_object_id(sale.get("billing_agreement_id"))
        if ref is None:
            raise pb.ProviderUnavailable(f"PayPal's sale {invoice_ref} names no subscription")
        return self._invoice_in(sale, ref, config, listed_only=False)

    def find_invoice(
        self, invoice_ref: str, subscription_ref: str, config: Mapping[str, Any]
    ) -> pb.ProviderInvoice | None:
        """Sale ``invoice_ref`` as a period of ``subscription_ref`` when PayPal lists it
        among that subscription's transactions, else None: how a sale whose event and
        record name no subscription is matched (services/subscriptions/parked.py)."""
        sale = self._sale(invoice_ref, config)
        named = paypal_object_id(sale.get("billing_agreement_id"))
        if named is not None and named != subscription_ref:
            return None
        return self._invoice_in(sale, subscription_ref, config, listed_only=True)

    def list_paid_invoices(
        self, subscription_ref: str, config: Mapping[str, Any]
    ) -> list[pb.ProviderInvoice]:
        """Every paid sale of the subscription, from its transactions: what the
        reconciliation compares with the periods recorded here. The last payment of a
        subscription PayPal bills no more ends one plan cycle after it (see
        ``invoices_of``)."""
        found = self._subscription(subscription_ref, config)
        transactions = self._transactions(subscription_ref, found, config)
        frequency, free_trial = self._plan_facts(found, config)
        return [
            invoice
            for invoice, _ in subs.invoices_of(
                found, subscription_ref, transactions, frequency, free_trial
            )
            if invoice is not None and invoice.paid
        ]

    def set_cancel_at_period_end(
        self, subscription_ref: str, cancel: bool, config: Mapping[str, Any]
    ) -> pb.ProviderSubscription:
        """Cancel the subscription at PayPal now (``POST /v1/billing/subscriptions/{id}/
        cancel``; PayPal has no cancellation at the period end, and the period paid for is
        kept here anyway). A subscription PayPal already ended answers 422
        SUBSCRIPTION_STATUS_INVALID: that counts as done. Nothing can be taken back:
        ``cancel=False`` is refused before any call (selfservice refuses it earlier)."""
        if not cancel:
            raise pb.ProviderUnavailable("PayPal cannot take a cancellation back")
        return self._cancel(
            subscription_ref, "Cancelled by the customer in their shop account", config
        )

    def cancel_subscription_now(
        self, subscription_ref: str, config: Mapping[str, Any]
    ) -> pb.ProviderSubscription:
        """End the subscription at PayPal now, as a refund that takes its license back
        asks (services/subscriptions/refund_cancel.py): the same call as the customer's
        cancellation, with its own reason; one PayPal already ended counts as done."""
        reason = "Cancelled by the shop: its payment was refunded"
        return self._cancel(subscription_ref, reason, config)

    def _cancel(
        self, subscription_ref: str, reason: str, config: Mapping[str, Any]
    ) -> pb.ProviderSubscription:
        checked = paypal_object_id(subscription_ref)
        if checked is None:
            raise pb.ProviderUnavailable("not a PayPal subscription id")
        try:
            self._api(
                "POST",
                f"/v1/billing/subscriptions/{checked}/cancel",
                config,
                json_body={"reason": reason},
            )
        except PayPalApiError as exc:
            if not (exc.status == 422 and "SUBSCRIPTION_STATUS_INVALID" in exc.issues):
                raise
        return self.fetch_subscription(checked, config)

    def payment_method_url(
        self, customer_ref: str, return_url: str, config: Mapping[str, Any]
    ) -> str:
        """PayPal's own page where the buyer manages automatic payments and picks the
        funding source of each (PayPal offers merchants no session for it, so the page
        is the same for every buyer and ``return_url`` is not used)."""
        sandbox = "sandbox" in api_base_of(config)
        return subs.SANDBOX_AUTOPAY_URL if sandbox else subs.AUTOPAY_URL

    def _api(
        self,
        method: str,
        path: str,
        config: Mapping[str, Any],
        json_body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """One authenticated REST call; every failure is ProviderUnavailable.

        4xx answers count too: the event was verified, so a refused confirmation means
        wrong credentials or API base (sandbox vs live) -- an operator fixes it and the
        event is reprocessed or redelivered, nothing is marked paid meanwhile.
        """
        base = api_base_of(config)
        for attempt in (1, 2):
            token = self._access_token(base, config)
            try:
                response = self._http.request(
                    method,
                    base + path,
                    json=json_body,
                    headers={
                        "Authorization": f"Bearer {token}",
                        "Accept": "application/json",
                        **(headers or {}),
                    },
                    timeout=timeouts(config),
                    verify=tls_verify(config),
                    allow_redirects=False,
                )
            except (requests.RequestException, OSError) as exc:  # OSError: unreadable CA bundle
                raise pb.ProviderUnavailable(
                    f"PayPal API unreachable: {type(exc).__name__}"
                ) from exc
            if response.status_code == 401 and attempt == 1:
                self._forget_token(base, config)  # expired or revoked early: fetch anew once
                continue
            if not 200 <= response.status_code < 300:
                raise PayPalApiError(
                    response.status_code, api_issues(response), api_error_name(response)
                )
            if response.status_code == 204:
                return {}  # e.g. a subscription cancelled: no body
            try:
                data = response.json()
            except ValueError as exc:
                raise pb.ProviderUnavailable("PayPal API answered with invalid JSON") from exc
            if not isinstance(data, dict):
                raise pb.ProviderUnavailable("PayPal API answered with a non-object")
            return data
        raise pb.ProviderUnavailable("PayPal API refused the access token")  # pragma: no cover

    def _token_key(self, base: str, config: Mapping[str, Any]) -> tuple[str, str, str]:
        client_id, secret = config_text(config, "clientId"), config_text(config, "clientSecret")
        if not client_id or not secret:
            raise pb.NotConfigured("walletprovider clientId / clientSecret are not configured")
        return base, client_id, hashlib.sha256(secret.encode()).hexdigest()

    def _forget_token(self, base: str, config: Mapping[str, Any]) -> None:
        with self._token_lock:
            self._tokens.pop(self._token_key(base, config), None)

    def _access_token(self, base: str, config: Mapping[str, Any]) -> str:
        key = self._token_key(base, config)
        with self._token_lock:
            cached = self._tokens.get(key)
            if cached and cached[1] > time.monotonic():
                return cached[0]
        try:
            response = self._http.post(
                base + "/v1/oauth2/token",
                data={"grant_type": "client_credentials"},
                auth=(config_text(config, "clientId"), config_text(config, "clientSecret")),
                headers={"Accept": "application/json"},
                timeout=timeouts(config),
                verify=tls_verify(config),
                allow_redirects=False,
            )
        except (requests.RequestException, OSError) as exc:  # OSError: unreadable CA bundle
            raise pb.ProviderUnavailable(f"PayPal OAuth unreachable: {type(exc).__name__}") from exc
        if response.status_code != 200:
            raise pb.ProviderUnavailable(f"PayPal OAuth answered HTTP {response.status_code}")
        try:
            data = response.json()
            token = data["access_token"]
            lifetime = int(data.get("expires_in", 0))
        except (ValueError, KeyError, TypeError) as exc:
            raise pb.ProviderUnavailable("PayPal OAuth answered without an access token") from exc
        if not isinstance(token, str) or not token:
            raise pb.ProviderUnavailable("PayPal OAuth answered without an access token")
        if lifetime > TOKEN_EARLY_REFRESH:
            with self._token_lock:
                self._tokens[key] = (token, time.monotonic() + lifetime - TOKEN_EARLY_REFRESH)
        return token
