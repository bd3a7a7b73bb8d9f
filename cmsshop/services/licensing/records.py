"""What a licensing call carries: the site's policy, the parsed request, the audit
record and the result (plain dataclasses; the view layer turns them into JSON)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import hashlib
from typing import Any

from sqlalchemy.engine import Engine

from cmsshop.models import LicenseAuditEntry
from cmsshop.services.licensing.domains import SeatRules
from cmsshop.services.licensing.signing import LeaseSigner
from cmsshop.util import utcnow


@dataclasses.dataclass(frozen=True)
class LicensingPolicy:
    """The site's licensing settings, read once at start-up (a pyramid_services service)."""

    issuer: str
    lease_lifetime: int = 7 * 86400
    staging_cap: int = 3
    nonce_window: int = 86400
    seat_rules: SeatRules = SeatRules()
    retry_after: int = 30  # seconds a runtime waits after signing_unavailable
    # Leases for offline installs (services/licensing/offline.py) say so: ``offline: true``.
    offline: bool = False

    @classmethod
    def from_settings(cls, settings) -> LicensingPolicy:
        return cls(
            issuer=settings["cmsshop.base_url"],
            lease_lifetime=settings["cmsshop.license_lease_lifetime"],
            staging_cap=settings["cmsshop.license_staging_cap"],
            nonce_window=settings["cmsshop.license_nonce_window"],
            seat_rules=SeatRules.from_lists(
                settings["cmsshop.license_staging_prefixes"],
                settings["cmsshop.license_staging_suffixes"],
            ),
            retry_after=settings["cmsshop.license_retry_after"],
        )


@dataclasses.dataclass(frozen=True)
class Licensing:
    """What every licensing call works with: the database, the signer and the policy."""

    engine: Engine
    signer: LeaseSigner
    policy: LicensingPolicy


@dataclasses.dataclass(frozen=True)
class LicenseRequest:
    """The five items a runtime sends, already validated; ``domain`` is normalised."""

    product: str
    license_key: str
    domain: str
    fingerprint: str
    nonce: str

    @functools.cached_property
    def fingerprint_sha256(self) -> str:  # (asked five times a validate: hashed once)
        return fingerprint_hash(self.fingerprint)


def fingerprint_hash(fingerprint: str) -> str:
    """Hex SHA-256 of the installation id (the lease's ``fp`` claim)."""
    return hashlib.sha256(fingerprint.encode("utf-8")).hexdigest()


# The longest key a call may name (the runtimes' schema allows as much).
MAX_KEY_LENGTH = 64


def normalise_license_key(raw: str | None) -> str | None:
    """A key as a customer may type or paste it (in a URL too), in its stored form: spaces
    around it dropped, upper case, as the runtimes' schema does. None when it cannot be
    a key (empty, too long, not printable ASCII), so it never reaches the database."""
    if not raw:
        return None
    key = raw.strip().upper()
    if not key or len(key) > MAX_KEY_LENGTH or not key.isascii() or not key.isprintable():
        return None
    return key


def key_hint(license_key: str) -> str:
    """A short hash of a key for logs and rate-limit buckets (never the key itself)."""
    return hashlib.sha256(license_key.encode("utf-8")).hexdigest()[:16]


@dataclasses.dataclass
class AuditRecord:
    """What is known about a call so far; becomes one LicenseAuditEntry."""

    action: str
    ip: str
    request_id: str | None = None
    product: str | None = None
    key_hint: str | None = None
    fingerprint_sha256: str | None = None
    domain: str | None = None
    environment: str | None = None
    license_id: int | None = None
    activation_id: int | None = None
    counted: bool = False  # against the rate limits, in a committed transaction

    def describe(self, data: LicenseRequest) -> None:
        self.product = data.product[:100]
        self.key_hint = key_hint(data.license_key)
        self.fingerprint_sha256 = data.fingerprint_sha256
        self.domain = data.domain[:255]

    def values(self, outcome: str, status: int) -> dict[str, Any]:
        return {
            "created_at": utcnow(),
            "action": self.action,
            "outcome": outcome[:64],
            "status": status,
            "license_id": self.license_id,
            "activation_id": self.activation_id,
            "key_hint": self.key_hint,
            "product": self.product,
            "fingerprint_sha256": self.fingerprint_sha256,
            "domain": self.domain,
            "environment": self.environment,
            "ip": self.ip[:64],
            "request_id": self.request_id,
        }

    def entry(self, outcome: str, status: int) -> LicenseAuditEntry:
        return LicenseAuditEntry(**self.values(outcome, status))


@dataclasses.dataclass(frozen=True)
class LicenseFacts:
    """The license as a lease states it."""

    id: int
    status: str
    max_activations: int
    expires_at: dt.datetime | None
    features: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class ActivationFacts:
    """One installation as the answer (and its lease) state it."""

    id: int
    domain: str
    fingerprint_sha256: str
    environment: str
    active: bool
    activated_at: dt.datetime | None
    last_validated_at: dt.datetime | None
    deactivated_at: dt.datetime | None
    # Until when the seat stays counted whatever ``active`` says (an offline lease).
    seat_held_until: dt.datetime | None = None


@dataclasses.dataclass(frozen=True)
class LicensingResult:
    """A successful call: what the runtime is told, and its signed lease."""

    license: LicenseFacts
    product: str
    activation: ActivationFacts
    activations_used: int
    lease: str
    lease_expires_at: dt.datetime
    created: bool = False
    deactivated: bool = False
