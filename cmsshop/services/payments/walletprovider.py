"""The wallet provider: PayPal's webhook scheme and REST API (Orders v2, Payments v2).

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
"""

from __future__ import annotations

import base64
import binascii
import collections
import datetime as dt
import hashlib
import ipaddress
import json
import os
import re
import secrets
import threading
import time
import urllib.parse
import uuid
import warnings
import zlib
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

import certifi
import requests
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.verification import DNSName, PolicyBuilder, Store, VerificationError

from cmsshop.services.payments.base import (
    CAPTURE,
    DISPUTE_LOST,
    DISPUTE_OPENED,
    DISPUTE_WON,
    FAIL,
    FULFIL,
    IGNORE,
    REFUND,
    CheckoutRequest,
    CheckoutSession,
    Confirmation,
    EventAction,
    NotConfigured,
    ProviderUnavailable,
    SignatureInvalid,
    VerifiedEvent,
)

NAME = "walletprovider"
DEFAULT_API_BASE = "https://api-m.paypal.com"
DEFAULT_CERT_HOSTS = ("paypal.com",)
DEFAULT_CERT_SUBJECTS = (
    "messageverificationcerts.paypal.com",
    "messageverificationcerts.sandbox.paypal.com",
)
ACCEPTED_ALGORITHM = "SHA256withRSA"
DEFAULT_TIMEOUT = 10.0
# PayPal redelivers for up to 3 days; see check_transmission_age.
DEFAULT_TOLERANCE = 4 * 24 * 3600
CONNECT_TIMEOUT = 5.0
MAX_CERT_BYTES = 64 * 1024  # a PEM chain is a few KB
MAX_CHAIN_LENGTH = 6
MIN_RSA_BITS = 2048
CERT_CACHE_SIZE = 32
TOKEN_EARLY_REFRESH = 60  # seconds before expiry a cached OAuth token is replaced

HEADER_TRANSMISSION_ID = "paypal-transmission-id"
HEADER_TRANSMISSION_TIME = "paypal-transmission-time"
HEADER_TRANSMISSION_SIG = "paypal-transmission-sig"
HEADER_CERT_URL = "paypal-cert-url"
HEADER_AUTH_ALGO = "paypal-auth-algo"
REQUIRED_HEADERS = (
    HEADER_TRANSMISSION_ID,
    HEADER_TRANSMISSION_TIME,
    HEADER_TRANSMISSION_SIG,
    HEADER_CERT_URL,
    HEADER_AUTH_ALGO,
)

