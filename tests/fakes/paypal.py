"""A fake PayPal on loopback HTTPS, a test PKI, and a webhook signer for tests.

Independent of cmsshop's own code on purpose: events are signed here the way PayPal
signs them, so the provider's verification is checked against a second implementation.

* ``TestPKI``: a root CA (the only trusted root, written to ``ca_bundle``), an
  intermediate, a TLS certificate for localhost/127.0.0.1 and signing certificates for
  ``messageverificationcerts.paypal.com`` (valid, expired, or from a rogue root).
* ``FakePayPal``: serves certificates, ``POST /v1/oauth2/token``, ``GET
  /v2/payments/captures/{id}``, ``POST /v2/checkout/orders`` and ``POST
  /v2/checkout/orders/{id}/capture`` (``capture_requests`` records each capture with its
  PayPal-Request-Id; a repeated request id gets the first answer again, a second capture
  under another id a 422 ORDER_ALREADY_CAPTURED, like PayPal), ``POST
  /v2/payments/captures/{id}/refund`` (at most the capture less its refunds, else 422
  REFUND_AMOUNT_EXCEEDED / CAPTURE_FULLY_REFUNDED; a repeated PayPal-Request-Id gets the
  first answer; ``refund_calls`` records each call, ``refund_fail_status`` fails refund
  calls only, ``refund_event_of`` builds the PAYMENT.CAPTURE.REFUNDED event); counts
  every request it receives. An order is checked as PayPal checks it
  (``order_problems``): its amount, and with items their ``item_total`` and the breakdown
  arithmetic, or 422 UNPROCESSABLE_ENTITY naming the issue (AMOUNT_MISMATCH,
  ITEM_TOTAL_MISMATCH, ...).
* PayPal Subscriptions (v1): ``POST /v1/catalogs/products``, ``POST /v1/billing/plans``
  and ``GET /v1/billing/plans/{id}`` (checked as PayPal checks them: the cycle's
  interval_unit and its largest interval_count, a REGULAR tenure, a fixed price), ``POST
  /v1/billing/subscriptions`` (APPROVAL_PENDING with an ``approve`` link; a repeated
  PayPal-Request-Id gets the first answer, on every POST of this API), ``GET
  /v1/billing/subscriptions/{id}``, ``POST .../{id}/cancel`` (204; 422
  SUBSCRIPTION_STATUS_INVALID unless ACTIVE or SUSPENDED; ``cancel_fail_status`` fails
  it), ``GET .../{id}/transactions`` (start_time and end_time required, the payments
  between them) and ``GET /v1/payments/sale/{id}``. The lifecycle helpers (``approve``,
  ``renew``, ``fail``, ``suspend``, ``cancel``, ``expire``) change a subscription as
  PayPal would and return the webhook events PayPal would send, unsent; PayPal's clock
  is the subscription's billing dates (a renewal is dated at the previous
  ``next_billing_time``). ``POST /v1/payments/sale/{id}/refund`` refunds a sale as
  PayPal's v1 sales API does (the body's ``amount`` ``{total, currency}``, or ``{}`` for
  all of it; at most what is left, else 400 REFUND_EXCEEDED_TRANSACTION_AMOUNT /
  TRANSACTION_ALREADY_REFUNDED, a partly refunded sale's ``{}``
  FULL_REFUND_NOT_ALLOWED_AFTER_PARTIAL_REFUND; the sale and its transaction become
  partially_refunded / refunded); a repeated PayPal-Request-Id gets the first answer,
  ``refund_calls`` and ``refund_fail_status`` cover it as they cover capture refunds,
  ``sale_refund_state`` is what a new one is (completed, pending, failed) and
  ``sale_refund_event_of`` builds its PAYMENT.SALE.REFUNDED.
* ``sign_headers``: the five PAYPAL-* headers for a body.
"""

from __future__ import annotations

import base64
import calendar
import copy
import datetime as dt
import json
import secrets
import socket
import ssl
import threading
import time
import urllib.parse
import zlib
from decimal import Decimal, InvalidOperation
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SIGNING_NAME = "messageverificationcerts.paypal.com"
CLIENT_ID = "test-client-id"
CLIENT_SECRET = "test-client-secret"


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "cmsshop tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def make_ca(common_name, key, issuer=None, issuer_key=None, days=3650) -> x509.Certificate:
    now = utcnow()
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(issuer.subject if issuer else _name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if issuer is not None:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
            critical=False,
        )
    return builder.sign(issuer_key or key, hashes.SHA256())


def make_leaf(
    key,
    issuer,
    issuer_key,
    dns_names=(SIGNING_NAME,),
    ips=(),
    not_before=None,
    not_after=None,
) -> x509.Certificate:
    import ipaddress

    now = utcnow()
    not_before = not_before or now - dt.timedelta(days=1)
    not_after = not_after or now + dt.timedelta(days=365)
    san = [x509.DNSName(n) for n in dns_names] + [
        x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips
    ]
    return (
        x509.CertificateBuilder()
        .subject_name(_name(dns_names[0] if dns_names else ips[0]))
        .issuer_name(issuer.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
            critical=False,
        )
        .sign(issuer_key, hashes.SHA256())
    )


def pem(*certs: x509.Certificate) -> bytes:
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def key_pem(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


class SigningCert:
    """A signing key and the PEM chain a PAYPAL-CERT-URL would serve for it."""

    def __init__(self, key, chain_pem: bytes):
        self.key = key
        self.chain_pem = chain_pem


class TestPKI:
    """Root -> intermediate -> {TLS server cert, PayPal signing certs}; plus a rogue root."""

    __test__ = False  # not a test class, despite the name

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.root_key = new_key()
        self.root = make_ca("cmsshop test root", self.root_key)
        self.intermediate_key = new_key()
        self.intermediate = make_ca(
            "cmsshop test intermediate", self.intermediate_key, self.root, self.root_key
        )
        self.ca_bundle = self.directory / "test-root.pem"
        self.ca_bundle.write_bytes(pem(self.root))
        # TLS for the fake server, names for both ways tests reach loopback.
        self.tls_key = new_key()
        tls = make_leaf(
            self.tls_key,
            self.intermediate,
            self.intermediate_key,
            dns_names=("localhost",),
            ips=("127.0.0.1",),
        )
        self.tls_chain = self.directory / "tls-chain.pem"
        self.tls_chain.write_bytes(pem(tls, self.intermediate))
        self.tls_key_file = self.directory / "tls-key.pem"
        self.tls_key_file.write_bytes(key_pem(self.tls_key))
        self.signing = self.signing_cert()
        self.rogue_root_key = new_key()
        self.rogue_root = make_ca("rogue root", self.rogue_root_key)

    def signing_cert(self, not_before=None, not_after=None, dns_names=(SIGNING_NAME,), key=None):
        key = key or new_key()
        leaf = make_leaf(
            key,
            self.intermediate,
            self.intermediate_key,
            dns_names=dns_names,
            not_before=not_before,
            not_after=not_after,
        )
        return SigningCert(key, pem(leaf, self.intermediate))

    def rogue_signing_cert(self) -> SigningCert:
        """Right name, right shape, but issued by a root nobody trusts."""
        key = new_key()
        leaf = make_leaf(key, self.rogue_root, self.rogue_root_key)
        return SigningCert(key, pem(leaf))

    def self_signed_signing_cert(self) -> SigningCert:
        key = new_key()
        now = utcnow()
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(SIGNING_NAME))
            .issuer_name(_name(SIGNING_NAME))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(
                x509.SubjectAlternativeName([x509.DNSName(SIGNING_NAME)]), critical=False
            )
            .sign(key, hashes.SHA256())
        )
        return SigningCert(key, pem(cert))


