"""Domain normalisation and the environment (production / staging / local) of a site.

The server decides where an installation runs, never a client field: a runtime sends
whatever its CMS reports as the site URL and this module reduces it to one canonical
host name, then classifies it. Local and staging sites do not use a paid seat.
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import re
from collections.abc import Iterable

import ada_url
import idna

PRODUCTION, STAGING, LOCAL = "production", "staging", "local"
ENVIRONMENTS = (PRODUCTION, STAGING, LOCAL)

# Reserved for testing, documentation and local networks (RFC 2606, RFC 6761, RFC 6762,
# RFC 8375): never a customer's public site. ``.dev`` is a real public TLD and is absent.
LOCAL_TLDS = frozenset({"localhost", "test", "example", "invalid", "local"})
LOCAL_SUFFIXES = (".home.arpa",)
DEFAULT_STAGING_PREFIXES = ("staging.", "stage.")
DEFAULT_STAGING_SUFFIXES: tuple[str, ...] = ()

MAX_INPUT_LENGTH = 2048
LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
# A URL names its scheme before ``//``; without one the value is a bare host (with a
# port, ``localhost:3000``, which would otherwise read as the scheme ``localhost``).
SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):[/\\]{2}")
WEB_SCHEMES = frozenset({"http", "https", "ws", "wss", "ftp"})  # the standard's special ones


class InvalidDomain(ValueError):
    """The value is neither a host name, an IP address nor a URL with one."""


@dataclasses.dataclass(frozen=True)
class SeatRules:
    """Which host names count as staging (configurable per site)."""

    staging_prefixes: tuple[str, ...] = DEFAULT_STAGING_PREFIXES
    staging_suffixes: tuple[str, ...] = DEFAULT_STAGING_SUFFIXES

    @classmethod
    def from_lists(cls, prefixes: Iterable[str], suffixes: Iterable[str]) -> SeatRules:
        return cls(
            tuple(p.strip().lower() for p in prefixes if p.strip()),
            tuple(s.strip().lower() for s in suffixes if s.strip()),
        )


def _host_of(value: str) -> str:
    """The host a browser would connect to for ``value`` (a URL or a bare host).

    Parsed with ada, a WHATWG URL Standard parser, because the server must read a URL
    exactly as browsers do: ``http://shop.com\\@localhost`` is ``shop.com`` (a
    backslash ends the authority in special schemes) and ``134744072`` or ``0x7f.1``
    are IPv4 addresses (the standard's IPv4 parser: 1-4 decimal, octal or hex parts).
    A looser parser lets a public shop pass as a free local seat. Credentials in the
    URL are refused, not stripped: a runtime has no reason to send them, and
    ``http://shop.com@localhost`` reads differently to people and to parsers.
    """
    text = value.strip()
    if not text or len(text) > MAX_INPUT_LENGTH:
        raise InvalidDomain("empty or too long")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        raise InvalidDomain("contains whitespace or control characters")
    if _ip_literal(text) is not None and ":" in text:  # a bare IPv6 address
        text = f"[{text}]"
    scheme = SCHEME.match(text)
    if scheme is None:
        text = "http://" + text.lstrip("/\\")
    elif scheme.group(1).lower() not in WEB_SCHEMES:
        raise InvalidDomain("not a web address")
    try:
        parts = ada_url.parse_url(text, attributes=("username", "password", "hostname"))
    except ValueError as exc:
        raise InvalidDomain(f"not a valid URL: {exc}") from None
    if parts["username"] or parts["password"]:
        raise InvalidDomain("a site address must not contain a user name or password")
    host = parts["hostname"]
    if not host:
        raise InvalidDomain("no host name")
    return host[1:-1] if host.startswith("[") else host


def _ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


@functools.lru_cache(maxsize=8192)
def normalise_domain(value: str) -> str:
    """One canonical host for a URL or host name.

    Lower-cased, IDNA (UTS 46) to ASCII, scheme, port, path and a trailing dot stripped,
    a leading ``www.`` folded; IP addresses (in any form the URL Standard accepts) in
    their compressed form. Raises :class:`InvalidDomain`, also for credentials.

    A pure function of its argument, kept for the last 8,192 distinct values (a runtime
    sends the same domain on every validate; parsing it cost a twentieth of the call).
    Refusals are not kept.
    """
    host = _host_of(value)
    ip = _ip_literal(host)
    if ip is not None:
        return str(ip)
    host = host.rstrip(".")
    if not host:
        raise InvalidDomain("no host name")
    ip = _ip_literal(host)
    if ip is not None:  # ``127.0.0.1.``: the parser keeps the dot, the address is the same
        return str(ip)
    if len(host) > 253 or not all(LABEL.match(label) for label in host.split(".")):
        raise InvalidDomain("not a valid host name")
    if "xn--" in host:
        try:  # the URL parser maps Unicode to ACE; idna checks ACE it was given as such
            idna.decode(host)
        except (idna.IDNAError, UnicodeError, ValueError) as exc:
            raise InvalidDomain(f"not a valid host name: {exc}") from None
    return host[4:] if host.startswith("www.") and host.count(".") >= 2 else host


def classify_environment(domain: str, rules: SeatRules | None = None) -> str:
    """``local``, ``staging`` or ``production`` for a normalised domain."""
    rules = rules or SeatRules()
    ip = _ip_literal(domain)
    if ip is not None:
        if ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_unspecified:
            return LOCAL
        return PRODUCTION
    labels = domain.split(".")
    if len(labels) == 1 or labels[-1] in LOCAL_TLDS or domain.endswith(LOCAL_SUFFIXES):
        return LOCAL
    # A prefix names a subdomain: ``staging.shop.com`` is staging, ``staging.com`` is not.
    if any(
        domain.startswith(prefix) and "." in domain[len(prefix) :]
        for prefix in rules.staging_prefixes
    ):
        return STAGING
    if any(domain.endswith(suffix) for suffix in rules.staging_suffixes):
        return STAGING
    return PRODUCTION