# ISO 4217 exponents that are not 2. Minor units in this shop follow ISO 4217, so an
# admin must configure these currencies with the same number of decimals.
CURRENCY_DECIMALS = {
    **dict.fromkeys(
        ("BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "VND"), 0
    ),
    **dict.fromkeys(("VUV", "XAF", "XOF", "XPF"), 0),
    **dict.fromkeys(("BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"), 3),
}
# PayPal refuses decimals for these although ISO 4217 gives them two: whole amounts are
# sent without a fraction, fractional ones cannot be charged through PayPal.
PAYPAL_WHOLE_UNITS = frozenset({"HUF", "TWD"})

# PayPal object ids are upper-case alphanumerics (captures, orders) or prefixed with
# dashes (WH-..., PP-D-...); anything else is not put into a URL path.
_OBJECT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")
_AMOUNT = re.compile(r"^-?[0-9]{1,15}(\.[0-9]{1,3})?$")
_HOST_LABELS = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$")
_CAPTURE_LINK = re.compile(r"/v2/payments/captures/([A-Za-z0-9-]{1,64})/?$")


# --- money ---------------------------------------------------------------------------


def currency_decimals(currency: str) -> int:
    return CURRENCY_DECIMALS.get(currency.upper(), 2)


def to_minor_units(value: Any, currency: str) -> int:
    """PayPal's decimal string (``"10.50"``, ``"1000"``) -> integer minor units, exactly."""
    if not isinstance(value, str) or not _AMOUNT.match(value):
        raise ValueError(f"not a PayPal amount: {value!r}")
    scaled = Decimal(value).scaleb(currency_decimals(currency))
    if scaled != scaled.to_integral_value():
        raise ValueError(f"{value} {currency} has more decimals than the currency")
    return int(scaled)


def to_decimal_string(amount: int, currency: str) -> str:
    """Integer minor units -> the decimal string PayPal expects."""
    decimals = currency_decimals(currency)
    value = Decimal(int(amount)).scaleb(-decimals)
    if currency.upper() in PAYPAL_WHOLE_UNITS:
        if value != value.to_integral_value():
            raise ValueError(f"PayPal accepts only whole {currency} amounts")
        return str(int(value))
    return f"{value:.{decimals}f}"


def _money(obj: Any) -> tuple[int | None, str | None]:
    """``{"currency_code", "value"}`` -> (minor units, currency); (None, ...) if unreadable."""
    if not isinstance(obj, Mapping):
        return None, None
    currency = obj.get("currency_code")
    if not isinstance(currency, str) or not re.fullmatch(r"[A-Za-z]{3}", currency):
        return None, None
    currency = currency.upper()
    try:
        return to_minor_units(obj.get("value"), currency), currency
    except (ValueError, InvalidOperation):
        return None, currency


# --- config helpers --------------------------------------------------------------------


def _text(config: Mapping[str, Any], key: str, default: str = "") -> str:
    value = config.get(key)
    return str(value).strip() if value not in (None, "") else default


def _list(config: Mapping[str, Any], key: str, default: tuple[str, ...]) -> list[str]:
    value = config.get(key)
    if value in (None, "", [], ()):
        return list(default)
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    return [str(v).strip() for v in value if str(v).strip()]


def _timeout(config: Mapping[str, Any]) -> tuple[float, float]:
    try:
        read = float(config.get("timeout") or DEFAULT_TIMEOUT)
    except (TypeError, ValueError):
        read = DEFAULT_TIMEOUT
    read = max(0.05, read)
    return min(CONNECT_TIMEOUT, read), read


def _tls_verify(config: Mapping[str, Any]) -> str | bool:
    """The CA bundle for TLS connections made by this provider (True: requests' default)."""
    return _text(config, "caBundle") or True


# --- certificate URL allow-list ----------------------------------------------------------


def _parse_allowed(entries: list[str]) -> list[tuple[str, int]]:
    allowed = []
    for entry in entries:
        entry = entry.strip().lower()
        host, _, port = entry.rpartition(":") if ":" in entry else (entry, "", "")
        host = host.lstrip("*").lstrip(".").rstrip(".")
        if not host or (port and not (port.isascii() and port.isdigit())):
            continue
        allowed.append((host, int(port) if port else 443))
    return allowed


def validate_cert_hosts(value: Any) -> None:
    """Admin settings check of ``certHosts``: ``host`` or ``host:port`` entries, each at
    least a registrable-looking name (``com`` alone would allow every .com host)."""
    for entry in value if isinstance(value, list) else [value]:
        text = str(entry).strip().lower()
        host, _, port = text.rpartition(":") if ":" in text else (text, "", "")
        if not host or not _HOST_LABELS.match(host):
            raise ValueError(f"{entry!r}: a host name such as paypal.com, optionally host:port")
        if port and not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
            raise ValueError(f"{entry!r}: the port must be a number from 1 to 65535")
        if "." not in host and host != "localhost":
            raise ValueError(f"{entry!r}: too broad, name a domain such as paypal.com")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def check_cert_url(url: Any, cert_hosts: list[str]) -> str:
    """Validate a ``PAYPAL-CERT-URL`` against the allow-list; return the URL to fetch.

    Raises SignatureInvalid without any network activity. The returned URL is rebuilt
    from the parsed parts, so what was checked is exactly what is requested.
    """
    if not isinstance(url, str) or not url or len(url) > 2048:
        raise SignatureInvalid("certificate URL missing or too long")
    # Characters that URL parsers disagree about (userinfo, backslashes, whitespace,
    # control and non-ASCII characters) are refused outright rather than interpreted.
    if any(ch in url for ch in "@\\") or any(ord(ch) <= 0x20 or ord(ch) >= 0x7F for ch in url):
        raise SignatureInvalid("certificate URL contains characters that are not allowed")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise SignatureInvalid("certificate URL is not a valid URL") from exc
    if parts.scheme.lower() != "https":
        raise SignatureInvalid("certificate URL is not https")
    if parts.username is not None or parts.password is not None or parts.fragment:
        raise SignatureInvalid("certificate URL has userinfo or a fragment")
    host = (parts.hostname or "").lower()
    if not host or not _HOST_LABELS.match(host):
        raise SignatureInvalid("certificate URL host is not a plain DNS name")
    port = port if port is not None else 443
    for allowed_host, allowed_port in _parse_allowed(cert_hosts):
        if port != allowed_port:
            continue
        if host == allowed_host or (not _is_ip(host) and host.endswith("." + allowed_host)):
            netloc = host if port == 443 else f"{host}:{port}"
            return urllib.parse.urlunsplit(("https", netloc, parts.path or "/", parts.query, ""))
    raise SignatureInvalid(f"certificate URL host {host}:{port} is not on the allow-list")


# --- trust store and certificate cache ----------------------------------------------------


_PEM_BLOCK = re.compile(
    rb"-----BEGIN CERTIFICATE-----\r?\n.+?\r?\n-----END CERTIFICATE-----", re.DOTALL
)


def _load_roots(bundle: bytes) -> list[x509.Certificate]:
    """Every certificate of a PEM bundle that parses; one odd root (certifi carries a few
    with non-positive serial numbers) must not make the whole trust store unusable."""
    roots = []
    for block in _PEM_BLOCK.findall(bundle):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                roots.append(x509.load_pem_x509_certificate(block))
            except ValueError:
                continue
    return roots


class _TrustStores:
    """Parsed CA bundles by path, reloaded when the file changes."""

    def __init__(self):
        self._lock = threading.Lock()
        self._stores: dict[str, tuple[float, Store]] = {}

    def get(self, path: str) -> Store:
        try:
            mtime = os.stat(path).st_mtime
        except OSError as exc:
            raise NotConfigured(f"trusted CA bundle {path!r} cannot be read") from exc
        with self._lock:
            cached = self._stores.get(path)
            if cached and cached[0] == mtime:
                return cached[1]
        with open(path, "rb") as fh:
            roots = _load_roots(fh.read())
        if not roots:
            raise NotConfigured(f"trusted CA bundle {path!r} holds no certificate")
        store = Store(roots)
        with self._lock:
            self._stores[path] = (mtime, store)
        return store


class _CachedCert:
    __slots__ = ("public_key", "not_before", "not_after")

    def __init__(self, public_key, not_before: dt.datetime, not_after: dt.datetime):
        self.public_key = public_key
        self.not_before = not_before
        self.not_after = not_after

    def valid_at(self, now: dt.datetime) -> bool:
        return self.not_before <= now <= self.not_after


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
        self._cert_cache: collections.OrderedDict[tuple, _CachedCert] = collections.OrderedDict()
        self._cert_cache_size = cert_cache_size
        self._cert_lock = threading.Lock()
        self._stores = _TrustStores()
        self._tokens: dict[tuple, tuple[str, float]] = {}
        self._token_lock = threading.Lock()
        self._http = requests.Session()

    # -- verify --------------------------------------------------------------------------

    def verify(
        self, headers: Mapping[str, str], raw_body: bytes, config: Mapping[str, Any]
    ) -> VerifiedEvent:
        webhook_id = _text(config, "webhookId")
        if not webhook_id:
            raise NotConfigured("walletprovider webhookId is not configured")
        lowered = {str(k).lower(): v for k, v in headers.items()}
        missing = [h.upper() for h in REQUIRED_HEADERS if not str(lowered.get(h) or "").strip()]
        if missing:
            raise SignatureInvalid(f"missing header(s): {', '.join(missing)}")
        algorithm = str(lowered[HEADER_AUTH_ALGO]).strip()
        if algorithm != ACCEPTED_ALGORITHM:
            raise SignatureInvalid(f"auth algorithm {algorithm[:40]!r} is not accepted")
        transmission_id = str(lowered[HEADER_TRANSMISSION_ID]).strip()
        transmission_time = str(lowered[HEADER_TRANSMISSION_TIME]).strip()
        if len(transmission_id) > 255 or len(transmission_time) > 64:
            raise SignatureInvalid("transmission headers are too long")
        check_transmission_age(transmission_time, _tolerance(config))
        try:
            signature = base64.b64decode(
                str(lowered[HEADER_TRANSMISSION_SIG]).strip(), validate=True
            )
        except (binascii.Error, ValueError) as exc:
            raise SignatureInvalid("transmission signature is not valid base64") from exc
        if not signature:
            raise SignatureInvalid("transmission signature is empty")
        # The URL is checked before the (possibly cached) certificate is looked up, so a
        # host removed from the allow-list stops being trusted at once.
        url = check_cert_url(str(lowered[HEADER_CERT_URL]).strip(), _cert_hosts(config))
        public_key = self._certificate_key(url, config)
        message = signed_message(transmission_id, transmission_time, webhook_id, raw_body)
        try:
            public_key.verify(signature, message, padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature as exc:
            raise SignatureInvalid("signature does not match") from exc
        try:
            payload = json.loads(raw_body)
        except (UnicodeDecodeError, ValueError) as exc:
            raise SignatureInvalid("signed body is not JSON") from exc
        if not isinstance(payload, dict):
            raise SignatureInvalid("signed body is not a JSON object")
        event_id, event_type = payload.get("id"), payload.get("event_type")
        if not isinstance(event_id, str) or not event_id or len(event_id) > 255:
            raise SignatureInvalid("event has no id")
        if not isinstance(event_type, str) or not event_type or len(event_type) > 100:
            raise SignatureInvalid("event has no event_type")
        return VerifiedEvent(
            provider=NAME, event_id=event_id, event_type=event_type, payload=payload, raw=raw_body
        )

    def _certificate_key(self, url: str, config: Mapping[str, Any]) -> rsa.RSAPublicKey:
        ca_bundle = _text(config, "caBundle") or certifi.where()
        subjects = tuple(_list(config, "certSubjects", DEFAULT_CERT_SUBJECTS))
        key = (url, ca_bundle, subjects)
        now = dt.datetime.now(dt.UTC)
        with self._cert_lock:
            cached = self._cert_cache.get(key)
            if cached is not None:
                if cached.valid_at(now):
                    self._cert_cache.move_to_end(key)
                    return cached.public_key
                del self._cert_cache[key]
        cached = self._fetch_and_check(url, ca_bundle, subjects, config, now)
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
    ) -> _CachedCert:
        pem = self._fetch_certificate(url, config)
        try:
            chain = x509.load_pem_x509_certificates(pem)
        except ValueError as exc:
            raise SignatureInvalid("certificate URL did not return PEM certificates") from exc
        if not chain or len(chain) > MAX_CHAIN_LENGTH:
            raise SignatureInvalid("certificate URL returned too many or no certificates")
        leaf, intermediates = chain[0], chain[1:]
        if now < leaf.not_valid_before_utc:
            raise SignatureInvalid("signing certificate is not valid yet")
        if now > leaf.not_valid_after_utc:
            raise SignatureInvalid("signing certificate has expired")
        public_key = leaf.public_key()
        if not isinstance(public_key, rsa.RSAPublicKey) or public_key.key_size < MIN_RSA_BITS:
            raise SignatureInvalid("signing certificate does not hold an RSA key of 2048+ bits")
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
            raise SignatureInvalid(
                "signing certificate does not chain to a trusted root or is not issued for "
                + " / ".join(subjects)
            )
        return _CachedCert(
            public_key,
            max(c.not_valid_before_utc for c in verified),
            min(c.not_valid_after_utc for c in verified),
        )

    def _fetch_certificate(self, url: str, config: Mapping[str, Any]) -> bytes:
        try:
            with self._http.get(
                url,
                timeout=_timeout(config),
                verify=_tls_verify(config),
                allow_redirects=False,
                stream=True,
                headers={"Accept": "application/x-pem-file, text/plain, */*"},
            ) as response:
                status = response.status_code
                if status >= 500 or status == 429:
                    raise ProviderUnavailable(f"certificate host answered HTTP {status}")
                if status != 200:
                    raise SignatureInvalid(f"certificate URL answered HTTP {status} (no redirects)")
                body = b""
                for chunk in response.iter_content(8192):
                    body += chunk
                    if len(body) > MAX_CERT_BYTES:
                        raise SignatureInvalid("certificate URL answered with too much data")
                return body
        # Order matters: SSLError is a ConnectionError, and every RequestException is an
        # OSError. A certificate we cannot trust is a rejection; a host that does not
        # answer is a temporary failure (503, the provider delivers again).
        except requests.exceptions.SSLError as exc:
            raise SignatureInvalid("TLS to the certificate host is not trusted") from exc
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise ProviderUnavailable(
                f"certificate could not be fetched: {type(exc).__name__}"
            ) from exc
        except requests.RequestException as exc:
            raise SignatureInvalid(
                f"certificate could not be fetched: {type(exc).__name__}"
            ) from exc
        except OSError as exc:
            raise NotConfigured(f"caBundle {_text(config, 'caBundle')!r} cannot be read") from exc

    def cached_certificate_count(self) -> int:
        return len(self._cert_cache)

    # -- interpret ---------------------------------------------------------------------

    def interpret(self, event: VerifiedEvent) -> EventAction:
        resource = event.payload.get("resource")
        if not isinstance(resource, Mapping):
            return EventAction(IGNORE, reason=f"{event.event_type} has no resource object")
        kind = event.event_type
        if kind == "PAYMENT.CAPTURE.COMPLETED":
            return _capture_action(FULFIL, resource, kind)
        if kind in ("PAYMENT.CAPTURE.DENIED", "PAYMENT.CAPTURE.DECLINED"):
            return _capture_action(FAIL, resource, kind)
        if kind in ("PAYMENT.CAPTURE.REFUNDED", "PAYMENT.CAPTURE.REVERSED"):
            return _refund_action(resource, kind)
        if kind == "CUSTOMER.DISPUTE.CREATED":
            return _dispute_action(DISPUTE_OPENED, resource, kind)
        if kind == "CUSTOMER.DISPUTE.RESOLVED":
            outcome = resource.get("dispute_outcome")
            code = outcome.get("outcome_code") if isinstance(outcome, Mapping) else None
            if code in DISPUTE_LOST_OUTCOMES:
                return _dispute_action(DISPUTE_LOST, resource, f"{kind} {code}")
            if code in DISPUTE_WON_OUTCOMES:
                return _dispute_action(DISPUTE_WON, resource, f"{kind} {code}")
            return EventAction(IGNORE, reason=f"{kind} with outcome {code!r}")
        if kind == "CHECKOUT.ORDER.APPROVED":
            return _approved_action(resource, kind)
        if kind == "PAYMENT.CAPTURE.PENDING":
            details = resource.get("status_details")
            why = details.get("reason") if isinstance(details, Mapping) else None
            action = _capture_action(IGNORE, resource, kind)
            return EventAction(
                IGNORE,
                order_number=action.order_number,
                payment_reference=action.payment_reference,
                reason=f"capture pending ({why or 'no reason given'}); waiting for COMPLETED",
            )
        return EventAction(IGNORE, reason=f"event type {kind} is not used")

    # -- REST API ------------------------------------------------------------------------

    def confirm(self, action: EventAction, config: Mapping[str, Any]) -> Confirmation:
        capture_id = _object_id(action.payment_reference)
        if capture_id is None:
            raise ProviderUnavailable("no capture id to confirm")
        data = self._api("GET", f"/v2/payments/captures/{capture_id}", config)
        if data.get("id") != capture_id:
            raise ProviderUnavailable("PayPal answered for a different capture")
        amount, currency = _money(data.get("amount"))
        if amount is None or currency is None:
            raise ProviderUnavailable("PayPal's capture has no readable amount")
        return Confirmation(
            final=data.get("status") == "COMPLETED",
            amount=amount,
            currency=currency,
            order_number=_order_number(data),
            payment_reference=capture_id,
        )

    def create_checkout(
        self, checkout: CheckoutRequest, config: Mapping[str, Any]
    ) -> CheckoutSession:
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
        order_id = _object_id(data.get("id"))
        approval = _link(data, "payer-action") or _link(data, "approve")
        if order_id is None or not approval or not approval.startswith("https://"):
            raise ProviderUnavailable("PayPal's order has no id or approval link")
        return CheckoutSession(redirect_url=approval, provider_checkout_id=order_id)

    def capture_order(self, paypal_order_id: str, config: Mapping[str, Any]) -> dict[str, Any]:
        """Capture an approved PayPal order (``POST /v2/checkout/orders/{id}/capture``).

        Idempotent through PayPal-Request-Id; the resulting PAYMENT.CAPTURE.COMPLETED
        webhook, not this call, fulfils the order.
        """
        order_id = _object_id(paypal_order_id)
        if order_id is None:
            raise ProviderUnavailable("not a PayPal order id")
        return self._api(
            "POST",
            f"/v2/checkout/orders/{order_id}/capture",
            config,
            json_body={},
            headers={"PayPal-Request-Id": f"cmsshop-capture-{order_id}"},
        )

    def capture(self, action: EventAction, config: Mapping[str, Any]) -> None:
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
        base = _api_base(config)
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
                    timeout=_timeout(config),
                    verify=_tls_verify(config),
                    allow_redirects=False,
                )
            except (requests.RequestException, OSError) as exc:  # OSError: unreadable CA bundle
                raise ProviderUnavailable(f"PayPal API unreachable: {type(exc).__name__}") from exc
            if response.status_code == 401 and attempt == 1:
                self._forget_token(base, config)  # expired or revoked early: fetch anew once
                continue
            if not 200 <= response.status_code < 300:
                raise PayPalApiError(response.status_code, _issues(response))
            try:
                data = response.json()
            except ValueError as exc:
                raise ProviderUnavailable("PayPal API answered with invalid JSON") from exc
            if not isinstance(data, dict):
                raise ProviderUnavailable("PayPal API answered with a non-object")
            return data
        raise ProviderUnavailable("PayPal API refused the access token")  # pragma: no cover

    def _token_key(self, base: str, config: Mapping[str, Any]) -> tuple[str, str, str]:
        client_id, secret = _text(config, "clientId"), _text(config, "clientSecret")
        if not client_id or not secret:
            raise NotConfigured("walletprovider clientId / clientSecret are not configured")
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
                auth=(_text(config, "clientId"), _text(config, "clientSecret")),
                headers={"Accept": "application/json"},
                timeout=_timeout(config),
                verify=_tls_verify(config),
                allow_redirects=False,
            )
        except (requests.RequestException, OSError) as exc:  # OSError: unreadable CA bundle
            raise ProviderUnavailable(f"PayPal OAuth unreachable: {type(exc).__name__}") from exc
        if response.status_code != 200:
            raise ProviderUnavailable(f"PayPal OAuth answered HTTP {response.status_code}")
        try:
            data = response.json()
            token = data["access_token"]
            lifetime = int(data.get("expires_in", 0))
        except (ValueError, KeyError, TypeError) as exc:
            raise ProviderUnavailable("PayPal OAuth answered without an access token") from exc
        if not isinstance(token, str) or not token:
            raise ProviderUnavailable("PayPal OAuth answered without an access token")
        if lifetime > TOKEN_EARLY_REFRESH:
            with self._token_lock:
                self._tokens[key] = (token, time.monotonic() + lifetime - TOKEN_EARLY_REFRESH)
        return token