def crc32_decimal(body: bytes) -> str:
    return str(zlib.crc32(body) & 0xFFFFFFFF)


def sign_headers(
    body: bytes,
    key,
    cert_url: str,
    webhook_id: str,
    *,
    transmission_id: str | None = None,
    transmission_time: str | None = None,
    algorithm_header: str = "SHA256withRSA",
    digest=None,
    crc: str | None = None,
) -> dict[str, str]:
    """The PAYPAL-* headers PayPal sends with a webhook delivery of ``body``."""
    transmission_id = transmission_id or f"{secrets.token_hex(4)}-{secrets.token_hex(8)}"
    transmission_time = transmission_time or utcnow().strftime("%Y-%m-%dT%H:%M:%SZ")
    crc = crc if crc is not None else crc32_decimal(body)
    message = f"{transmission_id}|{transmission_time}|{webhook_id}|{crc}".encode()
    signature = key.sign(message, padding.PKCS1v15(), digest or hashes.SHA256())
    return {
        "PAYPAL-TRANSMISSION-ID": transmission_id,
        "PAYPAL-TRANSMISSION-TIME": transmission_time,
        "PAYPAL-TRANSMISSION-SIG": base64.b64encode(signature).decode(),
        "PAYPAL-CERT-URL": cert_url,
        "PAYPAL-AUTH-ALGO": algorithm_header,
    }


# --- event payloads shaped like PayPal's --------------------------------------------------


def new_id(prefix: str = "") -> str:
    alphabet = "0123456789ABCDEFGHJKLMNPQRSTUVWXYZ"
    return prefix + "".join(secrets.choice(alphabet) for _ in range(17))


def event(event_type: str, resource: dict, resource_type: str, event_id: str | None = None):
    return {
        "id": event_id or new_id("WH-"),
        "event_version": "1.0",
        "create_time": utcnow().strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        "resource_type": resource_type,
        "resource_version": "2.0",
        "event_type": event_type,
        "summary": f"{event_type} (test)",
        "resource": resource,
    }


def capture_resource(capture_id, order_number, value="10.00", currency="EUR", status="COMPLETED"):
    return {
        "id": capture_id,
        "status": status,
        "amount": {"currency_code": currency, "value": value},
        "final_capture": True,
        "custom_id": order_number,
        "invoice_id": order_number,
        "supplementary_data": {"related_ids": {"order_id": new_id()}},
        "links": [
            {
                "href": f"https://api.paypal.com/v2/payments/captures/{capture_id}",
                "rel": "self",
                "method": "GET",
            }
        ],
    }


def capture_event(capture_id, order_number, value="10.00", currency="EUR", **kw):
    kind = kw.pop("event_type", "PAYMENT.CAPTURE.COMPLETED")
    status = kw.pop("status", "COMPLETED")
    resource = capture_resource(capture_id, order_number, value, currency, status)
    return event(kind, resource, "capture", **kw)


def refund_event(capture_id, order_number, value="10.00", currency="EUR", kind="REFUNDED", **kw):
    refund_id = new_id()
    resource = {
        "id": refund_id,
        "status": "COMPLETED",
        "amount": {"currency_code": currency, "value": value},
        "seller_payable_breakdown": {
            "total_refunded_amount": {"currency_code": currency, "value": value}
        },
        "invoice_id": order_number,
        "custom_id": order_number,
        "links": [
            {"href": f"https://api.paypal.com/v2/payments/refunds/{refund_id}", "rel": "self"},
            {"href": f"https://api.paypal.com/v2/payments/captures/{capture_id}", "rel": "up"},
        ],
    }
    return event(f"PAYMENT.CAPTURE.{kind}", resource, "refund", **kw)


def dispute_event(capture_id, order_number, value="10.00", currency="EUR", **kw):
    resource = {
        "dispute_id": new_id("PP-D-"),
        "reason": "MERCHANDISE_OR_SERVICE_NOT_RECEIVED",
        "status": "OPEN",
        "dispute_amount": {"currency_code": currency, "value": value},
        "disputed_transactions": [
            {
                "buyer_transaction_id": new_id(),
                "seller_transaction_id": capture_id,
                "custom": order_number,
                "invoice_number": order_number,
                "gross_amount": {"currency_code": currency, "value": value},
            }
        ],
    }
    return event("CUSTOMER.DISPUTE.CREATED", resource, "dispute", **kw)


def order_approved_event(paypal_order_id, order_number, value="10.00", currency="EUR", **kw):
    resource = {
        "id": paypal_order_id,
        "intent": "CAPTURE",
        "status": "APPROVED",
        "purchase_units": [
            {
                "reference_id": order_number,
                "custom_id": order_number,
                "invoice_id": order_number,
                "amount": {"currency_code": currency, "value": value},
            }
        ],
    }
    return event("CHECKOUT.ORDER.APPROVED", resource, "checkout-order", **kw)


WEBHOOK_ID = "WH-TEST-0001"
WALLET_ROUTE = "/api/webhooks/walletprovider"


def signed(pki, cert_url, body, webhook_id=WEBHOOK_ID, **kw):
    return {
        "Content-Type": "application/json",
        **sign_headers(body, pki.signing.key, cert_url, webhook_id, **kw),
    }


def body_of(payload: dict) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


# --- what PayPal checks in an order -----------------------------------------------------

# ISO 4217 exponents other than 2 among the currencies the tests use.
DECIMALS = {"JPY": 0, "HUF": 0, "KWD": 3}
BREAKDOWN_ADDED = ("item_total", "tax_total", "shipping", "handling", "insurance")
BREAKDOWN_TAKEN = ("shipping_discount", "discount")


def _money(obj, currency: str | None = None) -> Decimal | None:
    """A ``{"currency_code", "value"}`` PayPal accepts (in ``currency`` if given), as a
    Decimal; None when PayPal would refuse it."""
    if not isinstance(obj, dict) or not isinstance(obj.get("value"), str):
        return None
    code = obj.get("currency_code")
    if not isinstance(code, str) or (currency is not None and code != currency):
        return None
    try:
        value = Decimal(obj["value"])
    except InvalidOperation:
        return None
    if value < 0 or -value.as_tuple().exponent > DECIMALS.get(code, 2):
        return None
    return value


