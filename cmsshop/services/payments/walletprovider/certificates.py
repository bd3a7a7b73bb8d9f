"""The signing certificate: the cert URL allow-list, the trust store and the certificate
cache, and the message PayPal signs."""

from __future__ import annotations

import collections
import datetime as dt
import ipaddress
import os
import re
import threading
import time
import urllib.parse
import warnings
import zlib
from typing import Any

from cryptography import x509
from cryptography.x509.verification import Store

from cmsshop.services.payments.base import (
    NotConfigured,
    SignatureInvalid,
)

# --- certificate URL allow-list ----------------------------------------------------------

_HOST_LABELS = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$")


def parse_allowed(entries: list[str]) -> list[tuple[str, int]]:
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
    for allowed_host, allowed_port in parse_allowed(cert_hosts):
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


def load_roots(bundle: bytes) -> list[x509.Certificate]:
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


class TrustStores:
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
            roots = load_roots(fh.read())
        if not roots:
            raise NotConfigured(f"trusted CA bundle {path!r} holds no certificate")
        store = Store(roots)
        with self._lock:
            self._stores[path] = (mtime, store)
        return store


class FailureMemory:
    """Certificate fetches that failed lately, by origin (``host:port``, when the host did
    not answer at all) or by URL (when it answered 5xx or 429: one odd path of a real
    host must not make its other URLs wait). Bounded; thread-safe."""

    def __init__(self, seconds: float, slots: int, clock=time.monotonic):
        self._seconds = seconds
        self._slots = slots
        self._clock = clock
        self._lock = threading.Lock()
        self._failed: collections.OrderedDict[str, tuple[float, str]] = collections.OrderedDict()

    def remember(self, key: str, reason: str) -> None:
        with self._lock:
            self._failed[key] = (self._clock() + self._seconds, reason)
            self._failed.move_to_end(key)
            while len(self._failed) > self._slots:
                self._failed.popitem(last=False)

    def recent(self, *keys: str) -> str | None:
        """Why one of ``keys`` failed within the period, with the seconds left; or None."""
        now = self._clock()
        with self._lock:
            for key in keys:
                entry = self._failed.get(key)
                if entry is None:
                    continue
                until, reason = entry
                if until <= now:
                    del self._failed[key]
                    continue
                return f"{reason} (not tried again for {max(1, round(until - now))} s)"
        return None


def origin_of(url: str) -> str:
    """``host:port`` of a URL ``check_cert_url`` returned."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.hostname}:{parts.port or 443}"


class CachedCert:
    __slots__ = ("public_key", "not_before", "not_after")

    def __init__(self, public_key, not_before: dt.datetime, not_after: dt.datetime):
        self.public_key = public_key
        self.not_before = not_before
        self.not_after = not_after

    def valid_at(self, now: dt.datetime) -> bool:
        return self.not_before <= now <= self.not_after


def signed_message(
    transmission_id: str, transmission_time: str, webhook_id: str, raw_body: bytes
) -> bytes:
    """``transmission_id|transmission_time|webhook_id|crc32`` (unsigned, decimal)."""
    crc = zlib.crc32(raw_body) & 0xFFFFFFFF
    return f"{transmission_id}|{transmission_time}|{webhook_id}|{crc}".encode()