# Dispute outcomes (CUSTOMER.DISPUTE.RESOLVED). Lost: the buyer got the money back from
# us. Won: the money stays with us (PayPal covered the buyer, or the claim fell away).
DISPUTE_LOST_OUTCOMES = frozenset({"RESOLVED_BUYER_FAVOUR", "ACCEPTED", "REFUNDED"})
DISPUTE_WON_OUTCOMES = frozenset(
    {"RESOLVED_SELLER_FAVOUR", "RESOLVED_WITH_PAYOUT", "CANCELED_BY_BUYER", "DENIED"}
)


def _tolerance(config: Mapping[str, Any]) -> int:
    try:
        return max(0, int(config.get("signatureTolerance") or 0))
    except (TypeError, ValueError):
        return 0


def check_transmission_age(transmission_time: str, tolerance: int, now=None) -> None:
    """Refuse a transmission time further than ``tolerance`` seconds from now (0: no check).

    The signature covers only a CRC-32 of the body, and a CRC-32 can be matched by a
    forged body; whoever saw one genuine delivery's headers could re-use them with such
    a body. The age limit bounds that window. It is measured in days, not minutes
    (default 4 days, see the plugin), because PayPal redelivers for up to 3 days and
    does not document whether a redelivery is signed anew. Reprocessing a stored
    delivery passes 0: the signature still proves who sent it.
    """
    if tolerance <= 0:
        return
    try:
        sent = dt.datetime.fromisoformat(transmission_time.replace("Z", "+00:00"))
    except ValueError as exc:
        raise SignatureInvalid("transmission time is not an ISO 8601 time") from exc
    if sent.tzinfo is None:
        raise SignatureInvalid("transmission time has no time zone")
    now = now or dt.datetime.now(dt.UTC)
    if abs((now - sent).total_seconds()) > tolerance:
        raise SignatureInvalid(f"transmission time is more than {tolerance} s from now")


