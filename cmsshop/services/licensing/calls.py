"""Licensing rules: activate, validate and deactivate an installation; issue its lease.

Each call runs in the request's transaction and signs the lease *before* that
transaction commits. If signing fails, SigningUnavailable propagates and the request
rolls back: no activation, no nonce, no ``lastValidatedAt`` is kept without a lease.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import random
import threading
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from sqlalchemy import bindparam, case, delete, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

from cmsshop.db import take_write_lock
from cmsshop.errors import ApiError, Conflict, NotFound, RateLimited
from cmsshop.hotsql import HotStatement, RawTransaction, db_time, from_db_time, raw_transaction
from cmsshop.models import (
    Activation,
    License,
    LicenseAuditEntry,
    LicenseNonce,
    Product,
)
from cmsshop.models.meta import UTCDateTime
from cmsshop.services.licensing.domains import PRODUCTION, SeatRules, classify_environment
from cmsshop.services.licensing.signing import LeaseSigner
from cmsshop.services.ratelimit import Check, RateLimiter
from cmsshop.util import isoformat_z, utcnow

NONCE_PURGE_PROBABILITY = 0.01


@dataclasses.dataclass(frozen=True)
class LicensingPolicy:
    """The site's licensing settings, read once at start-up."""

    issuer: str
    lease_lifetime: int = 7 * 86400
    staging_cap: int = 3
    nonce_window: int = 86400
    seat_rules: SeatRules = SeatRules()

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
        )


@dataclasses.dataclass(frozen=True)
class LicenseRequest:
    """The five items a runtime sends, already validated; ``domain`` is normalised."""

    product: str
    license_key: str
    domain: str
    fingerprint: str
    nonce: str

    @property
    def fingerprint_sha256(self) -> str:
        return fingerprint_hash(self.fingerprint)


def fingerprint_hash(fingerprint: str) -> str:
    """Hex SHA-256 of the installation id (the lease's ``fp`` claim)."""
    return hashlib.sha256(fingerprint.encode("utf-8")).hexdigest()


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
    limits: list[tuple[str, int, int]] | None = None
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


@dataclasses.dataclass
class LicensingResult:
    license: License
    product: str
    activation: Activation
    activations_used: int
    lease: str
    lease_expires_at: dt.datetime
    created: bool = False
    deactivated: bool = False

    def body(self) -> dict[str, Any]:
        license, activation = self.license, self.activation
        body: dict[str, Any] = {
            "license": {
                "product": self.product,
                "status": license.status,
                "expiresAt": isoformat_z(license.expires_at),
                "maxActivations": license.max_activations,
                "activationsUsed": self.activations_used,
            },
            "activation": {
                "id": activation.id,
                "domain": activation.domain,
                "environment": activation.environment,
                "active": activation.active,
                "activatedAt": isoformat_z(activation.activated_at),
                "lastValidatedAt": isoformat_z(activation.last_validated_at),
                "deactivatedAt": isoformat_z(activation.deactivated_at),
            },
            "lease": self.lease,
            "leaseExpiresAt": isoformat_z(self.lease_expires_at),
        }
        if self.deactivated:
            body = {"deactivated": True, **body}
        return body


# --- errors --------------------------------------------------------------------------------


def _license_not_found() -> ApiError:
    return NotFound(
        "No license has this key.",
        code="license_not_found",
        title="License not found",
        hints=["Check the license key for typos; it is shown in your dashboard."],
    )


def _product_mismatch() -> ApiError:
    return ApiError(
        "This license key is for another product.",
        status=403,
        code="product_mismatch",
        title="Wrong product",
        hints=["Use the license key you received for this product."],
    )


def _license_state_error(code: str, message: str, hint: str) -> ApiError:
    return ApiError(message, status=403, code=code, title="License not usable", hints=[hint])


def _activation_not_found(message: str) -> ApiError:
    return NotFound(
        message,
        code="activation_not_found",
        title="Activation not found",
        hints=["Activate this installation first (POST /api/license/activate)."],
    )


# --- the hot path's statements -------------------------------------------------------------


# SQLite has one writer at a time. Threads of this process that want to write wait on
# this lock, which hands over at once, instead of in SQLite's busy handler, which polls
# with sleeps of up to 100 ms (that made the p99 of validate about 0.7 s under load).
# Other processes still wait in the busy handler.
SQLITE_WRITER = threading.Lock()


def _one_writer(engine: Engine):
    return SQLITE_WRITER if engine.dialect.name == "sqlite" else contextlib.nullcontext()


