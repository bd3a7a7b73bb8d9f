"""Checks of provider settings values (admin PUT and ini), passed by provider plugins to
``config.add_payment_provider``."""

from __future__ import annotations

import ipaddress
import re
import urllib.parse

LOOPBACK_NAMES = {"localhost"}


def _is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def api_base_validator(value: str) -> None:
    """An API base URL: https (plain http only on loopback, for fakes), no credentials,
    query or fragment. An empty string means the provider's default."""
    if value == "":
        return
    parts = urllib.parse.urlsplit(value)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("https", "http") or not host:
        raise ValueError("must be an http(s) URL such as https://api.example.com")
    if parts.scheme == "http" and not _is_loopback(host):
        raise ValueError("must use https (plain http is allowed on loopback only)")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError("must not contain credentials, a query or a fragment")


def prefix_validator(prefix: str, what: str):
    """Every item of a list field starts with ``prefix`` (e.g. Stripe's ``whsec_``)."""

    def validate(value) -> None:
        for item in value if isinstance(value, list) else [value]:
            if not item.startswith(prefix) or len(item) < len(prefix) + 8:
                raise ValueError(f"each {what} starts with {prefix} and is longer")

    return validate


STRIPE_SECRET_KEY = re.compile(r"(?:sk|rk)_(?:live|test)_\w{8,}", re.ASCII)


def stripe_secret_key(value: str) -> None:
    """A Stripe secret (sk_) or restricted (rk_) key, live or test. A publishable key
    (pk_) is the usual mistake: it cannot call the API, so it is refused when saved
    rather than discovered at the first payment."""
    if value.startswith("pk_"):
        raise ValueError("is a publishable key (pk_...): enter the secret key (sk_...)")
    if not STRIPE_SECRET_KEY.fullmatch(value):
        raise ValueError(
            "must be a secret key (sk_live_... or sk_test_...) or a restricted key (rk_...)"
        )


def timeout_seconds(value) -> float:
    """A provider API timeout setting: seconds, more than 0 and at most 120."""
    number = float(value)
    if not 0 < number <= 120:
        raise ValueError("between 0 and 120 seconds")
    return number