def _cert_hosts(config: Mapping[str, Any]) -> list[str]:
    return _list(config, "certHosts", DEFAULT_CERT_HOSTS)


def _api_base(config: Mapping[str, Any]) -> str:
    return _text(config, "apiBase", DEFAULT_API_BASE).rstrip("/")


def _object_id(value: Any) -> str | None:
    return value if isinstance(value, str) and _OBJECT_ID.match(value) else None


def _order_number(obj: Mapping[str, Any]) -> str | None:
    for key in ("custom_id", "invoice_id"):
        value = obj.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()[:64]
    return None


def _link(obj: Mapping[str, Any], rel: str) -> str | None:
    links = obj.get("links")
    for link in links if isinstance(links, list) else []:
        if isinstance(link, Mapping) and link.get("rel") == rel:
            href = link.get("href")
            return href if isinstance(href, str) else None
    return None


class PayPalApiError(ProviderUnavailable):
    """A non-2xx answer of the REST API (``issues``: the ``details[].issue`` codes)."""

    def __init__(self, status: int, issues: tuple[str, ...] = ()):
        detail = f" ({', '.join(issues)})" if issues else ""
        super().__init__(f"PayPal API answered HTTP {status}{detail}")
        self.status = status
        self.issues = issues


def _issues(response: requests.Response) -> tuple[str, ...]:
    try:
        data = response.json()
    except ValueError:
        return ()
    details = data.get("details") if isinstance(data, dict) else None
    found = [
        d["issue"][:64]
        for d in (details if isinstance(details, list) else [])[:10]
        if isinstance(d, dict) and isinstance(d.get("issue"), str)
    ]
    return tuple(found)