def order_problems(body: dict) -> list[dict]:
    """The ``details`` of PayPal's 422 for an Orders v2 create request (empty: none).
    The unit's ``amount.value`` must equal item_total + tax_total + shipping + handling
    + insurance - shipping_discount - discount when a breakdown is sent; ``item_total``
    must equal the sum of unit_amount x quantity over the items, and is required when
    items are sent."""
    units = body.get("purchase_units")
    if not isinstance(units, list) or not units or not isinstance(units[0], dict):
        return [{"field": "/purchase_units", "issue": "MISSING_REQUIRED_PARAMETER"}]
    unit = units[0]
    amount = unit.get("amount") or {}
    currency = amount.get("currency_code")
    value = _money(amount)
    if value is None:
        return [{"field": "/purchase_units/0/amount/value", "issue": "DECIMAL_PRECISION"}]
    breakdown = amount.get("breakdown")
    items = unit.get("items")
    if items is not None and not (isinstance(breakdown, dict) and "item_total" in breakdown):
        return [{"field": "/purchase_units/0/amount/breakdown", "issue": "ITEM_TOTAL_REQUIRED"}]
    if breakdown is None:
        return []
    parts = {}
    for name in (*BREAKDOWN_ADDED, *BREAKDOWN_TAKEN):
        if name in breakdown:
            parts[name] = _money(breakdown[name], currency)
            if parts[name] is None:
                return [
                    {
                        "field": f"/purchase_units/0/amount/breakdown/{name}",
                        "issue": "INVALID_PARAMETER_VALUE",
                    }
                ]
    problems = []
    if items is not None:
        total = Decimal(0)
        for index, item in enumerate(items):
            quantity = item.get("quantity") if isinstance(item, dict) else None
            price = _money(item.get("unit_amount"), currency) if isinstance(item, dict) else None
            if not isinstance(quantity, str) or not quantity.isdigit() or int(quantity) < 1:
                return [
                    {
                        "field": f"/purchase_units/0/items/{index}/quantity",
                        "issue": "INVALID_PARAMETER_VALUE",
                    }
                ]
            if price is None:
                return [
                    {
                        "field": f"/purchase_units/0/items/{index}/unit_amount",
                        "issue": "INVALID_PARAMETER_VALUE",
                    }
                ]
            if not str(item.get("name") or "").strip():
                return [
                    {
                        "field": f"/purchase_units/0/items/{index}/name",
                        "issue": "MISSING_REQUIRED_PARAMETER",
                    }
                ]
            total += price * int(quantity)
        if total != parts["item_total"]:
            problems.append(
                {
                    "field": "/purchase_units/0/amount/breakdown/item_total/value",
                    "issue": "ITEM_TOTAL_MISMATCH",
                }
            )
    expected = sum((parts.get(n, Decimal(0)) for n in BREAKDOWN_ADDED), Decimal(0)) - sum(
        (parts.get(n, Decimal(0)) for n in BREAKDOWN_TAKEN), Decimal(0)
    )
    if expected != value:
        problems.append({"field": "/purchase_units/0/amount/value", "issue": "AMOUNT_MISMATCH"})
    return problems


# --- PayPal Subscriptions: limits and dates -------------------------------------------------

SALE_COMPLETED = "PAYMENT.SALE.COMPLETED"
# PayPal's largest interval_count per interval_unit.
MAX_INTERVAL_COUNT = {"DAY": 365, "WEEK": 52, "MONTH": 12, "YEAR": 1}