# --- steps ---------------------------------------------------------------------------------


def _is_sqlite(session: Session | Connection) -> bool:
    bind = session if isinstance(session, Connection) else session.get_bind()
    return bind.dialect.name == "sqlite"


def open_license(
    session: Session, data: LicenseRequest, audit: AuditRecord, *, for_update: bool = False
) -> tuple[License, str]:
    """The usable license of the key and its product slug, or the matching 4xx.

    ``for_update`` locks the license row (PostgreSQL) so that counting seats and taking
    one are atomic across concurrent activations.
    """
    take_write_lock(session)
    query = (
        select(License, Product.slug)
        .join(Product, Product.id == License.product_id)
        .where(License.key == data.license_key)
    )
    if for_update:
        query = query.with_for_update(of=License)
    row = session.execute(query).first()
    if row is None:
        raise _license_not_found()
    license, slug = row
    audit.license_id = license.id
    if slug != data.product:
        raise _product_mismatch()
    check_license_state(license)
    return license, slug


def check_license_state(license: License, now: dt.datetime | None = None) -> None:
    """403 for a revoked, suspended or expired license (expiry wins over a stale status)."""
    now = now or utcnow()
    if license.status == "revoked":
        raise _license_state_error(
            "license_revoked",
            "This license has been revoked.",
            "Contact support if you think this is a mistake.",
        )
    if license.status == "suspended":
        raise _license_state_error(
            "license_suspended",
            "This license is suspended.",
            "Contact support or check your account for an open payment issue.",
        )
    if license.status == "expired" or (
        license.expires_at is not None and license.expires_at <= now
    ):
        raise _license_state_error(
            "license_expired",
            f"This license expired on {isoformat_z(license.expires_at) or 'an earlier date'}.",
            "Renew the license in your dashboard to keep using the product.",
        )


_NONCE_UPSERT: dict[str, Any] = {}


def _nonce_upsert(dialect: str):
    """Insert the nonce, or take over its row if older than the window; built once."""
    if dialect not in _NONCE_UPSERT:
        dml = postgresql if dialect == "postgresql" else sqlite
        now = bindparam("now", type_=UTCDateTime())
        _NONCE_UPSERT[dialect] = (
            dml.insert(LicenseNonce)
            .values(license_id=bindparam("license_id"), nonce=bindparam("nonce"), seen_at=now)
            .on_conflict_do_update(
                index_elements=[LicenseNonce.license_id, LicenseNonce.nonce],
                set_={"seen_at": now},
                where=LicenseNonce.seen_at < bindparam("cutoff", type_=UTCDateTime()),
            )
            .returning(LicenseNonce.id)
        )
    return _NONCE_UPSERT[dialect]


def record_nonce(
    session: Session | Connection, license_id: int, nonce: str, now: dt.datetime, window: int
) -> None:
    """Remember ``nonce`` for the license; 409 if it was seen within ``window`` seconds.

    One statement: insert, or take over a row older than the window. A racing copy of
    the same request waits on the unique key and then sees the winner's row.
    """
    cutoff = now - dt.timedelta(seconds=window)
    stmt = _nonce_upsert("sqlite" if _is_sqlite(session) else "postgresql")
    params = {"license_id": license_id, "nonce": nonce, "now": now, "cutoff": cutoff}
    if session.execute(stmt, params).first() is None:
        raise _nonce_reused()
    if random.random() < NONCE_PURGE_PROBABILITY:
        session.execute(delete(LicenseNonce).where(LicenseNonce.seen_at < cutoff))


def find_activation(
    session: Session, license_id: int, fingerprint_sha256: str
) -> Activation | None:
    return session.scalar(
        select(Activation).where(
            Activation.license_id == license_id,
            Activation.fingerprint_sha256 == fingerprint_sha256,
        )
    )


def seats_used(session: Session, license_id: int, exclude_id: int | None = None) -> tuple[int, int]:
    """Active (production, staging + local) activations of the license."""
    production = Activation.environment == PRODUCTION
    query = select(
        func.coalesce(func.sum(case((production, 1), else_=0)), 0),
        func.coalesce(func.sum(case((production, 0), else_=1)), 0),
    ).where(Activation.license_id == license_id, Activation.active.is_(True))
    if exclude_id is not None:
        query = query.where(Activation.id != exclude_id)
    used_production, used_other = session.execute(query).one()
    return int(used_production), int(used_other)