def _approved_action(resource: Mapping[str, Any], kind: str) -> EventAction:
    """The buyer approved a PayPal order: ask for the capture (the machinery does it for
    a pending order of ours only). Approval is not payment; the capture's COMPLETED
    event fulfils."""
    units = resource.get("purchase_units")
    unit = units[0] if isinstance(units, list) and units else {}
    unit = unit if isinstance(unit, Mapping) else {}
    order_number = _order_number(unit)
    paypal_order = _object_id(resource.get("id"))
    status = resource.get("status")
    if paypal_order is None:
        return EventAction(IGNORE, order_number=order_number, reason=f"{kind} without an id")
    if status != "APPROVED":
        return EventAction(
            IGNORE,
            order_number=order_number,
            provider_object_id=paypal_order,
            reason=f"{kind} with order status {str(status)[:40]}; nothing to capture",
        )
    amount, currency = _money(unit.get("amount"))
    return EventAction(
        CAPTURE,
        order_number=order_number,
        provider_object_id=paypal_order,
        amount=amount,
        currency=currency,
        reason="order approved by the buyer; approval is not payment, the capture is",
    )


def _capture_action(action: str, resource: Mapping[str, Any], kind: str) -> EventAction:
    capture_id = _object_id(resource.get("id"))
    if capture_id is None:
        return EventAction(IGNORE, reason=f"{kind} without a usable capture id")
    amount, currency = _money(resource.get("amount"))
    # provider_object_id: the PayPal order (our order's provider_checkout_id), so the
    # order is found even when custom_id was lost; confirm() reads the capture itself.
    related = resource.get("supplementary_data")
    related = related.get("related_ids") if isinstance(related, Mapping) else None
    paypal_order = related.get("order_id") if isinstance(related, Mapping) else None
    return EventAction(
        action,
        order_number=_order_number(resource),
        payment_reference=capture_id,
        provider_object_id=_object_id(paypal_order) or capture_id,
        amount=amount,
        currency=currency,
        reason=kind,
    )


