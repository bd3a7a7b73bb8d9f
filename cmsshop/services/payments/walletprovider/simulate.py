"""simulate-payment (development): a signed PAYMENT.CAPTURE.COMPLETED delivery."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import secrets
import uuid
from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from cmsshop.services.payments.base import (
    NotConfigured,
)
from cmsshop.services.payments.walletprovider.certificates import signed_message
from cmsshop.services.payments.walletprovider.config import (
    ACCEPTED_ALGORITHM,
    cert_hosts_of,
    config_text,
)
from cmsshop.services.payments.walletprovider.money import to_decimal_string

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
    webhook_id = config_text(config, "webhookId")
    if not webhook_id:
        raise NotConfigured("walletprovider webhookId is not configured")
    ca_bundle = config_text(config, "caBundle")
    if not ca_bundle:
        raise NotConfigured(
            "set cmsshop.walletprovider.ca_bundle (development.ini does) so the server "
            "trusts the development signing certificate"
        )
    # Development only, so imported here: production never loads the development PKI.
    from cmsshop.devtools.walletprovider_pki import (
        DevelopmentPKI,
        loopback_cert_host,
        serve_development_certificate,
    )

    host, port = loopback_cert_host(cert_hosts_of(config))
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