def lease_claims(
    policy: LicensingPolicy,
    license: License,
    product: str,
    activation: Activation,
    nonce: str,
    activations_used: int,
    now: dt.datetime,
    deactivated: bool = False,
) -> dict[str, Any]:
    """The lease's claims; ``exp`` never passes the license's own expiry."""
    iat = int(now.timestamp())
    exp = iat + policy.lease_lifetime
    if license.expires_at is not None:
        exp = max(iat, min(exp, int(license.expires_at.timestamp())))
    claims: dict[str, Any] = {
        "iss": policy.issuer,
        "aud": product,
        "sub": str(license.id),
        "act": activation.id,
        "dom": activation.domain,
        "fp": activation.fingerprint_sha256,
        "nonce": nonce,
        "env": activation.environment,
        "lic": {
            "status": license.status,
            "expiresAt": isoformat_z(license.expires_at),
            "maxActivations": license.max_activations,
            "activationsUsed": activations_used,
        },
        "iat": iat,
        "nbf": iat,
        "exp": exp,
        "refresh_after": iat + (exp - iat) // 2,
    }
    if deactivated:
        claims["deactivated"] = True
    return claims


def _finish(
    session: Session,
    signer: LeaseSigner,
    policy: LicensingPolicy,
    license: License,
    product: str,
    activation: Activation,
    data: LicenseRequest,
    audit: AuditRecord,
    now: dt.datetime,
    outcome: str,
    status: int,
    created: bool = False,
    deactivated: bool = False,
) -> LicensingResult:
    """Count seats, sign the lease (may raise SigningUnavailable) and log the success."""
    session.flush()
    used_production, _ = seats_used(session, license.id)
    claims = lease_claims(
        policy, license, product, activation, data.nonce, used_production, now, deactivated
    )
    lease = signer.sign(claims)
    audit.activation_id = activation.id
    audit.environment = activation.environment
    session.add(audit.entry(outcome, status))
    return LicensingResult(
        license=license,
        product=product,
        activation=activation,
        activations_used=used_production,
        lease=lease,
        lease_expires_at=dt.datetime.fromtimestamp(claims["exp"], dt.UTC),
        created=created,
        deactivated=deactivated,
    )


# --- the three calls -----------------------------------------------------------------------


def activate(
    session: Session,
    signer: LeaseSigner,
    policy: LicensingPolicy,
    data: LicenseRequest,
    audit: AuditRecord,
) -> LicensingResult:
    """Bind the installation to the license, using a seat unless it already has one.

    Idempotent: the same fingerprint again returns its activation with a fresh lease. A
    known fingerprint on a new domain moves the activation (and needs a seat of the new
    domain's kind). Local and staging sites use the separate staging cap.
    """
    now = utcnow()
    license, product = open_license(session, data, audit, for_update=True)
    record_nonce(session, license.id, data.nonce, now, policy.nonce_window)
    environment = classify_environment(data.domain, policy.seat_rules)
    audit.environment = environment
    activation = find_activation(session, license.id, data.fingerprint_sha256)
    if activation is not None:
        audit.activation_id = activation.id
    if activation is not None and activation.active and activation.domain == data.domain:
        return _finish(
            session, signer, policy, license, product, activation, data, audit, now,
            "already_active", 200,
        )  # fmt: skip

    was_active = activation is not None and activation.active
    used_production, used_other = seats_used(
        session, license.id, exclude_id=activation.id if was_active else None
    )
    if environment == PRODUCTION:
        used, cap = used_production, license.max_activations
    else:
        used, cap = used_other, policy.staging_cap
    if used >= cap:
        kind = "production" if environment == PRODUCTION else "staging/local"
        raise Conflict(
            f"All {cap} {kind} activations of this license are in use.",
            code="activation_limit_reached",
            title="Activation limit reached",
            hints=[
                "Deactivate an installation you no longer use (POST /api/license/deactivate "
                "from it) to free its seat, or buy another license.",
                "Staging and local sites (localhost, *.test, staging.*) do not use a paid "
                "seat; they have a separate allowance.",
            ],
            extra={"activationsUsed": used, "maxActivations": cap, "environment": environment},
        )

    if activation is None:
        activation = Activation(
            license_id=license.id,
            fingerprint=data.fingerprint,
            fingerprint_sha256=data.fingerprint_sha256,
            domain=data.domain,
            environment=environment,
            active=True,
            activated_at=now,
        )
        session.add(activation)
        outcome, created = "activated", True
    else:
        outcome, created = ("moved", False) if was_active else ("reactivated", True)
        if not was_active:
            activation.activated_at = now
        activation.active = True
        activation.deactivated_at = None
        activation.domain = data.domain
        activation.environment = environment
    status = 201 if created else 200
    return _finish(
        session, signer, policy, license, product, activation, data, audit, now,
        outcome, status, created=created,
    )  # fmt: skip