def _refund_action(resource: Mapping[str, Any], kind: str) -> EventAction:
    """REFUNDED / REVERSED carry a refund object whose ``up`` link names the capture."""
    up = _link(resource, "up") or ""
    match = _CAPTURE_LINK.search(urllib.parse.urlsplit(up).path) if up else None
    capture_id = match.group(1) if match else None
    if capture_id is None and resource.get("status") in ("REFUNDED", "REVERSED"):
        capture_id = _object_id(resource.get("id"))  # a capture object itself
    if capture_id is None:
        return EventAction(IGNORE, reason=f"{kind} without a capture reference")
    breakdown = resource.get("seller_payable_breakdown")
    total = breakdown.get("total_refunded_amount") if isinstance(breakdown, Mapping) else None
    amount, currency = _money(total if total is not None else resource.get("amount"))
    return EventAction(
        REFUND,
        order_number=_order_number(resource),
        payment_reference=capture_id,
        provider_object_id=capture_id,
        amount=amount,
        currency=currency,
        reason=kind,
    )


def _dispute_action(action: str, resource: Mapping[str, Any], kind: str) -> EventAction:
    """Disputes name the payment in ``disputed_transactions[]``: ``seller_transaction_id``
    is the capture id, ``custom`` our custom_id and ``invoice_number`` our invoice_id."""
    transactions = resource.get("disputed_transactions")
    for txn in transactions if isinstance(transactions, list) else []:
        if not isinstance(txn, Mapping):
            continue
        capture_id = _object_id(txn.get("seller_transaction_id"))
        order_number = _order_number(
            {"custom_id": txn.get("custom"), "invoice_id": txn.get("invoice_number")}
        )
        if capture_id or order_number:
            amount, currency = _money(resource.get("dispute_amount"))
            return EventAction(
                action,
                order_number=order_number,
                payment_reference=capture_id,
                provider_object_id=capture_id,
                amount=amount,
                currency=currency,
                reason=kind,
            )
    return EventAction(IGNORE, reason=f"{kind} names no transaction of ours")


def checkout_order_body(checkout: CheckoutRequest) -> dict[str, Any]:
    """The Orders v2 request: intent CAPTURE, our order number as custom_id/invoice_id."""
    currency = checkout.currency.upper()
    try:
        total = to_decimal_string(checkout.total, currency)
    except ValueError as exc:
        raise ProviderUnavailable(str(exc)) from exc
    unit: dict[str, Any] = {
        "reference_id": checkout.order_number,
        "custom_id": checkout.order_number,
        "invoice_id": checkout.order_number,
        "description": f"Order {checkout.order_number}",
        "amount": {"currency_code": currency, "value": total},
    }
    # Item lines are informative; they are sent only when they add up to the total
    # (PayPal refuses an order whose breakdown does not match its amount).
    amounts = [item.get("amount") for item in checkout.items]
    readable = all(isinstance(a, int) and a >= 0 for a in amounts)
    if checkout.items and readable and sum(amounts) == checkout.total:
        try:
            unit["items"] = [
                {
                    "name": str(item.get("name") or item.get("product") or "Item")[:127],
                    "sku": str(item.get("product") or "")[:127],
                    "quantity": "1",
                    "category": "DIGITAL_GOODS",
                    "unit_amount": {
                        "currency_code": currency,
                        "value": to_decimal_string(item["amount"], currency),
                    },
                }
                for item in checkout.items
            ]
            unit["amount"]["breakdown"] = {
                "item_total": {"currency_code": currency, "value": total}
            }
        except ValueError:
            unit.pop("items", None)
    return {
        "intent": "CAPTURE",
        "purchase_units": [unit],
        "payment_source": {
            "paypal": {
                "experience_context": {
                    "return_url": checkout.success_url,
                    "cancel_url": checkout.cancel_url,
                    "user_action": "PAY_NOW",
                    "shipping_preference": "NO_SHIPPING",
                }
            }
        },
    }


