"""Signing outgoing webhooks the way Stripe signs its own, so a receiver verifies them
with the code it already has for Stripe (``stripe.WebhookSignature.verify_header`` with
our secret):

    Cmsshop-Signature: t=<unix time>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">

While a rotated-out secret is still in its overlap, each delivery carries one ``v1`` per
valid secret (as Stripe does when rolling a secret), so receivers can switch at their
own pace. Secrets are stored encrypted (cmsshop.crypto) and shown once when made.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from cmsshop import crypto

SIGNATURE_HEADER = "Cmsshop-Signature"
SECRET_PREFIX = "whsec_"
# The key's HKDF salt: what these values are (cmsshop.crypto).
PURPOSE = b"cmsshop webhook signing secrets"


def new_secret() -> str:
    """A fresh signing secret: ``whsec_`` and 256 random bits."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def signature_header(signing_secrets: list[str], timestamp: int, body: bytes) -> str:
    """The signature header's value for ``body`` sent at ``timestamp``."""
    signed = str(timestamp).encode() + b"." + body
    signatures = (
        hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest() for secret in signing_secrets
    )
    return ",".join([f"t={timestamp}", *(f"v1={sig}" for sig in signatures)])


def encrypt_secret(server_secret: str, secret: str) -> str:
    return crypto.encrypt_value(server_secret, secret, PURPOSE)


def decrypt_secret(server_secret: str, stored: str) -> str:
    """Raise crypto.InvalidToken when the server secret changed since it was stored."""
    return crypto.decrypt_value(server_secret, stored, PURPOSE)