# validate's one read: the license, its product, the installation and the paid seats used.
_VALIDATE_LOOKUP = HotStatement(
    "SELECT l.id, l.status, l.max_activations, l.expires_at, p.slug, a.id, a.domain, "
    "a.environment, a.active, a.activated_at, a.deactivated_at, "
    "(SELECT count(*) FROM activations AS s WHERE s.licence_id = l.id AND s.active "
    "AND s.environment = 'production') "
    "FROM licences AS l JOIN products AS p ON p.id = l.product_id "
    "LEFT OUTER JOIN activations AS a ON a.licence_id = l.id AND a.fingerprint_sha256 = :fp "
    "WHERE l.key = :key"
)
_PURGE_NONCES = HotStatement("DELETE FROM licence_nonces WHERE seen_at < :cutoff")
_TOUCH_ACTIVATION = HotStatement("UPDATE activations SET last_validated_at = :now WHERE id = :id")
_INSERT_AUDIT = HotStatement(
    "INSERT INTO licence_audit_log (created_at, action, outcome, status, licence_id, "
    "activation_id, key_hint, product, fingerprint_sha256, domain, environment, ip, "
    "request_id) VALUES (:created_at, :action, :outcome, :status, :license_id, "
    ":activation_id, :key_hint, :product, :fingerprint_sha256, :domain, :environment, :ip, "
    ":request_id)"
)
# The nonce, with the license found by key (INSERT .. SELECT): validate's first
# statement after the rate counts is a write, so on SQLite no read comes before the
# write lock. (SQLite needs the WHERE to parse ON CONFLICT after a SELECT.)
_KEYED_NONCE = HotStatement(
    "INSERT INTO licence_nonces (licence_id, nonce, seen_at) "
    "SELECT id, :nonce, :now FROM licences WHERE key = :key "
    "ON CONFLICT (licence_id, nonce) DO UPDATE SET seen_at = excluded.seen_at "
    "WHERE licence_nonces.seen_at < :cutoff RETURNING id"
)

# PostgreSQL runs data-modifying CTEs, so there the nonce rides with the lookup and the
# touch with the audit insert: two round trips instead of four.
# (Built from the constant SQL above; no input is ever formatted into SQL.)
_PG_NONCE_AND_LOOKUP = HotStatement(
    f"WITH n AS ({_KEYED_NONCE.sql['sqlite']}) "  # noqa: S608
    + _VALIDATE_LOOKUP.sql["sqlite"].replace(
        " FROM licences AS l ", ", (SELECT id FROM n) FROM licences AS l ", 1
    )
)
_PG_TOUCH_AND_AUDIT = HotStatement(
    "WITH t AS (UPDATE activations SET last_validated_at = :touched_at WHERE id = :touched_id) "  # noqa: S608
    + _INSERT_AUDIT.sql["sqlite"]
)


def _nonce_reused() -> ApiError:
    return Conflict(
        "This nonce was already used with this license.",
        code="nonce_reused",
        title="Nonce reused",
        hints=["Send a fresh random nonce (16-128 base64url characters) with every call."],
    )


def validate(
    engine: Engine,
    signer: LeaseSigner,
    policy: LicensingPolicy,
    data: LicenseRequest,
    audit: AuditRecord,
    limiter: RateLimiter | None = None,
    limits: Sequence[Check] = (),
) -> LicensingResult:
    """Check an active installation on its activated domain; refresh ``lastValidatedAt``.

    The hot path (runtimes call it on every lease refresh), so it runs as one short
    transaction of its own on a plain connection rather than through the ORM session:
    rate counts (``limits``; on PostgreSQL they commit separately first), the nonce,
    one lookup, one update and the audit row, each a statement built once. The lease is
    signed before the commit; any error rolls everything back.
    """
    with _one_writer(engine):
        if limits and engine.dialect.name != "sqlite":
            refusal = limiter.count(limits)
            audit.counted = True
            limits = ()
            if refusal is not None:
                raise RateLimited(refusal.retry_after)
        with raw_transaction(engine) as conn:
            if limits:
                refusal = limiter.count_on(conn, limits)  # SQLite: takes the write lock
                if refusal is not None:
                    raise RateLimited(refusal.retry_after)
            return _validate_on(conn, signer, policy, data, audit)