def signed_message(
    transmission_id: str, transmission_time: str, webhook_id: str, raw_body: bytes
) -> bytes:
    """``transmission_id|transmission_time|webhook_id|crc32`` (unsigned, decimal)."""
    crc = zlib.crc32(raw_body) & 0xFFFFFFFF
    return f"{transmission_id}|{transmission_time}|{webhook_id}|{crc}".encode()


# --- simulate-payment (development) ---------------------------------------------------------
#
# A simulated delivery must pass the same verification as PayPal's: signed by a key whose
# certificate chains to a trusted root, served over https from an allowed host. So the
# simulator keeps a development PKI beside the configured ``caBundle`` (a root, a TLS
# certificate for localhost, a signing certificate for PayPal's signing name), writes
# that bundle as the development root plus certifi's roots (real sandbox deliveries
# still verify), and serves the signing chain from a loopback https server in its own
# process while simulate-payment POSTs the event. Nothing of this exists in production:
# production.ini sets no caBundle and no loopback cert host.

DEV_CERT_VALIDITY = dt.timedelta(days=365)


def sign_delivery(
    raw_body: bytes,
    private_key: rsa.RSAPrivateKey,
    cert_url: str,
    webhook_id: str,
    transmission_id: str | None = None,
    transmission_time: str | None = None,
) -> dict[str, str]:
    """The PAYPAL-* headers of a delivery of ``raw_body``, signed as PayPal signs."""
    transmission_id = transmission_id or str(uuid.uuid4())
    transmission_time = transmission_time or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    message = signed_message(transmission_id, transmission_time, webhook_id, raw_body)
    signature = private_key.sign(message, padding.PKCS1v15(), hashes.SHA256())
    return {
        "Content-Type": "application/json",
        "PAYPAL-TRANSMISSION-ID": transmission_id,
        "PAYPAL-TRANSMISSION-TIME": transmission_time,
        "PAYPAL-TRANSMISSION-SIG": base64.b64encode(signature).decode(),
        "PAYPAL-CERT-URL": cert_url,
        "PAYPAL-AUTH-ALGO": ACCEPTED_ALGORITHM,
    }


def capture_completed_event(
    order_number: str,
    amount: int,
    currency: str,
    paypal_order_id: str | None = None,
    capture_id: str | None = None,
) -> dict[str, Any]:
    """A realistic PAYMENT.CAPTURE.COMPLETED event paying ``order_number`` in full."""
    capture_id = capture_id or _random_paypal_id()
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    resource: dict[str, Any] = {
        "id": capture_id,
        "status": "COMPLETED",
        "amount": {"currency_code": currency, "value": to_decimal_string(amount, currency)},
        "final_capture": True,
        "custom_id": order_number,
        "invoice_id": order_number,
        "create_time": now,
        "update_time": now,
        "links": [
            {
                "href": f"https://api.paypal.com/v2/payments/captures/{capture_id}",
                "rel": "self",
                "method": "GET",
            }
        ],
    }
    if paypal_order_id:
        resource["supplementary_data"] = {"related_ids": {"order_id": paypal_order_id}}
    return {
        "id": "WH-" + _random_paypal_id() + "-" + _random_paypal_id(),
        "event_version": "1.0",
        "create_time": now,
        "resource_type": "capture",
        "resource_version": "2.0",
        "event_type": "PAYMENT.CAPTURE.COMPLETED",
        "summary": f"Payment completed for {resource['amount']['value']} {currency}",
        "resource": resource,
    }


def _random_paypal_id() -> str:
    alphabet = "0123456789ABCDEFGHJKLMNPQRSTUVWXYZ"
    return "".join(secrets.choice(alphabet) for _ in range(17))


def simulate_payment(order, config: Mapping[str, Any]) -> tuple[dict[str, str], bytes]:
    """simulate-payment: a signed PAYMENT.CAPTURE.COMPLETED paying ``order`` in full
    (``order`` is a cmsshop.services.payments.settings.SimulatedOrder)."""
    webhook_id = _text(config, "webhookId")
    if not webhook_id:
        raise NotConfigured("walletprovider webhookId is not configured")
    ca_bundle = _text(config, "caBundle")
    if not ca_bundle:
        raise NotConfigured(
            "set cmsshop.walletprovider.ca_bundle (development.ini does) so the server "
            "trusts the development signing certificate"
        )
    host, port = _loopback_cert_host(_cert_hosts(config))
    pki = DevelopmentPKI(os.path.dirname(os.path.abspath(ca_bundle)), ca_bundle)
    cert_url = serve_development_certificate(pki, host, port)
    try:
        body = json.dumps(
            capture_completed_event(
                order.number, order.total, order.currency, order.provider_checkout_id
            )
        ).encode()
    except ValueError as exc:
        raise NotConfigured(f"cannot express the order total: {exc}") from exc
    return sign_delivery(body, pki.signing_key, cert_url, webhook_id), body


