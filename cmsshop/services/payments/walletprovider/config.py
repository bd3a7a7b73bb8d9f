"""PayPal constants and the readers of the config mapping (see the package docstring)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from cmsshop.services.payments.base import (
    SignatureInvalid,
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
# A certificate fetch that failed is not tried again for this long, so forged deliveries
# naming a dead host cost one connection attempt per host and period, not one each;
# PayPal redelivers a real event for days, so a genuine delivery caught by it is late, not lost.
CERT_FAILURE_MEMORY = 30.0
CERT_FAILURE_SLOTS = 256  # failures remembered at most (oldest forgotten first)
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


# --- config helpers --------------------------------------------------------------------


def config_text(config: Mapping[str, Any], key: str, default: str = "") -> str:
    value = config.get(key)
    return str(value).strip() if value not in (None, "") else default


def config_list(config: Mapping[str, Any], key: str, default: tuple[str, ...]) -> list[str]:
    value = config.get(key)
    if value in (None, "", [], ()):
        return list(default)
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    return [str(v).strip() for v in value if str(v).strip()]


def timeouts(config: Mapping[str, Any]) -> tuple[float, float]:
    try:
        read = float(config.get("timeout") or DEFAULT_TIMEOUT)
    except (TypeError, ValueError):
        read = DEFAULT_TIMEOUT
    read = max(0.05, read)
    return min(CONNECT_TIMEOUT, read), read


def tls_verify(config: Mapping[str, Any]) -> str | bool:
    """The CA bundle for TLS connections made by this provider (True: requests' default)."""
    return config_text(config, "caBundle") or True


def signature_tolerance(config: Mapping[str, Any]) -> int:
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


def cert_hosts_of(config: Mapping[str, Any]) -> list[str]:
    return config_list(config, "certHosts", DEFAULT_CERT_HOSTS)


def api_base_of(config: Mapping[str, Any]) -> str:
    return config_text(config, "apiBase", DEFAULT_API_BASE).rstrip("/")