def _validate_on(
    conn: RawTransaction,
    signer: LeaseSigner,
    policy: LicensingPolicy,
    data: LicenseRequest,
    audit: AuditRecord,
) -> LicensingResult:
    now = utcnow()
    fp = data.fingerprint_sha256
    cutoff = now - dt.timedelta(seconds=policy.nonce_window)
    nonce_params = {
        "key": data.license_key,
        "nonce": data.nonce,
        "now": db_time(conn, now),
        "cutoff": db_time(conn, cutoff),
    }
    postgresql = conn.dialect_name == "postgresql"
    if postgresql:
        cursor = _PG_NONCE_AND_LOOKUP.run(conn, {**nonce_params, "fp": fp})
        row = cursor.fetchone()
        nonce_row = (row[12],) if row is not None and row[12] is not None else None
    else:
        cursor = _KEYED_NONCE.run(conn, nonce_params)
        nonce_row = cursor.fetchone()
        cursor.close()
        cursor = _VALIDATE_LOOKUP.run(conn, {"key": data.license_key, "fp": fp})
        row = cursor.fetchone()
    cursor.close()
    if row is None:
        raise _license_not_found()
    license = SimpleNamespace(
        id=row[0], status=row[1], max_activations=row[2], expires_at=from_db_time(row[3])
    )
    row = SimpleNamespace(
        slug=row[4],
        activation_id=row[5],
        domain=row[6],
        environment=row[7],
        active=bool(row[8]),
        activated_at=from_db_time(row[9]),
        deactivated_at=from_db_time(row[10]),
        seats_used=int(row[11]),
    )
    audit.license_id = license.id
    if row.slug != data.product:
        raise _product_mismatch()
    check_license_state(license, now)
    if nonce_row is None:
        raise _nonce_reused()
    if random.random() < NONCE_PURGE_PROBABILITY:
        _PURGE_NONCES.run(conn, {"cutoff": nonce_params["cutoff"]}).close()
    if row.activation_id is None:
        raise _activation_not_found("This installation was never activated on this license.")
    audit.activation_id = row.activation_id
    audit.environment = row.environment
    if not row.active:
        raise _activation_not_found("This installation was deactivated; activate it again.")
    if row.domain != data.domain:
        raise _activation_not_found(
            "This installation is activated for another domain; activate it again from "
            "this one to move it."
        )
    activation = SimpleNamespace(
        id=row.activation_id,
        domain=row.domain,
        fingerprint_sha256=fp,
        environment=row.environment,
        active=True,
        activated_at=row.activated_at,
        last_validated_at=now,
        deactivated_at=row.deactivated_at,
    )
    if not postgresql:
        _TOUCH_ACTIVATION.run(conn, {"id": activation.id, "now": nonce_params["now"]}).close()
    claims = lease_claims(policy, license, row.slug, activation, data.nonce, row.seats_used, now)
    lease = signer.sign(claims)
    entry = audit.values("validated", 200)
    entry["created_at"] = db_time(conn, entry["created_at"])
    if postgresql:
        entry.update(touched_at=nonce_params["now"], touched_id=activation.id)
        _PG_TOUCH_AND_AUDIT.run(conn, entry).close()
    else:
        _INSERT_AUDIT.run(conn, entry).close()
    return LicensingResult(
        license=license,
        product=row.slug,
        activation=activation,
        activations_used=row.seats_used,
        lease=lease,
        lease_expires_at=dt.datetime.fromtimestamp(claims["exp"], dt.UTC),
    )


def deactivate(
    session: Session,
    signer: LeaseSigner,
    policy: LicensingPolicy,
    data: LicenseRequest,
    audit: AuditRecord,
) -> LicensingResult:
    """Free the installation's seat (found by fingerprint, whatever its domain now).

    Idempotent: an installation that is already inactive gets the same answer again.
    """
    now = utcnow()
    license, product = open_license(session, data, audit)
    record_nonce(session, license.id, data.nonce, now, policy.nonce_window)
    activation = find_activation(session, license.id, data.fingerprint_sha256)
    if activation is None:
        raise _activation_not_found("This installation was never activated on this license.")
    outcome = "deactivated" if activation.active else "already_inactive"
    if activation.active:
        activation.active = False
        activation.deactivated_at = now
    return _finish(
        session, signer, policy, license, product, activation, data, audit, now,
        outcome, 200, deactivated=True,
    )  # fmt: skip