def _loopback_cert_host(cert_hosts: list[str]) -> tuple[str, int]:
    for host, port in _parse_allowed(cert_hosts):
        if host in ("localhost", "127.0.0.1") and port != 443:
            return host, port
    raise NotConfigured(
        "certHosts has no loopback entry such as localhost:6546 for the development "
        "certificate server (development.ini has one)"
    )


class DevelopmentPKI:
    """Development root, TLS and signing certificates, created once in ``directory``."""

    def __init__(self, directory: str, ca_bundle: str):
        from cryptography.hazmat.primitives import serialization

        self._serialization = serialization
        self.directory = directory
        os.makedirs(directory, mode=0o700, exist_ok=True)
        self.root_key = self._key("dev-root.key")
        self.root = self._cert("dev-root.pem", self._make_root)
        self.tls_key = self._key("dev-tls.key")
        self.tls_chain_file = os.path.join(directory, "dev-tls.pem")
        self._cert(
            "dev-tls.pem",
            lambda: self._make_leaf(self.tls_key, [x509.DNSName("localhost")], ips=True),
        )
        self.signing_key = self._key("dev-signing.key")
        self.signing = self._cert(
            "dev-signing.pem",
            lambda: self._make_leaf(self.signing_key, [x509.DNSName(DEFAULT_CERT_SUBJECTS[0])]),
        )
        self.signing_chain = self.signing.public_bytes(serialization.Encoding.PEM)
        root_pem = self.root.public_bytes(serialization.Encoding.PEM)
        with open(certifi.where(), "rb") as fh:
            bundle = root_pem + b"\n" + fh.read()
        current = b""
        if os.path.exists(ca_bundle):
            with open(ca_bundle, "rb") as fh:
                current = fh.read()
        if current != bundle:
            with open(ca_bundle, "wb") as fh:
                fh.write(bundle)

    def _key(self, name: str) -> rsa.RSAPrivateKey:
        path = os.path.join(self.directory, name)
        ser = self._serialization
        if os.path.exists(path):
            with open(path, "rb") as fh:
                key = ser.load_pem_private_key(fh.read(), password=None)
            if isinstance(key, rsa.RSAPrivateKey):
                return key
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(
                key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption())
            )
        return key

    def _cert(self, name: str, make) -> x509.Certificate:
        """The certificate in ``name``, made anew when missing, expiring within a day,
        or no longer issued by the current root (the root was re-made)."""
        path = os.path.join(self.directory, name)
        now = dt.datetime.now(dt.UTC)
        if os.path.exists(path):
            with open(path, "rb") as fh:
                cert = x509.load_pem_x509_certificates(fh.read())[0]
            fresh = cert.not_valid_after_utc - now > dt.timedelta(days=1)
            root = getattr(self, "root", None)
            same_root = root is None or cert.issuer == root.subject and _signed_by(cert, root)
            if fresh and same_root:
                return cert
        cert = make()
        chain = [cert] if cert.issuer == cert.subject else [cert, self.root]
        with open(path, "wb") as fh:
            fh.write(b"".join(c.public_bytes(self._serialization.Encoding.PEM) for c in chain))
        return cert

    def _name(self, common_name: str) -> x509.Name:
        from cryptography.x509.oid import NameOID

        return x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "cmsshop development"),
                x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            ]
        )

    def _make_root(self) -> x509.Certificate:
        now = dt.datetime.now(dt.UTC)
        key = self.root_key
        return (
            x509.CertificateBuilder()
            .subject_name(self._name("cmsshop development root (never trust in production)"))
            .issuer_name(self._name("cmsshop development root (never trust in production)"))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + 5 * DEV_CERT_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .sign(key, hashes.SHA256())
        )

    def _make_leaf(self, key, names: list, ips: bool = False) -> x509.Certificate:
        from cryptography.x509.oid import ExtendedKeyUsageOID

        now = dt.datetime.now(dt.UTC)
        alt = list(names) + ([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))] if ips else [])
        return (
            x509.CertificateBuilder()
            .subject_name(self._name(names[0].value))
            .issuer_name(self.root.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + DEV_CERT_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.root_key.public_key()),
                critical=False,
            )
            .sign(self.root_key, hashes.SHA256())
        )


def _signed_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def serve_development_certificate(pki: DevelopmentPKI, host: str, port: int) -> str:
    """Serve the signing chain over https on loopback from a daemon thread of this
    process (it ends with the simulate-payment command); return its cert URL."""
    import ssl
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    digest = hashlib.sha256(pki.signing_chain).hexdigest()[:16]
    path = f"/v1/notifications/certs/CERT-dev-{digest}"
    chain = pki.signing_chain

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            found = self.path == path
            data = chain if found else b"not found"
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/x-pem-file")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    except OSError as exc:
        raise NotConfigured(
            f"cannot serve the development certificate on port {port}: {exc}"
        ) from exc
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.tls_chain_file, os.path.join(pki.directory, "dev-tls.key"))
    server.socket = context.wrap_socket(
        server.socket, server_side=True, do_handshake_on_connect=False
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"https://{host}:{port}{path}"