def _stamp(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(value: str) -> dt.datetime | None:
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        return None
    return moment if moment.tzinfo is not None else None


def add_cycle(moment: dt.datetime, unit: str, count: int) -> dt.datetime:
    """``moment`` plus ``count`` ``unit``s in calendar terms (a month lands on the same
    day, or the month's last when it is shorter), as PayPal schedules billing."""
    if unit in ("DAY", "WEEK"):
        return moment + dt.timedelta(days=count * (1 if unit == "DAY" else 7))
    months = moment.year * 12 + moment.month - 1 + count * (12 if unit == "YEAR" else 1)
    year, month = divmod(months, 12)
    day = min(moment.day, calendar.monthrange(year, month + 1)[1])
    return moment.replace(year=year, month=month + 1, day=day)


def _not_found() -> dict:
    return {
        "name": "RESOURCE_NOT_FOUND",
        "details": [{"issue": "INVALID_RESOURCE_ID"}],
    }


def _invalid(field: str, issue: str) -> dict:
    return {"name": "INVALID_REQUEST", "details": [{"field": field, "issue": issue}]}


def _unprocessable(field: str, issue: str) -> dict:
    return {"name": "UNPROCESSABLE_ENTITY", "details": [{"field": field, "issue": issue}]}


# --- the fake server ---------------------------------------------------------------------


class FakePayPal:
    """PayPal's cert host and REST API on one loopback HTTPS port.

    ``fail_status`` makes every API answer (not certificates) that status; ``hang_seconds``
    delays every answer (for timeouts). ``requests`` lists (method, path) received.
    """

    def __init__(self, pki: TestPKI):
        self.pki = pki
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []
        self.bodies: list[dict] = []
        self.certs: dict[str, bytes] = {}
        self.redirects: dict[str, str] = {}
        self.captures: dict[str, dict] = {}
        self.orders: dict[str, dict] = {}
        self.idempotency: dict[str, str] = {}
        self.capture_requests: list[dict] = []
        self.capture_answers: dict[str, dict] = {}
        self.tokens: set[str] = set()
        self.refund_calls: list[dict] = []
        self.refunds: dict[str, dict] = {}
        self.refund_answers: dict[str, tuple[int, dict]] = {}
        self.refund_fail_status: int | None = None
        self.refund_status = "COMPLETED"
        self.fail_status: int | None = None
        self.cert_status: int | None = None
        self.hang_seconds = 0.0
        self.token_lifetime = 32400
        self._billing_state()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def do_GET(self):
                fake._handle(self, "GET")

            def do_POST(self):
                fake._handle(self, "POST")

        class QuietServer(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # clients that refuse our TLS certificate are expected in tests

        self.generation = 0
        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(pki.tls_chain), str(pki.tls_key_file))
        self.server.socket = context.wrap_socket(
            self.server.socket, server_side=True, do_handshake_on_connect=False
        )
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    # -- arranging ------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"https://localhost:{self.port}"

    @property
    def host_entry(self) -> str:
        """The allow-list entry for this server."""
        return f"localhost:{self.port}"

    def serve_cert(self, chain_pem: bytes, name: str | None = None) -> str:
        path = f"/v1/notifications/certs/CERT-{name or secrets.token_hex(8)}"
        self.certs[path] = chain_pem
        return self.base_url + path

    def add_capture(self, capture_id, order_number, value="10.00", currency="EUR", **fields):
        self.captures[capture_id] = {
            **capture_resource(capture_id, order_number, value, currency),
            **fields,
        }

    def add_order(self, order_id, order_number, value="10.00", currency="EUR") -> None:
        """A PayPal order as our checkout creates it (approved by the buyer, not captured)."""
        unit = {
            "reference_id": order_number,
            "custom_id": order_number,
            "invoice_id": order_number,
            "amount": {"currency_code": currency, "value": value},
        }
        self.orders[order_id] = {"intent": "CAPTURE", "purchase_units": [unit]}

    def captures_of(self, order_id: str) -> list[dict]:
        with self.lock:
            return [c for c in self.capture_requests if c["order"] == order_id]

    def count(self, prefix: str = "") -> int:
        with self.lock:
            return sum(1 for _, path in self.requests if path.startswith(prefix))

    def reset(self) -> None:
        with self.lock:
            self.generation += 1
            self.requests.clear()
            self.bodies.clear()
        self.certs.clear()
        self.redirects.clear()
        self.captures.clear()
        self.orders.clear()
        self.idempotency.clear()
        self.capture_requests.clear()
        self.capture_answers.clear()
        self.tokens.clear()
        self.refund_calls.clear()
        self.refunds.clear()
        self.refund_answers.clear()
        self.refund_fail_status = None
        self.refund_status = "COMPLETED"
        self.fail_status = None
        self.cert_status = None
        self.hang_seconds = 0.0
        self.token_lifetime = 32400
        self._billing_state()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def config(self, webhook_id: str = "WH-TEST-0001", **overrides) -> dict:
        """A walletprovider config pointing at this fake and trusting the test root."""
        return {
            "webhookId": webhook_id,
            "clientId": CLIENT_ID,
            "clientSecret": CLIENT_SECRET,
            "apiBase": self.base_url,
            "certHosts": [self.host_entry],
            "caBundle": str(self.pki.ca_bundle),
            **overrides,
        }

    # -- serving --------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        path = handler.path.split("?", 1)[0]
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        with self.lock:
            self.requests.append((method, path))
            generation = self.generation
        if self.hang_seconds:
            time.sleep(self.hang_seconds)
            if generation != self.generation:
                return None  # reset() while hanging: this answer belongs to an earlier test
        if method == "GET" and path in self.redirects:
            handler.send_response(302)
            handler.send_header("Location", self.redirects[path])
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return None
        if method == "GET" and path in self.certs:
            if self.cert_status:
                return self._send(handler, self.cert_status, {"error": "nope"})
            return self._send_raw(handler, 200, self.certs[path], "application/x-pem-file")
        if path.startswith("/v1/notifications/certs/"):
            return self._send(handler, 404, {"name": "RESOURCE_NOT_FOUND"})
        if self.fail_status:
            return self._send(handler, self.fail_status, {"name": "INTERNAL_SERVICE_ERROR"})
        if method == "POST" and path == "/v1/oauth2/token":
            return self._token(handler, raw)
        if not self._authorised(handler):
            return self._send(handler, 401, {"error": "invalid_token"})
        body = json.loads(raw) if raw else {}
        with self.lock:
            self.bodies.append({"path": path, "body": body, "headers": dict(handler.headers)})
        if method == "GET" and path.startswith("/v2/payments/captures/"):
            capture = self.captures.get(path.rsplit("/", 1)[1])
            if capture is None:
                return self._send(handler, 404, {"name": "RESOURCE_NOT_FOUND"})
            return self._send(handler, 200, capture)
        if method == "POST" and path == "/v2/checkout/orders":
            return self._create_order(handler, body)
        if (
            method == "POST"
            and path.startswith("/v2/payments/captures/")
            and path.endswith("/refund")
        ):
            return self._refund(
                handler, path.split("/")[4], body, handler.headers.get("PayPal-Request-Id")
            )
        if (
            method == "POST"
            and path.startswith("/v2/checkout/orders/")
            and path.endswith("/capture")
        ):
            return self._capture_order(
                handler, path.split("/")[4], handler.headers.get("PayPal-Request-Id")
            )
        if path.startswith(("/v1/catalogs/", "/v1/billing/", "/v1/payments/sale/")):
            return self._billing(handler, method, path, body)
        return self._send(handler, 404, {"name": "NOT_FOUND"})

    def _token(self, handler, raw: bytes) -> None:
        expected = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
        if handler.headers.get("Authorization") != f"Basic {expected}":
            return self._send(handler, 401, {"error": "invalid_client"})
        if b"grant_type=client_credentials" not in raw:
            return self._send(handler, 400, {"error": "unsupported_grant_type"})
        token = "A21AA" + secrets.token_hex(16)
        self.tokens.add(token)
        return self._send(
            handler,
            200,
            {
                "scope": "https://uri.paypal.com/services/payments/payment",
                "access_token": token,
                "token_type": "Bearer",
                "app_id": "APP-TEST",
                "expires_in": self.token_lifetime,
            },
        )

    def _authorised(self, handler) -> bool:
        value = handler.headers.get("Authorization", "")
        return value.startswith("Bearer ") and value[7:] in self.tokens

    def _create_order(self, handler, body: dict) -> None:
        problems = order_problems(body)
        if problems:
            return self._send(
                handler,
                422,
                {
                    "name": "UNPROCESSABLE_ENTITY",
                    "message": "The requested action could not be performed.",
                    "details": problems,
                },
            )
        request_id = handler.headers.get("PayPal-Request-Id")
        if request_id and request_id in self.idempotency:
            order_id = self.idempotency[request_id]
        else:
            order_id = new_id()
            self.orders[order_id] = body
            if request_id:
                self.idempotency[request_id] = order_id
        return self._send(
            handler,
            200,
            {
                "id": order_id,
                "status": "PAYER_ACTION_REQUIRED",
                "links": [
                    {
                        "href": f"https://api.paypal.com/v2/checkout/orders/{order_id}",
                        "rel": "self",
                        "method": "GET",
                    },
                    {
                        "href": f"https://www.paypal.com/checkoutnow?token={order_id}",
                        "rel": "payer-action",
                        "method": "GET",
                    },
                ],
            },
        )

    def _capture_order(self, handler, order_id: str, request_id: str | None) -> None:
        with self.lock:
            self.capture_requests.append({"order": order_id, "requestId": request_id})
        order = self.orders.get(order_id)
        if order is None:
            return self._send(handler, 404, {"name": "RESOURCE_NOT_FOUND"})
        if request_id and request_id in self.capture_answers:
            return self._send(handler, 201, self.capture_answers[request_id])
        if "_capture_id" in order:
            return self._send(
                handler,
                422,
                {
                    "name": "UNPROCESSABLE_ENTITY",
                    "details": [{"issue": "ORDER_ALREADY_CAPTURED"}],
                },
            )
        unit = order["purchase_units"][0]
        capture_id = order.setdefault("_capture_id", new_id())
        self.add_capture(
            capture_id,
            unit["custom_id"],
            unit["amount"]["value"],
            unit["amount"]["currency_code"],
        )
        answer = {
            "id": order_id,
            "status": "COMPLETED",
            "purchase_units": [
                {"payments": {"captures": [self.captures[capture_id]]}},
            ],
        }
        if request_id:
            self.capture_answers[request_id] = answer
        return self._send(handler, 201, answer)

    # -- refunds --------------------------------------------------------------------------

    def refunded_of(self, capture_id: str) -> Decimal:
        return sum(
            (
                Decimal(r["amount"]["value"])
                for r in self.refunds.values()
                if r["_capture"] == capture_id
            ),
            Decimal(0),
        )

    def refund_event_of(self, refund_id: str) -> dict:
        """The PAYMENT.CAPTURE.REFUNDED event PayPal sends for ``refund_id``: the refund,
        its ``up`` link naming the capture, the capture's total refunded so far."""
        refund = self.refunds[refund_id]
        capture = self.captures[refund["_capture"]]
        currency = refund["amount"]["currency_code"]
        resource = {k: v for k, v in refund.items() if not k.startswith("_")}
        resource["seller_payable_breakdown"] = {
            "total_refunded_amount": {
                "currency_code": currency,
                "value": f"{self.refunded_of(capture['id']):.2f}",
            }
        }
        resource["custom_id"] = capture.get("custom_id")
        return event("PAYMENT.CAPTURE.REFUNDED", resource, "refund")

    def _refund(self, handler, capture_id: str, body: dict, request_id: str | None) -> None:
        with self.lock:
            self.refund_calls.append({"capture": capture_id, "requestId": request_id, "body": body})
            if self.refund_fail_status:
                status = self.refund_fail_status
                return self._send(handler, status, {"name": "INTERNAL_SERVER_ERROR"})
            if request_id and request_id in self.refund_answers:
                return self._send(handler, *self.refund_answers[request_id])
            status, answer = self._new_refund(capture_id, body)
            if request_id and status < 500:
                self.refund_answers[request_id] = (status, answer)
        return self._send(handler, status, answer)

    def _new_refund(self, capture_id: str, body: dict) -> tuple[int, dict]:
        def refused(issue: str) -> tuple[int, dict]:
            return 422, {"name": "UNPROCESSABLE_ENTITY", "details": [{"issue": issue}]}

        capture = self.captures.get(capture_id)
        if capture is None:
            return 404, {
                "name": "RESOURCE_NOT_FOUND",
                "details": [{"issue": "INVALID_RESOURCE_ID"}],
            }
        captured = Decimal(capture["amount"]["value"])
        currency = capture["amount"]["currency_code"]
        left = captured - self.refunded_of(capture_id)
        if left <= 0:
            return refused("CAPTURE_FULLY_REFUNDED")
        amount = body.get("amount")
        value = _money(amount, currency) if amount is not None else left
        if value is None or value <= 0:
            return refused("INVALID_AMOUNT" if amount is None else "INVALID_CURRENCY_CODE")
        if value > left:
            return refused("REFUND_AMOUNT_EXCEEDED")
        refund_id = new_id()
        refund = {
            "id": refund_id,
            "status": self.refund_status,
            "amount": {"currency_code": currency, "value": f"{value:.2f}"},
            "note_to_payer": body.get("note_to_payer"),
            "links": [
                {"href": f"https://api.paypal.com/v2/payments/refunds/{refund_id}", "rel": "self"},
                {"href": f"https://api.paypal.com/v2/payments/captures/{capture_id}", "rel": "up"},
            ],
            "_capture": capture_id,
        }
        self.refunds[refund_id] = refund
        return 201, {k: v for k, v in refund.items() if not k.startswith("_")}

    # -- subscriptions (Subscriptions API v1) ----------------------------------------------

    def _billing_state(self) -> None:
        self.products: dict[str, dict] = {}
        self.plans: dict[str, dict] = {}
        self.subscriptions: dict[str, dict] = {}
        self.sales: dict[str, dict] = {}
        # Each subscription's payments, as its transactions list shows them.
        self.transactions: dict[str, list[dict]] = {}
        # Sales the transactions list does not show (yet): PayPal's list may lag.
        self.unlisted: set[str] = set()
        self.billing_answers: dict[tuple[str, str], tuple[int, dict]] = {}
        self.cancel_calls: list[dict] = []
        # Refunds of sales (POST /v1/payments/sale/{id}/refund), by refund id.
        self.sale_refunds: dict[str, dict] = {}
        self.sale_refund_state = "completed"
        self.cancel_fail_status: int | None = None  # fails cancel calls only
        # Events PayPal sends after a change asked through the API (a cancellation).
        self.held: list[dict] = []
        # Which cycle executions carry a current_pricing_scheme_version: "priced" as
        # PayPal's published example writes them; "never" and "always" for a PayPal that
        # writes them otherwise (the plan's own cycles still tell a free trial).
        self.pricing_versions = "priced"

    def _versioned(self, cycle: dict) -> bool:
        """Whether the execution of ``cycle`` shows a pricing version (pricing_versions)."""
        if self.pricing_versions == "priced":
            return bool(cycle.get("pricing_scheme"))
        return self.pricing_versions == "always"

    def _billing(self, handler, method: str, path: str, body: dict) -> None:
        parts = path.strip("/").split("/")
        request_id = handler.headers.get("PayPal-Request-Id")
        if method == "POST" and request_id and (path, request_id) in self.billing_answers:
            return self._send(handler, *self.billing_answers[(path, request_id)])
        answer = None
        if method == "POST" and path == "/v1/catalogs/products":
            answer = self._create_product(body)
        elif method == "POST" and path == "/v1/billing/plans":
            answer = self._create_plan(body)
        elif method == "GET" and parts[:3] == ["v1", "billing", "plans"] and len(parts) == 4:
            plan = self.plans.get(parts[3])
            answer = (200, plan) if plan else (404, _not_found())
        elif method == "POST" and path == "/v1/billing/subscriptions":
            answer = self._create_subscription(body)
        elif parts[:3] == ["v1", "billing", "subscriptions"] and len(parts) >= 4:
            sub = self.subscriptions.get(parts[3])
            if sub is None:
                answer = (404, _not_found())
            elif method == "GET" and len(parts) == 4:
                answer = (200, self._public(sub))
            elif method == "POST" and parts[4:] == ["cancel"]:
                answer = self._cancel(sub, body)
            elif method == "GET" and parts[4:] == ["transactions"]:
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(handler.path).query)
                answer = self._list_transactions(sub, query)
        elif method == "GET" and parts[:3] == ["v1", "payments", "sale"] and len(parts) == 4:
            sale = self.sales.get(parts[3])
            answer = (200, sale) if sale else (404, _not_found())
        elif (
            method == "POST" and parts[:3] == ["v1", "payments", "sale"] and parts[4:] == ["refund"]
        ):
            with self.lock:
                self.refund_calls.append({"sale": parts[3], "requestId": request_id, "body": body})
            if self.refund_fail_status:
                return self._send(
                    handler, self.refund_fail_status, {"name": "INTERNAL_SERVICE_ERROR"}
                )
            answer = self._refund_sale(parts[3], body)
        if answer is None:
            return self._send(handler, 404, {"name": "NOT_FOUND"})
        if method == "POST" and request_id and answer[0] < 500:
            self.billing_answers[(path, request_id)] = answer
        return self._send(handler, *answer)

    def sale_refunded_of(self, sale_id: str) -> Decimal:
        return sum(
            (
                Decimal(r["amount"]["total"])
                for r in self.sale_refunds.values()
                if r["sale_id"] == sale_id and r["state"] != "failed"
            ),
            Decimal(0),
        )

    def _refund_sale(self, sale_id: str, body: dict) -> tuple[int, dict]:
        """PayPal's v1 sale refund (see the module docstring)."""

        def refused(name: str, message: str) -> tuple[int, dict]:
            return 400, {"name": name, "message": message, "debug_id": new_id()[:13]}

        sale = self.sales.get(sale_id)
        if sale is None:
            return 404, {"name": "INVALID_RESOURCE_ID", "message": "Resource not found"}
        total, currency = Decimal(sale["amount"]["total"]), sale["amount"]["currency"]
        left = total - self.sale_refunded_of(sale_id)
        if left <= 0:
            return refused(
                "TRANSACTION_ALREADY_REFUNDED", "Requested transaction has already been refunded"
            )
        amount = body.get("amount")
        if amount is None:
            if left < total:
                return refused(
                    "FULL_REFUND_NOT_ALLOWED_AFTER_PARTIAL_REFUND",
                    "Full refund not allowed after partial refund",
                )
            value = left
        else:
            if not isinstance(amount, dict) or amount.get("currency") != currency:
                return refused("CURRENCY_MISMATCH", "Refund currency must match the sale's")
            value = _money({"currency_code": currency, "value": amount.get("total")}, currency)
            if value is None or value <= 0:
                return refused("VALIDATION_ERROR", "Invalid request - see details")
        if value > left:
            return refused(
                "REFUND_EXCEEDED_TRANSACTION_AMOUNT", "Refund request exceeds transaction amount"
            )
        refund_id = new_id()
        now = _stamp(utcnow())
        refund = {
            "id": refund_id,
            "state": self.sale_refund_state,
            "amount": {"total": f"{value:.2f}", "currency": currency},
            "sale_id": sale_id,
            "parent_payment": "PAYID-" + new_id()[:12],
            "description": body.get("description"),
            "create_time": now,
            "update_time": now,
            "links": [
                {"href": f"https://api.paypal.com/v1/payments/refund/{refund_id}", "rel": "self"},
                {"href": f"https://api.paypal.com/v1/payments/sale/{sale_id}", "rel": "sale"},
            ],
        }
        self.sale_refunds[refund_id] = refund
        if refund["state"] != "failed":
            whole = self.sale_refunded_of(sale_id) >= total
            sale["state"] = "refunded" if whole else "partially_refunded"
            for transactions in self.transactions.values():
                for txn in transactions:
                    if txn["id"] == sale_id:
                        txn["status"] = "REFUNDED" if whole else "PARTIALLY_REFUNDED"
        return 201, copy.deepcopy(refund)

    def sale_refund_event_of(self, refund_id: str) -> dict:
        """The PAYMENT.SALE.REFUNDED event PayPal sends for ``refund_id``: the refund, its
        sale, the sale's total refunded so far, the subscription's order number as
        ``custom``."""
        refund = copy.deepcopy(self.sale_refunds[refund_id])
        sale = self.sales[refund["sale_id"]]
        refund["total_refunded_amount"] = {
            "value": f"{self.sale_refunded_of(sale['id']):.2f}",
            "currency": refund["amount"]["currency"],
        }
        if sale.get("custom"):
            refund["custom"] = sale["custom"]
        return event("PAYMENT.SALE.REFUNDED", refund, "refund")

    def _create_product(self, body: dict) -> tuple[int, dict]:
        name = body.get("name")
        if not isinstance(name, str) or not 1 <= len(name) <= 127:
            return 400, _invalid("/name", "MISSING_REQUIRED_PARAMETER")
        if body.get("type") not in ("PHYSICAL", "DIGITAL", "SERVICE"):
            return 400, _invalid("/type", "INVALID_PARAMETER_VALUE")
        product_id = "PROD-" + new_id()
        now = _stamp(utcnow())
        self.products[product_id] = {
            "id": product_id,
            "name": name,
            "type": body["type"],
            "category": body.get("category"),
            "create_time": now,
            "update_time": now,
        }
        return 201, self.products[product_id]

    def _create_plan(self, body: dict) -> tuple[int, dict]:
        if body.get("product_id") not in self.products:
            return 422, _unprocessable("/product_id", "INVALID_PRODUCT_ID")
        cycles = body.get("billing_cycles")
        if (
            not isinstance(cycles, list)
            or len(cycles) not in (1, 2)
            or not all(isinstance(c, dict) for c in cycles)
        ):
            return 400, _invalid("/billing_cycles", "MISSING_REQUIRED_PARAMETER")
        if len(cycles) == 2:
            # A TRIAL cycle first: one cycle, sequence 1, free (no pricing scheme) or at
            # a price of its own (a valid fixed_price), then the REGULAR one, sequence 2.
            trial, cycles = cycles[0], cycles[1:]
            scheme = trial.get("pricing_scheme")
            priced = scheme is None or _money((scheme or {}).get("fixed_price")) is not None
            frequency = trial.get("frequency") or {}
            unit, count = frequency.get("interval_unit"), frequency.get("interval_count", 1)
            if (
                trial.get("tenure_type") != "TRIAL"
                or trial.get("sequence") != 1
                or trial.get("total_cycles") != 1
                or not priced
                or unit not in MAX_INTERVAL_COUNT
                or not isinstance(count, int)
                or not 1 <= count <= MAX_INTERVAL_COUNT[unit]
            ):
                return 400, _invalid("/billing_cycles/0", "INVALID_PARAMETER_VALUE")
            if cycles[0].get("sequence") != 2:
                return 400, _invalid("/billing_cycles/1/sequence", "INVALID_PARAMETER_VALUE")
            cycles = [trial, *cycles]
        cycle = cycles[-1]
        frequency = cycle.get("frequency") or {}
        unit, count = frequency.get("interval_unit"), frequency.get("interval_count", 1)
        if unit not in MAX_INTERVAL_COUNT:
            return 400, _invalid(
                "/billing_cycles/0/frequency/interval_unit", "INVALID_PARAMETER_VALUE"
            )
        if not isinstance(count, int) or not 1 <= count <= MAX_INTERVAL_COUNT[unit]:
            return 422, _unprocessable(
                "/billing_cycles/0/frequency/interval_count", "INVALID_INTERVAL_COUNT"
            )
        if cycle.get("tenure_type") != "REGULAR" or cycle.get("total_cycles") != 0:
            return 400, _invalid("/billing_cycles/0/tenure_type", "INVALID_PARAMETER_VALUE")
        price = (cycle.get("pricing_scheme") or {}).get("fixed_price")
        if _money(price) is None:
            return 400, _invalid(
                "/billing_cycles/0/pricing_scheme/fixed_price", "INVALID_PARAMETER_VALUE"
            )
        plan_id = "P-" + new_id() + "XYZ"
        now = _stamp(utcnow())
        self.plans[plan_id] = {
            "id": plan_id,
            "product_id": body["product_id"],
            "name": body.get("name"),
            "status": body.get("status", "ACTIVE"),
            "billing_cycles": cycles,
            "payment_preferences": body.get("payment_preferences") or {},
            "create_time": now,
            "update_time": now,
        }
        return 201, self.plans[plan_id]

    def _create_subscription(self, body: dict) -> tuple[int, dict]:
        plan = self.plans.get(body.get("plan_id"))
        if plan is None:
            return 422, _unprocessable("/plan_id", "INVALID_RESOURCE_ID")
        if plan["status"] != "ACTIVE":
            return 422, _unprocessable("/plan_id", "PLAN_STATUS_INVALID")
        context = body.get("application_context") or {}
        if not all(
            str(context.get(k, "")).startswith("http") for k in ("return_url", "cancel_url")
        ):
            return 400, _invalid("/application_context/return_url", "INVALID_PARAMETER_VALUE")
        sub_id = "I-" + new_id()[:12]
        now = _stamp(utcnow())
        token = "BA-" + new_id()
        sub = {
            "id": sub_id,
            "plan_id": plan["id"],
            "status": "APPROVAL_PENDING",
            "status_update_time": now,
            "custom_id": body.get("custom_id"),
            "quantity": "1",
            "subscriber": dict(body.get("subscriber") or {}),
            "create_time": now,
            "update_time": now,
            "plan_overridden": False,
            "links": [
                {
                    "href": f"https://www.paypal.com/webapps/billing/subscriptions?ba_token={token}",
                    "rel": "approve",
                    "method": "GET",
                },
                {
                    "href": f"https://api.paypal.com/v1/billing/subscriptions/{sub_id}",
                    "rel": "edit",
                    "method": "PATCH",
                },
                {
                    "href": f"https://api.paypal.com/v1/billing/subscriptions/{sub_id}",
                    "rel": "self",
                    "method": "GET",
                },
            ],
        }
        self.subscriptions[sub_id] = sub
        self.transactions[sub_id] = []
        return 201, self._public(sub)

    @staticmethod
    def _public(sub: dict) -> dict:
        return {k: copy.deepcopy(v) for k, v in sub.items() if not k.startswith("_")}

    def _cancel(self, sub: dict, body: dict) -> tuple[int, dict | None]:
        reason = body.get("reason")
        self.cancel_calls.append({"subscription": sub["id"], "reason": reason})
        if self.cancel_fail_status:
            return self.cancel_fail_status, {"name": "INTERNAL_SERVICE_ERROR"}
        if not isinstance(reason, str) or not 1 <= len(reason) <= 128:
            return 400, _invalid("/reason", "MISSING_REQUIRED_PARAMETER")
        if sub["status"] not in ("ACTIVE", "SUSPENDED"):
            return 422, _unprocessable("", "SUBSCRIPTION_STATUS_INVALID")
        self.held.extend(self.cancel(sub["id"]))
        return 204, None

    def _list_transactions(self, sub: dict, query: dict) -> tuple[int, dict]:
        start = _parse(query.get("start_time", [""])[0])
        end = _parse(query.get("end_time", [""])[0])
        if start is None or end is None or end < start:
            return 400, _invalid("/start_time", "INVALID_PARAMETER_SYNTAX")
        listed = [
            copy.deepcopy(txn)
            for txn in self.transactions.get(sub["id"], [])
            if txn["id"] not in self.unlisted and start <= _parse(txn["time"]) <= end
        ]
        return 200, {"transactions": listed, "total_items": len(listed), "total_pages": 1}

    # -- the subscription's life, as PayPal runs it ----------------------------------------

    def the_subscription(self) -> dict:
        (sub,) = self.subscriptions.values()
        return sub

    def _current(self, sub: dict) -> tuple[dict, dict | None]:
        """(the plan's cycle PayPal bills next, its execution): the first whose cycles
        are not all completed (the REGULAR one never is: total_cycles 0)."""
        cycles = self.plans[sub["plan_id"]]["billing_cycles"]
        executions = (sub.get("billing_info") or {}).get("cycle_executions") or []
        for cycle, execution in zip(cycles, executions, strict=False):
            if (
                not execution["total_cycles"]
                or execution["cycles_completed"] < execution["total_cycles"]
            ):
                return cycle, execution
        return cycles[-1], None

    def _cycle(self, sub: dict) -> tuple[str, int, str, str]:
        """(interval_unit, interval_count, price value, currency) of the cycle billed
        next: a priced TRIAL cycle's until it ran, then the REGULAR one's."""
        cycle, _ = self._current(sub)
        if not cycle.get("pricing_scheme"):
            cycle = self.plans[sub["plan_id"]]["billing_cycles"][-1]
        price = cycle["pricing_scheme"]["fixed_price"]
        frequency = cycle["frequency"]
        unit, count = frequency["interval_unit"], frequency.get("interval_count", 1)
        return unit, count, price["value"], price["currency_code"]

    def _subscription_event(self, kind: str, sub: dict) -> dict:
        return event(kind, self._public(sub), "subscription")

    def _pay(
        self,
        sub: dict,
        moment: dt.datetime,
        *,
        with_agreement: bool = True,
        with_custom: bool = True,
        listed: bool = True,
    ) -> dict:
        """A completed sale of the price of the cycle billed next at ``moment`` (a
        priced TRIAL cycle's first, then the REGULAR one's): the event PayPal sends for
        it (with or without ``billing_agreement_id``)."""
        unit, count, value, currency = self._cycle(sub)
        _, execution = self._current(sub)
        sale_id = new_id()
        stamp = _stamp(moment)
        sale = {
            "id": sale_id,
            "state": "completed",
            "amount": {"total": value, "currency": currency, "details": {"subtotal": value}},
            "payment_mode": "INSTANT_TRANSFER",
            "protection_eligibility": "ELIGIBLE",
            "transaction_fee": {"currency": currency, "value": "0.50"},
            "create_time": stamp,
            "update_time": stamp,
            "links": [
                {"href": f"https://api.paypal.com/v1/payments/sale/{sale_id}", "rel": "self"},
            ],
        }
        if with_agreement:
            sale["billing_agreement_id"] = sub["id"]
        if with_custom and sub.get("custom_id"):
            sale["custom"] = sub["custom_id"]
        self.sales[sale_id] = sale
        self.transactions[sub["id"]].append(
            {
                "id": sale_id,
                "status": "COMPLETED",
                "amount_with_breakdown": {
                    "gross_amount": {"currency_code": currency, "value": value},
                    "fee_amount": {"currency_code": currency, "value": "0.50"},
                    "net_amount": {
                        "currency_code": currency,
                        "value": f"{Decimal(value) - Decimal('0.50'):.2f}",
                    },
                },
                "payer_email": sub["subscriber"].get("email_address"),
                "payer_name": {"given_name": "Test", "surname": "Buyer"},
                "time": stamp,
            }
        )
        if not listed:
            self.unlisted.add(sale_id)
        billing = sub["billing_info"]
        billing["last_payment"] = {
            "amount": {"currency_code": currency, "value": value},
            "time": stamp,
        }
        billing["next_billing_time"] = _stamp(add_cycle(moment, unit, count))
        billing["failed_payments_count"] = 0
        billing["outstanding_balance"] = {"currency_code": currency, "value": "0.0"}
        (execution or billing["cycle_executions"][-1])["cycles_completed"] += 1
        sub["update_time"] = _stamp(utcnow())
        return event(SALE_COMPLETED, copy.deepcopy(sale), "sale")

    def approve(self, sub_id: str, payer_id: str | None = None, **sale_kw) -> list[dict]:
        """The buyer approves on PayPal's page; PayPal activates the subscription and
        takes the first payment at once (``sale_kw`` as for ``renew``): a plan with a
        priced TRIAL cycle takes that cycle's price, and the REGULAR price at every
        ``renew`` after. Returns [ACTIVATED, SALE.COMPLETED], unsent. A plan with a
        free trial takes nothing: its TRIAL cycle runs (completed at once, as PayPal
        counts a free cycle), the next billing time is the trial's end, and ``renew``
        takes the first payment there.
        Returns [ACTIVATED] then."""
        sub = self.subscriptions[sub_id]
        if sub["status"] != "APPROVAL_PENDING":
            raise ValueError(f"{sub_id} is {sub['status']}")
        now = utcnow().replace(microsecond=0)
        _, _, _, currency = self._cycle(sub)
        sub["subscriber"].update(
            payer_id=payer_id or new_id()[:13],
            name={"given_name": "Test", "surname": "Buyer"},
        )
        sub.update(status="ACTIVE", status_update_time=_stamp(now), start_time=_stamp(now))
        cycles = self.plans[sub["plan_id"]]["billing_cycles"]
        sub["billing_info"] = {
            "outstanding_balance": {"currency_code": currency, "value": "0.0"},
            "cycle_executions": [
                {
                    "tenure_type": cycle["tenure_type"],
                    "sequence": cycle["sequence"],
                    # A free cycle counts as completed at once; a priced one when paid.
                    "cycles_completed": 0 if cycle.get("pricing_scheme") else 1,
                    "cycles_remaining": 0,
                    "total_cycles": cycle["total_cycles"],
                    # As PayPal writes it: only a cycle with a price has a pricing version.
                    **({"current_pricing_scheme_version": 1} if self._versioned(cycle) else {}),
                }
                for cycle in cycles
            ],
            "failed_payments_count": 0,
        }
        if not cycles[0].get("pricing_scheme"):
            frequency = cycles[0]["frequency"]
            ends = add_cycle(now, frequency["interval_unit"], frequency["interval_count"])
            sub["billing_info"]["next_billing_time"] = _stamp(ends)
            return [self._subscription_event("BILLING.SUBSCRIPTION.ACTIVATED", sub)]
        activated = self._subscription_event("BILLING.SUBSCRIPTION.ACTIVATED", sub)
        return [activated, self._pay(sub, now, **sale_kw)]

    def renew(self, sub_id: str, **sale_kw) -> list[dict]:
        """The payment at the subscription's next billing time, which moves on by one
        cycle (``sale_kw``: ``with_agreement=False`` leaves out billing_agreement_id, as
        PayPal sometimes does; ``with_custom``, ``listed``). Returns [SALE.COMPLETED]."""
        sub = self.subscriptions[sub_id]
        if sub["status"] not in ("ACTIVE", "SUSPENDED"):
            raise ValueError(f"{sub_id} is {sub['status']}")
        due = _parse(sub["billing_info"]["next_billing_time"])
        sub["status"] = "ACTIVE"
        return [self._pay(sub, due, **sale_kw)]

    def fail(self, sub_id: str) -> list[dict]:
        """The payment at the next billing time is declined: failed_payments_count + 1,
        the amount outstanding, PayPal retries. Returns [PAYMENT.FAILED]."""
        sub = self.subscriptions[sub_id]
        _, _, value, currency = self._cycle(sub)
        billing = sub["billing_info"]
        billing["failed_payments_count"] += 1
        billing["outstanding_balance"] = {"currency_code": currency, "value": value}
        billing["last_failed_payment"] = {
            "amount": {"currency_code": currency, "value": value},
            "time": billing["next_billing_time"],
            "reason_code": "PAYMENT_DENIED",
        }
        self.transactions[sub_id].append(
            {
                "id": new_id(),
                "status": "DECLINED",
                "amount_with_breakdown": {
                    "gross_amount": {"currency_code": currency, "value": value}
                },
                "time": billing["next_billing_time"],
            }
        )
        return [self._subscription_event("BILLING.SUBSCRIPTION.PAYMENT.FAILED", sub)]

    def _set_status(self, sub_id: str, status: str, kind: str) -> list[dict]:
        sub = self.subscriptions[sub_id]
        sub["status"] = status
        sub["status_update_time"] = sub["update_time"] = _stamp(utcnow())
        if status in ("CANCELLED", "EXPIRED"):
            # PayPal no longer states a next billing time once it will not bill again.
            sub["billing_info"].pop("next_billing_time", None)
        return [self._subscription_event(kind, sub)]

    def suspend(self, sub_id: str) -> list[dict]:
        """PayPal suspends it (its failed payments reached the plan's threshold)."""
        return self._set_status(sub_id, "SUSPENDED", "BILLING.SUBSCRIPTION.SUSPENDED")

    def cancel(self, sub_id: str) -> list[dict]:
        return self._set_status(sub_id, "CANCELLED", "BILLING.SUBSCRIPTION.CANCELLED")

    def expire(self, sub_id: str) -> list[dict]:
        return self._set_status(sub_id, "EXPIRED", "BILLING.SUBSCRIPTION.EXPIRED")

    def state_event(self, sub_id: str, kind: str = "BILLING.SUBSCRIPTION.UPDATED") -> dict:
        """An event about the subscription as it is now (to deliver later, or stale)."""
        return self._subscription_event(kind, self.subscriptions[sub_id])

    def show(self, sale_id: str) -> None:
        """The transactions list catches up with a sale it did not show."""
        self.unlisted.discard(sale_id)

    def _send(self, handler, status: int, body: dict | None) -> None:
        if body is None:
            return self._send_raw(handler, status, b"", "application/json")
        self._send_raw(handler, status, json.dumps(body).encode(), "application/json")

    def _send_raw(self, handler, status: int, data: bytes, content_type: str) -> None:
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", content_type)
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass


def refused_url() -> str:
    """An https URL on loopback where nothing listens (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"https://127.0.0.1:{port}"
