"""The wallet provider (PayPal scheme) on its own: verification with real RSA signatures
and a real certificate chain fetched over loopback HTTPS, event interpretation, and the
REST calls (OAuth, capture confirmation, order creation) against a fake PayPal API."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from cryptography.hazmat.primitives import hashes
from fakes.paypal import (
    CLIENT_ID,
    WEBHOOK_ID,
    body_of,
    capture_event,
    dispute_event,
    event,
    new_id,
    order_approved_event,
    refund_event,
    refused_url,
    sign_headers,
    utcnow,
)

from cmsshop.services.payments import base
from cmsshop.services.payments.walletprovider import WalletProvider
from cmsshop.services.payments.walletprovider.certificates import check_cert_url, signed_message
from cmsshop.services.payments.walletprovider.money import to_decimal_string, to_minor_units
from cmsshop.services.payments.walletprovider.subscriptions import invoices_of, subscription_of


@pytest.fixture
def fake(paypal):
    return paypal


@pytest.fixture
def provider():
    return WalletProvider()


def wallet_delivery(pki, cert_url, payload=None, webhook_id=WEBHOOK_ID, signing=None, **kw):
    payload = payload or capture_event(new_id(), "CS-ORDER-1")
    body = body_of(payload)
    key = (signing or pki.signing).key
    return sign_headers(body, key, cert_url, webhook_id, **kw), body


# --- verify ------------------------------------------------------------------------------


def test_valid_event_verifies_and_means_fulfil(provider, fake, pki, cert_url):
    payload = capture_event("3C679366HH908993F", "CS-1001", "25.50", "EUR")
    headers, body = wallet_delivery(pki, cert_url, payload)

    verified = provider.verify(headers, body, fake.config())

    assert verified.provider == "walletprovider"
    assert verified.event_id == payload["id"]
    assert verified.event_type == "PAYMENT.CAPTURE.COMPLETED"
    assert verified.raw == body and verified.payload == payload
    action = provider.interpret(verified)
    assert action == base.EventAction(
        base.FULFIL,
        order_number="CS-1001",
        payment_reference="3C679366HH908993F",
        provider_object_id=payload["resource"]["supplementary_data"]["related_ids"]["order_id"],
        amount=2550,
        currency="EUR",
        reason="PAYMENT.CAPTURE.COMPLETED",
    )
    assert fake.requests == [("GET", cert_url.split(str(fake.port), 1)[1])]


def test_header_names_are_case_insensitive(provider, fake, pki, cert_url):
    headers, body = wallet_delivery(pki, cert_url)
    lowered = {k.lower(): v for k, v in headers.items()}
    mixed = {k.title(): v for k, v in headers.items()}
    assert provider.verify(lowered, body, fake.config()).event_type
    assert provider.verify(mixed, body, fake.config()).event_type


def test_signed_message_uses_unsigned_decimal_crc32():
    # A body whose CRC-32 has the top bit set: a signed 32-bit rendering would be negative.
    import zlib

    body = b"x"

    assert zlib.crc32(body) & 0x80000000
    message = signed_message("tid", "2026-01-01T00:00:00Z", "WH-1", body)
    assert message == f"tid|2026-01-01T00:00:00Z|WH-1|{zlib.crc32(body)}".encode()
    assert b"-" not in message.rsplit(b"|", 1)[1]


def test_hex_crc_is_rejected(provider, fake, pki, cert_url):
    import zlib

    body = body_of(capture_event(new_id(), "CS-1"))
    headers = sign_headers(
        body, pki.signing.key, cert_url, WEBHOOK_ID, crc=format(zlib.crc32(body), "x")
    )
    with pytest.raises(base.SignatureInvalid, match="does not match"):
        provider.verify(headers, body, fake.config())


def test_wrong_webhook_id_is_rejected(provider, fake, pki, cert_url):
    headers, body = wallet_delivery(pki, cert_url, webhook_id="WH-SOMEONE-ELSES")
    with pytest.raises(base.SignatureInvalid, match="does not match"):
        provider.verify(headers, body, fake.config())


def test_one_byte_body_change_is_rejected(provider, fake, pki, cert_url):
    headers, body = wallet_delivery(pki, cert_url, capture_event(new_id(), "CS-1", "10.00"))
    assert provider.verify(headers, body, fake.config())
    tampered = body.replace(b'"10.00"', b'"90.00"')
    assert (
        len(tampered) == len(body) and sum(a != b for a, b in zip(body, tampered, strict=True)) == 1
    )
    with pytest.raises(base.SignatureInvalid, match="does not match"):
        provider.verify(headers, tampered, fake.config())
    with pytest.raises(base.SignatureInvalid, match="does not match"):
        provider.verify(headers, body + b" ", fake.config())


def test_signature_from_another_key_is_rejected(provider, fake, pki, cert_url):
    other = pki.signing_cert()
    headers, body = wallet_delivery(pki, cert_url, signing=other)  # cert_url serves pki.signing
    with pytest.raises(base.SignatureInvalid, match="does not match"):
        provider.verify(headers, body, fake.config())


def test_sha1_algorithm_is_rejected_before_any_fetch(provider, fake, pki, cert_url):
    headers, body = wallet_delivery(
        pki, cert_url, algorithm_header="SHA1withRSA", digest=hashes.SHA1()
    )
    with pytest.raises(base.SignatureInvalid, match="not accepted"):
        provider.verify(headers, body, fake.config())
    # A SHA-256 signature under a SHA1 header is refused too: only the header decides.
    headers, body = wallet_delivery(pki, cert_url, algorithm_header="SHA1withRSA")
    with pytest.raises(base.SignatureInvalid, match="not accepted"):
        provider.verify(headers, body, fake.config())
    for algorithm in ("sha256withrsa", "SHA256withECDSA", "SHA512withRSA", ""):
        headers, body = wallet_delivery(pki, cert_url, algorithm_header=algorithm)
        with pytest.raises(base.SignatureInvalid):
            provider.verify(headers, body, fake.config())
    assert fake.count() == 0


@pytest.mark.parametrize(
    "header",
    [
        "PAYPAL-TRANSMISSION-ID",
        "PAYPAL-TRANSMISSION-TIME",
        "PAYPAL-TRANSMISSION-SIG",
        "PAYPAL-CERT-URL",
        "PAYPAL-AUTH-ALGO",
    ],
)
def test_missing_header_is_rejected(provider, fake, pki, cert_url, header):
    headers, body = wallet_delivery(pki, cert_url)
    del headers[header]
    with pytest.raises(base.SignatureInvalid, match=header):
        provider.verify(headers, body, fake.config())
    headers, body = wallet_delivery(pki, cert_url)
    headers[header] = "   "
    with pytest.raises(base.SignatureInvalid, match=header):
        provider.verify(headers, body, fake.config())
    assert fake.count() == 0


@pytest.mark.parametrize("signature", ["not base64!", "QUJD=x", "QUJDRA", "=" * 8, "%%%%"])
def test_bad_base64_signature_is_rejected(provider, fake, pki, cert_url, signature):
    headers, body = wallet_delivery(pki, cert_url)
    headers["PAYPAL-TRANSMISSION-SIG"] = signature
    with pytest.raises(base.SignatureInvalid):
        provider.verify(headers, body, fake.config())
    assert fake.count() == 0


def test_truncated_signature_is_rejected(provider, fake, pki, cert_url):
    import base64

    headers, body = wallet_delivery(pki, cert_url)
    raw = base64.b64decode(headers["PAYPAL-TRANSMISSION-SIG"])
    headers["PAYPAL-TRANSMISSION-SIG"] = base64.b64encode(raw[:-1]).decode()
    with pytest.raises(base.SignatureInvalid, match="does not match"):
        provider.verify(headers, body, fake.config())


def test_webhook_id_not_configured(provider, fake, pki, cert_url):
    headers, body = wallet_delivery(pki, cert_url)
    with pytest.raises(base.NotConfigured):
        provider.verify(headers, body, fake.config(webhook_id=""))
    assert fake.count() == 0


def test_signed_body_that_is_not_a_json_object_is_rejected(provider, fake, pki, cert_url):
    for body in (b"not json", b"[1, 2]", b'{"id": "WH-1"}', b"\xff\xfe"):
        headers = sign_headers(body, pki.signing.key, cert_url, WEBHOOK_ID)
        with pytest.raises(base.SignatureInvalid):
            provider.verify(headers, body, fake.config())


# --- the certificate URL: allow-list, no request otherwise ---------------------------------


def test_disallowed_cert_urls_are_rejected_without_any_request(provider, fake, pki):
    path = fake.serve_cert(pki.signing.chain_pem).split(str(fake.port), 1)[1]
    port = fake.port
    # Every one of these would reach the fake server if fetched naively.
    hostile = [
        f"https://127.0.0.1:{port}{path}",  # right server, name not on the list
        f"http://localhost:{port}{path}",  # plain http
        f"https://localhost:{port + 1}{path}",  # a port the list does not name
        f"https://localhost{path}",  # default port 443 not on the list
        f"https://localhost:{port}@127.0.0.1:{port}{path}",  # userinfo trick
        f"https://x@localhost:{port}{path}",
        f"https://127.0.0.1:{port}\\@localhost:{port}{path}",  # backslash trick
        f"https://127.0.0.1:{port}#@localhost:{port}{path}",
        f"https://localhost:{port}{path}#frag",
        f"https://localhost.:{port}{path}",  # trailing dot
        f"https://notlocalhost:{port}{path}",  # suffix without a dot boundary
        f"https://localhost%2e:{port}{path}",
        f"https://localhost:{port} {path}",
        f"https://localhost:{port}\r\n{path}",
        f"https://[::1]:{port}{path}",
        f"ftp://localhost:{port}{path}",
        f"//localhost:{port}{path}",
        f"https://localhost:0x{port:x}{path}",
        f"https://localhost:+{port}{path}",
        f"https://lοcalhost:{port}{path}",  # Greek omicron
        "",
    ]
    for url in hostile:
        body = body_of(capture_event(new_id(), "CS-1"))
        headers = sign_headers(body, pki.signing.key, url or "x", WEBHOOK_ID)
        headers["PAYPAL-CERT-URL"] = url
        with pytest.raises(base.SignatureInvalid):
            provider.verify(headers, body, fake.config())
    assert fake.count() == 0, fake.requests


def test_default_allow_list_is_paypal_only(provider, fake, pki, cert_url):
    headers, body = wallet_delivery(pki, cert_url)
    config = fake.config()
    del config["certHosts"]
    with pytest.raises(base.SignatureInvalid, match="allow-list"):
        provider.verify(headers, body, config)
    assert fake.count() == 0


@pytest.mark.parametrize(
    "url,expected",
    [
        ("https://api.paypal.com/v1/notifications/certs/CERT-1", True),
        ("https://api.sandbox.paypal.com/v1/notifications/certs/CERT-1", True),
        ("https://paypal.com/c", True),
        ("HTTPS://API.PAYPAL.COM/c", True),
        ("https://api.paypal.com:443/c", True),
        ("https://api.paypal.com:8443/c", False),
        ("https://api.paypal.com.evil.com/c", False),
        ("https://evilpaypal.com/c", False),
        ("https://paypal.com.evil/c", False),
        ("https://api.paypal.com@evil.com/c", False),
        ("https://evil.com/https://api.paypal.com/c", False),
        ("https://evil.com?https://api.paypal.com/", False),
        ("https://api.paypal.com%40evil.com/c", False),
        ("https://api.paypal.com\\.evil.com/c", False),
        ("https://api.paypal.com\t/c", False),
        ("http://api.paypal.com/c", False),
        ("https://api.paypal.com:99999/c", False),
        ("https://[::ffff:127.0.0.1]/c", False),
        ("https:///c", False),
    ],
)
def test_check_cert_url_default_allow_list(url, expected):
    if expected:
        fetched = check_cert_url(url, ["paypal.com"])
        assert fetched.startswith("https://") and "paypal.com/" in fetched
    else:
        with pytest.raises(base.SignatureInvalid):
            check_cert_url(url, ["paypal.com"])


def test_check_cert_url_rebuilds_what_it_checked():
    assert (
        check_cert_url("https://API.PayPal.com:443/v1/certs/C?x=1", ["paypal.com"])
        == "https://api.paypal.com/v1/certs/C?x=1"
    )
    assert check_cert_url("https://h.test:8443/c", ["test:8443"]) == "https://h.test:8443/c"
    with pytest.raises(base.SignatureInvalid):  # an IP address is matched exactly, never by suffix
        check_cert_url("https://10.0.0.1/c", ["0.0.1"])
    assert check_cert_url("https://127.0.0.1:99/c", ["127.0.0.1:99"])


def test_redirect_is_not_followed(provider, fake, pki):
    target = fake.serve_cert(pki.signing.chain_pem)
    url = fake.base_url + "/v1/notifications/certs/CERT-moved"
    fake.redirects["/v1/notifications/certs/CERT-moved"] = target
    headers, body = wallet_delivery(pki, url)
    with pytest.raises(base.SignatureInvalid, match="302"):
        provider.verify(headers, body, fake.config())
    assert fake.count() == 1


def test_cert_url_errors_are_rejections(provider, fake, pki):
    missing = fake.base_url + "/v1/notifications/certs/CERT-nothing-here"
    headers, body = wallet_delivery(pki, missing)
    with pytest.raises(base.SignatureInvalid, match="404"):
        provider.verify(headers, body, fake.config())
    garbage = fake.serve_cert(b"-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n")
    headers, body = wallet_delivery(pki, garbage)
    with pytest.raises(base.SignatureInvalid, match="PEM"):
        provider.verify(headers, body, fake.config())
    huge = fake.serve_cert(pki.signing.chain_pem * 40)
    headers, body = wallet_delivery(pki, huge)
    with pytest.raises(base.SignatureInvalid, match="too"):
        provider.verify(headers, body, fake.config())


def test_cert_host_down_is_temporary(provider, fake, pki):
    """Nothing wrong with the delivery, the certificate host is down: the machinery
    answers 503 and the provider delivers again."""
    url = refused_url()
    headers, body = wallet_delivery(pki, url + "/c")
    config = fake.config(certHosts=[url.split("//", 1)[1]])
    with pytest.raises(base.ProviderUnavailable, match="could not be fetched"):
        provider.verify(headers, body, config)
    cert_url = fake.serve_cert(pki.signing.chain_pem)
    fake.cert_status = 503
    with pytest.raises(base.ProviderUnavailable, match="503"):
        provider.verify(*wallet_delivery(pki, cert_url), fake.config())
    fake.hang_seconds = 1.0
    with pytest.raises(base.ProviderUnavailable, match="Timeout"):
        provider.verify(
            *wallet_delivery(pki, fake.serve_cert(pki.signing.chain_pem)), fake.config(timeout=0.2)
        )


def test_a_failing_cert_host_is_remembered_for_a_while(provider, fake, pki):
    """A 5xx is remembered for its URL (the host's other URLs are still fetched); no
    answer at all is remembered for the whole host: nothing is fetched again meanwhile."""
    failing = fake.serve_cert(pki.signing.chain_pem)
    fake.cert_status = 503
    with pytest.raises(base.ProviderUnavailable, match="503"):
        provider.verify(*wallet_delivery(pki, failing), fake.config())
    fake.cert_status = None
    with pytest.raises(base.ProviderUnavailable, match="503 .not tried again"):
        provider.verify(*wallet_delivery(pki, failing), fake.config())
    assert fake.count("/v1/notifications/certs/") == 1
    working = fake.serve_cert(pki.signing.chain_pem)
    assert provider.verify(*wallet_delivery(pki, working), fake.config()).event_type
    assert fake.count("/v1/notifications/certs/") == 2

    fake.hang_seconds = 1.0
    slow = fake.serve_cert(pki.signing.chain_pem)
    with pytest.raises(base.ProviderUnavailable, match="Timeout"):
        provider.verify(*wallet_delivery(pki, slow), fake.config(timeout=0.2))
    fake.hang_seconds = 0.0
    other = fake.serve_cert(pki.signing.chain_pem)
    with pytest.raises(base.ProviderUnavailable, match="Timeout .not tried again"):
        provider.verify(*wallet_delivery(pki, other), fake.config())
    assert fake.count("/v1/notifications/certs/") == 3
    # The certificate already cached is still used: the host is only not asked again.
    assert provider.verify(*wallet_delivery(pki, working), fake.config()).event_type


def test_tls_to_the_cert_host_must_be_trusted(provider, fake, pki, cert_url):
    """Without the test CA bundle the TLS handshake itself fails: no certificate read."""
    headers, body = wallet_delivery(pki, cert_url)
    config = fake.config()
    del config["caBundle"]
    with pytest.raises(base.SignatureInvalid, match="TLS .* not trusted"):
        provider.verify(headers, body, config)


# --- the certificate itself ------------------------------------------------------------------


def test_expired_certificate_is_rejected(provider, fake, pki):
    now = utcnow()
    expired = pki.signing_cert(
        not_before=now - dt.timedelta(days=30), not_after=now - dt.timedelta(minutes=1)
    )
    url = fake.serve_cert(expired.chain_pem)
    headers, body = wallet_delivery(pki, url, signing=expired)
    with pytest.raises(base.SignatureInvalid, match="expired"):
        provider.verify(headers, body, fake.config())


def test_not_yet_valid_certificate_is_rejected(provider, fake, pki):
    now = utcnow()
    future = pki.signing_cert(
        not_before=now + dt.timedelta(days=1), not_after=now + dt.timedelta(days=30)
    )
    url = fake.serve_cert(future.chain_pem)
    headers, body = wallet_delivery(pki, url, signing=future)
    with pytest.raises(base.SignatureInvalid, match="not valid yet"):
        provider.verify(headers, body, fake.config())


def test_certificate_not_chaining_to_the_trusted_root_is_rejected(provider, fake, pki):
    for forged in (pki.rogue_signing_cert(), pki.self_signed_signing_cert()):
        url = fake.serve_cert(forged.chain_pem)
        headers, body = wallet_delivery(pki, url, signing=forged)
        with pytest.raises(base.SignatureInvalid, match="trusted root"):
            provider.verify(headers, body, fake.config())


def test_leaf_without_its_intermediate_is_rejected(provider, fake, pki):
    from cryptography import x509

    leaf_only = x509.load_pem_x509_certificates(pki.signing.chain_pem)[0]
    from fakes.paypal import pem

    url = fake.serve_cert(pem(leaf_only))
    headers, body = wallet_delivery(pki, url)
    with pytest.raises(base.SignatureInvalid, match="trusted root"):
        provider.verify(headers, body, fake.config())


def test_certificate_for_another_name_is_rejected(provider, fake, pki):
    """A valid chain is not enough: the certificate must be PayPal's signing certificate."""
    other = pki.signing_cert(dns_names=("shop.example.com",))
    url = fake.serve_cert(other.chain_pem)
    headers, body = wallet_delivery(pki, url, signing=other)
    with pytest.raises(base.SignatureInvalid, match="messageverificationcerts"):
        provider.verify(headers, body, fake.config())
    # ... unless the operator names it (e.g. a private test setup).
    assert provider.verify(headers, body, fake.config(certSubjects=["shop.example.com"]))


def test_sandbox_signing_name_is_accepted(provider, fake, pki):
    sandbox = pki.signing_cert(dns_names=("messageverificationcerts.sandbox.paypal.com",))
    url = fake.serve_cert(sandbox.chain_pem)
    headers, body = wallet_delivery(pki, url, signing=sandbox)
    assert provider.verify(headers, body, fake.config())


# --- the certificate cache --------------------------------------------------------------


def test_certificate_is_cached_per_url(provider, fake, pki, cert_url):
    for _ in range(3):
        headers, body = wallet_delivery(pki, cert_url)
        provider.verify(headers, body, fake.config())
    assert fake.count("/v1/notifications/certs/") == 1
    # Another URL is another certificate.
    other_url = fake.serve_cert(pki.signing.chain_pem)
    headers, body = wallet_delivery(pki, other_url)
    provider.verify(headers, body, fake.config())
    assert fake.count("/v1/notifications/certs/") == 2
    # A fresh provider (another process) fetches again.
    WalletProvider().verify(*wallet_delivery(pki, cert_url), fake.config())
    assert fake.count("/v1/notifications/certs/") == 3


def test_cache_does_not_outlive_the_allow_list(provider, fake, pki, cert_url):
    headers, body = wallet_delivery(pki, cert_url)
    provider.verify(headers, body, fake.config())
    with pytest.raises(base.SignatureInvalid, match="allow-list"):
        provider.verify(headers, body, fake.config(certHosts=["paypal.com"]))


def test_cache_is_bounded(fake, pki):
    provider = WalletProvider(cert_cache_size=2)
    urls = [fake.serve_cert(pki.signing.chain_pem) for _ in range(3)]
    for url in urls:
        provider.verify(*wallet_delivery(pki, url), fake.config())
    assert provider.cached_certificate_count() == 2
    provider.verify(*wallet_delivery(pki, urls[0]), fake.config())  # evicted: fetched again
    assert fake.count("/v1/notifications/certs/") == 4


def test_failed_certificates_are_not_cached(provider, fake, pki):
    rogue = pki.rogue_signing_cert()
    url = fake.serve_cert(rogue.chain_pem)
    for _ in range(2):
        with pytest.raises(base.SignatureInvalid):
            provider.verify(*wallet_delivery(pki, url, signing=rogue), fake.config())
    assert provider.cached_certificate_count() == 0


# --- interpret -----------------------------------------------------------------------------


def verified(payload) -> base.VerifiedEvent:
    return base.VerifiedEvent(
        "walletprovider", payload["id"], payload["event_type"], payload, body_of(payload)
    )


def test_interpret_capture_events(provider):
    completed = provider.interpret(verified(capture_event("CAP1", "CS-9", "1500", "JPY")))
    assert (completed.action, completed.amount, completed.currency) == (base.FULFIL, 1500, "JPY")
    denied = provider.interpret(
        verified(capture_event("CAP2", "CS-9", event_type="PAYMENT.CAPTURE.DENIED"))
    )
    assert (denied.action, denied.order_number, denied.payment_reference) == (
        base.FAIL,
        "CS-9",
        "CAP2",
    )
    pending = provider.interpret(
        verified(capture_event("CAP3", "CS-9", event_type="PAYMENT.CAPTURE.PENDING"))
    )
    assert pending.action == base.IGNORE and "pending" in pending.reason


def test_interpret_order_number_falls_back_to_invoice_id(provider):
    payload = capture_event("CAP1", "CS-9")
    payload["resource"]["custom_id"] = ""
    payload["resource"]["invoice_id"] = "CS-INV"
    assert provider.interpret(verified(payload)).order_number == "CS-INV"
    del payload["resource"]["invoice_id"]
    assert provider.interpret(verified(payload)).order_number is None


def test_approval_asks_for_the_capture(provider):
    action = provider.interpret(verified(order_approved_event("5O190127TN364715T", "CS-7")))
    assert action.action == base.CAPTURE
    assert action.order_number == "CS-7" and action.provider_object_id == "5O190127TN364715T"
    assert (action.amount, action.currency) == (1000, "EUR")
    assert "approval is not payment" in action.reason


@pytest.mark.parametrize("status", ["COMPLETED", "CREATED", "VOIDED", None, 7])
def test_approval_event_for_an_order_not_approved_is_ignored(provider, status):
    payload = order_approved_event("5O190127TN364715T", "CS-7")
    payload["resource"]["status"] = status
    action = provider.interpret(verified(payload))
    assert action.action == base.IGNORE and "nothing to capture" in action.reason
    del payload["resource"]["id"]
    payload["resource"]["status"] = "APPROVED"
    assert provider.interpret(verified(payload)).action == base.IGNORE


@pytest.mark.parametrize("kind", ["REFUNDED", "REVERSED"])
def test_interpret_refund_and_reversal(provider, kind):
    payload = refund_event("CAPX", "CS-5", "12.34", kind=kind)
    action = provider.interpret(verified(payload))
    assert action == base.EventAction(
        base.REFUND,
        order_number="CS-5",
        payment_reference="CAPX",
        provider_object_id="CAPX",
        amount=1234,
        currency="EUR",
        reason=f"PAYMENT.CAPTURE.{kind}",
        refund_id=payload["resource"]["id"],  # the refund itself: its id and own amount
        refund_amount=1234,
    )


def test_interpret_refund_without_capture_link_is_ignored(provider):
    payload = refund_event("CAPX", "CS-5")
    payload["resource"]["links"] = []
    assert provider.interpret(verified(payload)).action == base.IGNORE


def test_interpret_dispute_created(provider):
    action = provider.interpret(verified(dispute_event("CAPD", "CS-6", "5.00", "USD")))
    assert (action.action, action.order_number, action.payment_reference, action.amount) == (
        base.DISPUTE_OPENED,
        "CS-6",
        "CAPD",
        500,
    )


@pytest.mark.parametrize(
    "outcome,expected",
    [
        ("RESOLVED_BUYER_FAVOUR", base.DISPUTE_LOST),
        ("RESOLVED_SELLER_FAVOUR", base.DISPUTE_WON),
        ("CANCELED_BY_BUYER", base.DISPUTE_WON),
        ("NONE", base.IGNORE),
    ],
)
def test_interpret_dispute_resolved(provider, outcome, expected):
    payload = dispute_event("CAPD", "CS-6")
    payload["event_type"] = "CUSTOMER.DISPUTE.RESOLVED"
    payload["resource"]["dispute_outcome"] = {"outcome_code": outcome}
    assert provider.interpret(verified(payload)).action == expected


@pytest.mark.parametrize(
    "payload",
    [
        event("PAYMENT.SALE.COMPLETED", {"id": "X"}, "sale"),
        event("BILLING.SUBSCRIPTION.CREATED", {}, "subscription"),
        {"id": "WH-1", "event_type": "PAYMENT.CAPTURE.COMPLETED", "resource": "nope"},
        {"id": "WH-2", "event_type": "PAYMENT.CAPTURE.COMPLETED"},
        event("PAYMENT.CAPTURE.COMPLETED", {"id": "../../v1/evil", "custom_id": "CS-1"}, "c"),
        event("CUSTOMER.DISPUTE.CREATED", {"disputed_transactions": ["x", 3]}, "dispute"),
    ],
)
def test_interpret_other_or_malformed_events_are_ignored(provider, payload):
    assert provider.interpret(verified(payload)).action == base.IGNORE


def test_interpret_unreadable_amount_is_none(provider):
    for value in ("10.001", "1e3", "ten", 10, None, "1,00"):
        payload = capture_event("CAP1", "CS-1")
        payload["resource"]["amount"]["value"] = value
        action = provider.interpret(verified(payload))
        assert action.action == base.FULFIL and action.amount is None


# --- subscriptions ---------------------------------------------------------------------------


def sale_resource(**fields) -> dict:
    """A subscription's sale as PAYMENT.SALE.COMPLETED carries it (v1 amount shape)."""
    return {
        "id": "5TY05013RG002845M",
        "state": "completed",
        "amount": {"total": "49.00", "currency": "EUR", "details": {"subtotal": "49.00"}},
        "billing_agreement_id": "I-BW452GLLEP1G",
        "custom": "CS-8",
        "create_time": "2026-01-01T10:00:00Z",
        **fields,
    }


def test_interpret_a_subscription_sale_is_a_paid_period(provider):
    action = provider.interpret(verified(event("PAYMENT.SALE.COMPLETED", sale_resource(), "sale")))
    assert action.action == base.PERIOD_PAID
    assert (action.subscription_ref, action.invoice_ref, action.payment_reference) == (
        "I-BW452GLLEP1G",
        "5TY05013RG002845M",
        "5TY05013RG002845M",
    )
    assert (action.order_number, action.amount, action.currency) == ("CS-8", 4900, "EUR")
    assert action.event_created is not None and action.event_created.tzinfo is not None


def test_interpret_a_sale_naming_no_subscription_is_still_a_paid_period(provider):
    resource = sale_resource(custom=None, invoice_number="CS-INV")
    del resource["billing_agreement_id"]
    action = provider.interpret(verified(event("PAYMENT.SALE.COMPLETED", resource, "sale")))
    assert (action.action, action.subscription_ref) == (base.PERIOD_PAID, None)
    assert (action.order_number, action.invoice_ref) == ("CS-INV", "5TY05013RG002845M")


@pytest.mark.parametrize("state", ["pending", "denied", "refunded", None])
def test_interpret_a_sale_not_completed_is_ignored(provider, state):
    payload = event("PAYMENT.SALE.COMPLETED", sale_resource(state=state), "sale")
    assert provider.interpret(verified(payload)).action == base.IGNORE


@pytest.mark.parametrize(
    "kind",
    [
        "BILLING.SUBSCRIPTION.ACTIVATED",
        "BILLING.SUBSCRIPTION.UPDATED",
        "BILLING.SUBSCRIPTION.RE-ACTIVATED",
        "BILLING.SUBSCRIPTION.SUSPENDED",
        "BILLING.SUBSCRIPTION.CANCELLED",
        "BILLING.SUBSCRIPTION.EXPIRED",
        "BILLING.SUBSCRIPTION.PAYMENT.FAILED",
    ],
)
def test_interpret_subscription_state_events_are_refetched(provider, kind):
    resource = {"id": "I-BW452GLLEP1G", "status": "ACTIVE", "custom_id": "CS-8"}
    action = provider.interpret(verified(event(kind, resource, "subscription")))
    assert (action.action, action.subscription_ref, action.order_number) == (
        base.SUBSCRIPTION_SYNC,
        "I-BW452GLLEP1G",
        "CS-8",
    )
    resource["id"] = "../../v1/evil"
    assert provider.interpret(verified(event(kind, resource, "subscription"))).action == (
        base.IGNORE
    )


def paypal_subscription(status: str, failed: int = 0, **billing) -> dict:
    return {
        "id": "I-BW452GLLEP1G",
        "status": status,
        "status_update_time": "2026-02-01T10:00:00Z",
        "custom_id": "CS-8",
        "subscriber": {"payer_id": "2J6QB8YJQSJRJ"},
        "billing_info": {
            "failed_payments_count": failed,
            "next_billing_time": "2026-03-01T10:00:00Z",
            **billing,
        },
    }


@pytest.mark.parametrize(
    "status, failed, ours",
    [
        ("ACTIVE", 0, "active"),
        ("ACTIVE", 1, "past_due"),  # PayPal is retrying a failed payment
        ("SUSPENDED", 1, "past_due"),  # the failures reached the plan's threshold
        ("CANCELLED", 0, "ended"),
        ("EXPIRED", 0, "ended"),
    ],
)
def test_paypal_statuses_in_ours(status, failed, ours):
    found = subscription_of(paypal_subscription(status, failed), "I-BW452GLLEP1G")
    assert (found.status, found.cancel_at_period_end) == (ours, False)
    assert found.current_period_end == dt.datetime(2026, 3, 1, 10, tzinfo=dt.UTC)
    assert (found.order_number, found.customer_ref) == ("CS-8", "2J6QB8YJQSJRJ")
    assert (found.ended_at is not None) == (ours == "ended")


@pytest.mark.parametrize("status", ["APPROVAL_PENDING", "APPROVED", "SOMETHING_NEW"])
def test_a_subscription_not_live_yet_is_not_read_as_ours(status):
    with pytest.raises(base.ProviderUnavailable):
        subscription_of(paypal_subscription(status), "I-BW452GLLEP1G")
    with pytest.raises(base.ProviderUnavailable):
        subscription_of(paypal_subscription("ACTIVE"), "I-OTHER")


def transaction(txn_id: str, time: str, status: str = "COMPLETED") -> dict:
    return {
        "id": txn_id,
        "status": status,
        "time": time,
        "amount_with_breakdown": {"gross_amount": {"currency_code": "EUR", "value": "49.00"}},
    }


def test_a_periods_end_is_the_next_payment_or_the_next_billing_time():
    found = paypal_subscription("ACTIVE")
    transactions = [
        transaction("S2", "2026-02-01T10:00:00Z"),
        transaction("D1", "2026-01-20T10:00:00Z", "DECLINED"),  # no payment: no period
        transaction("S1", "2026-01-01T10:00:00Z"),
    ]
    (first, s1), (second, s2) = invoices_of(found, "I-BW452GLLEP1G", transactions)
    assert (s1, s2) == ("S1", "S2")
    assert (first.first, second.first) == (True, False)
    assert first.period_end == second.period_start == dt.datetime(2026, 2, 1, 10, tzinfo=dt.UTC)
    assert second.period_end == dt.datetime(2026, 3, 1, 10, tzinfo=dt.UTC)
    assert (second.amount, second.currency, second.order_number) == (4900, "EUR", "CS-8")
    # Once PayPal states no next billing time (cancelled), the last period's end is unknown.
    del found["billing_info"]["next_billing_time"]
    (first, _), (second, _) = invoices_of(found, "I-BW452GLLEP1G", transactions)
    assert first.period_end is not None and second is None
    # A next billing time before the payment (PayPal, right after activation) is no end.
    found["billing_info"]["next_billing_time"] = "2026-02-01T09:00:00Z"
    assert invoices_of(found, "I-BW452GLLEP1G", transactions)[1][0] is None


@pytest.mark.parametrize(
    "value,currency,minor",
    [
        ("10.00", "EUR", 1000),
        ("10.5", "USD", 1050),
        ("0.01", "EUR", 1),
        ("1500", "JPY", 1500),
        ("1500.00", "JPY", 1500),
        ("1.234", "KWD", 1234),
        ("1000", "HUF", 100000),
        ("99999999.99", "EUR", 9999999999),
    ],
)
def test_money_to_minor_units(value, currency, minor):
    assert to_minor_units(value, currency) == minor


@pytest.mark.parametrize(
    "value,currency", [("1500.5", "JPY"), ("0.001", "EUR"), ("1e2", "EUR"), (" 1", "EUR")]
)
def test_money_rejects_what_the_currency_cannot_hold(value, currency):
    with pytest.raises(ValueError):
        to_minor_units(value, currency)


def test_money_to_decimal_string():
    assert to_decimal_string(1050, "EUR") == "10.50"
    assert to_decimal_string(1, "USD") == "0.01"
    assert to_decimal_string(1500, "JPY") == "1500"
    assert to_decimal_string(1234, "KWD") == "1.234"
    assert to_decimal_string(100000, "HUF") == "1000"
    with pytest.raises(ValueError):
        to_decimal_string(100050, "HUF")


# --- confirm ---------------------------------------------------------------------------------


def fulfil_action(capture_id="CAP-OK-1", order_number="CS-2001"):
    return base.EventAction(
        base.FULFIL,
        order_number=order_number,
        payment_reference=capture_id,
        provider_object_id=capture_id,
        amount=1999,
        currency="EUR",
    )


def test_confirm_reads_the_capture_with_a_cached_token(provider, fake):
    fake.add_capture("CAP-OK-1", "CS-2001", "19.99", "EUR")
    confirmation = provider.confirm(fulfil_action(), fake.config())
    assert confirmation == base.Confirmation(
        final=True,
        amount=1999,
        currency="EUR",
        order_number="CS-2001",
        payment_reference="CAP-OK-1",
    )
    provider.confirm(fulfil_action(), fake.config())
    assert fake.count("/v1/oauth2/token") == 1
    assert fake.count("/v2/payments/captures/CAP-OK-1") == 2


def test_confirm_pending_capture_is_not_final(provider, fake):
    fake.add_capture("CAP-P", "CS-1", status="PENDING")
    assert provider.confirm(fulfil_action("CAP-P"), fake.config()).final is False


def test_confirm_reports_what_the_api_says_not_what_the_event_said(provider, fake):
    """A lying (or merely different) API amount is passed on for the machinery to compare."""
    fake.add_capture("CAP-L", "CS-2001", "0.01", "USD", custom_id="CS-OTHER")
    confirmation = provider.confirm(fulfil_action("CAP-L"), fake.config())
    assert (confirmation.amount, confirmation.currency, confirmation.order_number) == (
        1,
        "USD",
        "CS-OTHER",
    )


def test_confirm_answer_for_another_capture_is_refused(provider, fake):
    fake.add_capture("CAP-A", "CS-1", id="CAP-B")
    with pytest.raises(base.ProviderUnavailable, match="different capture"):
        provider.confirm(fulfil_action("CAP-A"), fake.config())


def test_confirm_unreadable_amount_is_unavailable(provider, fake):
    fake.add_capture("CAP-U", "CS-1", amount={"currency_code": "EUR", "value": "ten"})
    with pytest.raises(base.ProviderUnavailable, match="amount"):
        provider.confirm(fulfil_action("CAP-U"), fake.config())


def test_confirm_api_down_connection_refused(provider, fake):
    with pytest.raises(base.ProviderUnavailable, match="unreachable"):
        provider.confirm(fulfil_action(), fake.config(apiBase=refused_url()))


@pytest.mark.parametrize("status", [500, 502, 503])
def test_confirm_api_server_error(provider, fake, status):
    fake.add_capture("CAP-OK-1", "CS-2001")
    fake.fail_status = status
    with pytest.raises(base.ProviderUnavailable, match=str(status)):
        provider.confirm(fulfil_action(), fake.config())


def test_confirm_api_server_error_after_token(provider, fake):
    fake.add_capture("CAP-OK-1", "CS-2001")
    provider.confirm(fulfil_action(), fake.config())
    fake.fail_status = 500
    with pytest.raises(base.ProviderUnavailable, match="500"):
        provider.confirm(fulfil_action(), fake.config())


def test_confirm_timeout_is_unavailable(provider, fake):
    fake.hang_seconds = 1.0
    with pytest.raises(base.ProviderUnavailable, match="Timeout"):
        provider.confirm(fulfil_action(), fake.config(timeout=0.2))


def test_confirm_unknown_capture_or_bad_credentials(provider, fake):
    with pytest.raises(base.ProviderUnavailable, match="404"):
        provider.confirm(fulfil_action("CAP-NONE"), fake.config())
    with pytest.raises(base.ProviderUnavailable, match="401"):
        WalletProvider().confirm(fulfil_action(), fake.config(clientSecret="wrong"))
    with pytest.raises(base.NotConfigured):
        provider.confirm(fulfil_action(), fake.config(clientId=""))


def test_confirm_refetches_a_revoked_token_once(provider, fake):
    fake.add_capture("CAP-OK-1", "CS-2001")
    provider.confirm(fulfil_action(), fake.config())
    fake.tokens.clear()  # PayPal revoked or expired the token early
    assert provider.confirm(fulfil_action(), fake.config()).final
    assert fake.count("/v1/oauth2/token") == 2


def test_short_lived_token_is_not_cached(provider, fake):
    fake.add_capture("CAP-OK-1", "CS-2001")
    fake.token_lifetime = 30
    provider.confirm(fulfil_action(), fake.config())
    provider.confirm(fulfil_action(), fake.config())
    assert fake.count("/v1/oauth2/token") == 2


def test_confirm_refuses_an_id_that_is_not_a_paypal_id(provider, fake):
    with pytest.raises(base.ProviderUnavailable):
        provider.confirm(fulfil_action("../oauth2/token"), fake.config())
    assert fake.count() == 0


# --- create_checkout -------------------------------------------------------------------------


def checkout_request(order_number="CS-3001", currency="EUR", items=None, total=2998):
    return base.CheckoutRequest(
        order_number=order_number,
        currency=currency,
        total=total,
        items=items
        if items is not None
        else [
            {"product": "pro", "name": "Pro plugin", "amount": 1999},
            {"product": "lite", "name": "Lite plugin", "amount": 999},
        ],
        customer_email="alice@example.com",
        success_url="https://shop.example/checkout/return?order=CS-3001",
        cancel_url="https://shop.example/checkout/cancel?order=CS-3001",
    )


def test_create_checkout_returns_the_approval_url(provider, fake):
    session = provider.create_checkout(checkout_request(), fake.config())

    assert session.redirect_url == (
        f"https://www.paypal.com/checkoutnow?token={session.provider_checkout_id}"
    )
    sent = fake.bodies[-1]
    assert sent["path"] == "/v2/checkout/orders"
    assert sent["headers"]["PayPal-Request-Id"] == "cmsshop-checkout-CS-3001"
    body = sent["body"]
    assert body["intent"] == "CAPTURE"
    unit = body["purchase_units"][0]
    assert unit["custom_id"] == unit["invoice_id"] == "CS-3001"
    assert unit["amount"] == {
        "currency_code": "EUR",
        "value": "29.98",
        "breakdown": {"item_total": {"currency_code": "EUR", "value": "29.98"}},
    }
    assert [i["unit_amount"]["value"] for i in unit["items"]] == ["19.99", "9.99"]
    context = body["payment_source"]["paypal"]["experience_context"]
    assert context["return_url"].endswith("/checkout/return?order=CS-3001")
    assert context["cancel_url"].endswith("/checkout/cancel?order=CS-3001")


def test_create_checkout_is_idempotent_per_order(provider, fake):
    first = provider.create_checkout(checkout_request(), fake.config())
    again = provider.create_checkout(checkout_request(), fake.config())
    other = provider.create_checkout(checkout_request("CS-3002"), fake.config())
    assert first == again and other.provider_checkout_id != first.provider_checkout_id


def test_create_checkout_zero_decimal_currency_and_mismatched_items(provider, fake):
    items = [{"product": "pro", "name": "Pro", "amount": 1000}]
    provider.create_checkout(
        checkout_request(currency="JPY", items=items, total=1500), fake.config()
    )
    unit = fake.bodies[-1]["body"]["purchase_units"][0]
    assert unit["amount"] == {"currency_code": "JPY", "value": "1500"}
    assert "items" not in unit  # they do not add up to the total: left out


def test_create_checkout_api_down(provider, fake):
    with pytest.raises(base.ProviderUnavailable):
        provider.create_checkout(checkout_request(), fake.config(apiBase=refused_url()))
    fake.fail_status = 500
    with pytest.raises(base.ProviderUnavailable):
        provider.create_checkout(checkout_request(), fake.config())


def test_capture_order_after_approval(provider, fake):
    session = provider.create_checkout(checkout_request(), fake.config())
    result = provider.capture_order(session.provider_checkout_id, fake.config())
    capture = result["purchase_units"][0]["payments"]["captures"][0]
    assert capture["status"] == "COMPLETED" and capture["custom_id"] == "CS-3001"
    confirmation = provider.confirm(fulfil_action(capture["id"]), fake.config())
    assert (confirmation.amount, confirmation.order_number) == (2998, "CS-3001")


def test_capture_hook_is_idempotent_and_already_captured_is_success(provider, fake):
    session = provider.create_checkout(checkout_request(), fake.config())
    action = base.EventAction(base.CAPTURE, provider_object_id=session.provider_checkout_id)
    provider.capture(action, fake.config())
    provider.capture(action, fake.config())  # a retry: same PayPal-Request-Id
    key = f"cmsshop-capture-{session.provider_checkout_id}"
    assert (
        fake.captures_of(session.provider_checkout_id)
        == [{"order": session.provider_checkout_id, "requestId": key}] * 2
    )
    assert len(fake.captures) == 1  # PayPal took the money once
    # Captured meanwhile under another request id (e.g. from the PayPal dashboard):
    fake.capture_answers.clear()
    provider.capture(action, fake.config())  # 422 ORDER_ALREADY_CAPTURED: success
    assert len(fake.captures) == 1
    fake.fail_status = 503
    with pytest.raises(base.ProviderUnavailable):
        provider.capture(action, fake.config())
    fake.fail_status = None
    with pytest.raises(base.ProviderUnavailable):  # another 4xx is not success
        provider.capture(
            base.EventAction(base.CAPTURE, provider_object_id="UNKNOWN1"), fake.config()
        )


def test_provider_contract_shape(provider):
    assert provider.name == "walletprovider"
    assert provider.settings_fields == {
        "webhookId": False,
        "clientId": False,
        "clientSecret": True,
        "apiBase": False,
        "certHosts": False,
    }
    assert CLIENT_ID not in json.dumps(provider.settings_fields)


def test_unreadable_ca_bundle_is_a_configuration_error(provider, fake, pki, cert_url, tmp_path):
    headers, body = wallet_delivery(pki, cert_url)
    missing = str(tmp_path / "no-such-bundle.pem")
    with pytest.raises(base.NotConfigured, match="caBundle"):
        provider.verify(headers, body, fake.config(caBundle=missing))
    with pytest.raises(base.ProviderUnavailable):
        provider.confirm(fulfil_action(), fake.config(caBundle=missing))


def test_trust_bundle_with_an_unparseable_entry_still_loads(pki):
    """One broken root in a bundle must not take every other root down with it."""
    from fakes.paypal import pem

    from cmsshop.services.payments.walletprovider.certificates import load_roots

    broken = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    roots = load_roots(broken + pem(pki.rogue_root) + b"junk\n" + pem(pki.root))
    assert [r.subject for r in roots] == [pki.rogue_root.subject, pki.root.subject]


# --- transmission age ---------------------------------------------------------------------


def test_transmission_age_is_checked_when_a_tolerance_is_configured(provider, fake, pki, cert_url):
    old = (utcnow() - dt.timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    headers, body = wallet_delivery(pki, cert_url, transmission_time=old)
    assert provider.verify(headers, body, fake.config())  # no tolerance: no age check
    assert provider.verify(headers, body, fake.config(signatureTolerance=3 * 3600))
    with pytest.raises(base.SignatureInvalid, match="transmission time"):
        provider.verify(headers, body, fake.config(signatureTolerance=3600))
    future = (utcnow() + dt.timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    headers, body = wallet_delivery(pki, cert_url, transmission_time=future)
    with pytest.raises(base.SignatureInvalid, match="transmission time"):
        provider.verify(headers, body, fake.config(signatureTolerance=3600))
    for bad in ("yesterday", "2026-01-01T00:00:00"):
        headers, body = wallet_delivery(pki, cert_url, transmission_time=bad)
        with pytest.raises(base.SignatureInvalid, match="transmission time"):
            provider.verify(headers, body, fake.config(signatureTolerance=3600))
    # PayPal's own format, with milliseconds, parses.
    with_ms = utcnow().strftime("%Y-%m-%dT%H:%M:%S.123Z")
    headers, body = wallet_delivery(pki, cert_url, transmission_time=with_ms)
    assert provider.verify(headers, body, fake.config(signatureTolerance=60))


def test_crc32_collision_shows_why_the_age_limit_exists(provider, fake, pki, cert_url):
    """The signature covers a CRC-32 only: a forged body with the same CRC-32 verifies
    with a genuine delivery's headers. Documented; the age limit bounds the window and
    payments are confirmed with the API before anything is delivered."""
    import zlib

    genuine = body_of(capture_event(new_id(), "CS-1", "10.00"))
    headers = sign_headers(genuine, pki.signing.key, cert_url, WEBHOOK_ID)
    forged = body_of(refund_event("CAPX", "CS-1"))[:-1] + b',"pad":"'
    forged = _pad_to_crc(forged, zlib.crc32(genuine), b'"}')
    assert zlib.crc32(forged) == zlib.crc32(genuine) and json.loads(forged)
    assert provider.verify(headers, forged, fake.config()).event_type.endswith("REFUNDED")


def _pad_to_crc(prefix: bytes, target: int, suffix: bytes) -> bytes:
    """prefix + 7 chars from 0x60-0x7F + suffix whose CRC-32 is ``target``.

    CRC-32 is affine over GF(2) for a fixed length, so the 35 free bits (5 per char) are
    solved for by Gaussian elimination; every char stays a plain JSON string character.
    """
    import zlib

    def crc(chars: bytes) -> int:
        return zlib.crc32(prefix + chars + suffix)

    base = bytes([0x60] * 7)
    zero = crc(base)
    columns = []  # (delta, bit mask of the chosen free bits)
    for position in range(7):
        for bit in range(5):
            flipped = bytearray(base)
            flipped[position] ^= 1 << bit
            columns.append((crc(bytes(flipped)) ^ zero, 1 << (position * 5 + bit)))
    basis: dict[int, tuple[int, int]] = {}  # pivot bit -> (vector, combination)
    for vector, combo in columns:
        for pivot in sorted(basis, reverse=True):
            if vector >> pivot & 1:
                vector ^= basis[pivot][0]
                combo ^= basis[pivot][1]
        if vector:
            basis[vector.bit_length() - 1] = (vector, combo)
    wanted, combo = target ^ zero, 0
    for pivot in sorted(basis, reverse=True):
        if wanted >> pivot & 1:
            wanted ^= basis[pivot][0]
            combo ^= basis[pivot][1]
    assert wanted == 0, "no solution"
    chars = bytes(0x60 | (combo >> (5 * p) & 0x1F) for p in range(7))
    return prefix + chars + suffix


# --- the development simulator ---------------------------------------------------------------


def test_simulated_delivery_passes_the_real_verification(tmp_path):
    import socket

    from cmsshop.services.payments.registry import SimulatedOrder
    from cmsshop.services.payments.walletprovider.simulate import simulate_payment

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = {
        "webhookId": "WH-DEVELOPMENT",
        "certHosts": ["paypal.com", f"localhost:{port}"],
        "caBundle": str(tmp_path / "dev" / "ca.pem"),
    }
    order = SimulatedOrder("ORD-AAAAA-BBBBB", "JPY", 1500, "5O190127TN364715T", "a@b.c", [])
    headers, body = simulate_payment(order, config)

    event = WalletProvider().verify(headers, body, config)
    action = WalletProvider().interpret(event)
    assert (action.action, action.order_number, action.amount, action.currency) == (
        base.FULFIL,
        "ORD-AAAAA-BBBBB",
        1500,
        "JPY",
    )
    assert action.provider_object_id == "5O190127TN364715T"
    # The development root is trusted next to the public roots, never instead of them.
    bundle = (tmp_path / "dev" / "ca.pem").read_bytes()
    assert bundle.count(b"BEGIN CERTIFICATE") > 50
    # Without a loopback cert host or a CA bundle it says what to configure.
    with pytest.raises(base.NotConfigured, match="loopback"):
        simulate_payment(order, {**config, "certHosts": ["paypal.com"]})
    with pytest.raises(base.NotConfigured, match="ca_bundle"):
        simulate_payment(order, {**config, "caBundle": ""})


def test_production_imports_never_load_the_development_pki():
    """The development PKI (and its https server) is loaded by simulate-payment only."""
    import subprocess
    import sys

    code = (
        "import sys, cmsshop.config, cmsshop.modules.payments.walletprovider, "
        "cmsshop.views.payments.webhooks, cmsshop.views.payments.admin_api, "
        "cmsshop.views.checkout.api; "
        "print(sorted(m for m in sys.modules if m.startswith('cmsshop.devtools')))"
    )
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
