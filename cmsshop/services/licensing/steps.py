"""The steps every licensing call shares: the license checks, the nonce, seat counts,
the lease's claims, and signing a lease without holding a lock (:func:`sign_and_commit`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import random
import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy import bindparam, case, delete, func, or_, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

from cmsshop.models import Activation, License, LicenseNonce, Product
from cmsshop.models.meta import UTCDateTime
from cmsshop.services.licensing import problems
from cmsshop.services.licensing.domains import PRODUCTION
from cmsshop.services.licensing.records import (
    ActivationFacts,
    AuditRecord,
    LicenseFacts,
    LicenseRequest,
    LicensingPolicy,
    LicensingResult,
)
from cmsshop.services.licensing.signing import LeaseSigner, SigningUnavailable
from cmsshop.util import isoformat_z, utcnow

NONCE_PURGE_PROBABILITY = 0.01
# How often a call signs outside the lock and then finds, under the lock, that the
# license changed meanwhile, before it signs under the lock after all (see sign_and_commit).
SIGN_ATTEMPTS = 3

# SQLite has one writer at a time. Threads of this process that want to write wait on
# this lock, which hands over at once, instead of in SQLite's busy handler, which polls
# with sleeps of up to 100 ms (that made the p99 of validate about 0.7 s under load).
# Other processes still wait in the busy handler.
SQLITE_WRITER = threading.Lock()


def one_writer(engine: Engine):
    """Hold SQLITE_WRITER on SQLite; nothing on PostgreSQL (row locks do the work)."""
    return SQLITE_WRITER if engine.dialect.name == "sqlite" else contextlib.nullcontext()


def is_sqlite(session: Session | Connection) -> bool:
    bind = session if isinstance(session, Connection) else session.get_bind()
    return bind.dialect.name == "sqlite"


# --- the license -----------------------------------------------------------------------------


def open_license(
    session: Session, data: LicenseRequest, audit: AuditRecord, *, lock: bool = False
) -> tuple[License, str]:
    """The usable license of the key and its product slug, or the matching 4xx.

    ``lock`` takes the license row with FOR NO KEY UPDATE (PostgreSQL) so that counting
    seats and taking one are atomic across concurrent activations. NO KEY UPDATE, not
    UPDATE: inserting a nonce or an activation takes KEY SHARE on the license (the
    foreign key check), which FOR UPDATE would block and NO KEY UPDATE does not, so a
    validate never waits for an activation.
    """
    query = (
        select(License, Product.slug)
        .join(Product, Product.id == License.product_id)
        .where(License.key == data.license_key)
    )
    if lock:
        query = query.with_for_update(of=License, key_share=True)
    row = session.execute(query).first()
    if row is None:
        raise problems.license_not_found()
    license, slug = row
    audit.license_id = license.id
    if slug != data.product:
        raise problems.product_mismatch()
    check_license_state(license)
    return license, slug


def check_license_state(license: License | LicenseFacts, now: dt.datetime | None = None) -> None:
    """403 for a revoked, suspended or expired license (expiry wins over a stale status)."""
    now = now or utcnow()
    if license.status == "revoked":
        raise problems.license_state_error(
            "license_revoked",
            "This license has been revoked.",
            "Contact support if you think this is a mistake.",
        )
    if license.status == "suspended":
        raise problems.license_state_error(
            "license_suspended",
            "This license is suspended.",
            "Contact support or check your account for an open payment issue.",
        )
    if license.status == "expired" or (
        license.expires_at is not None and license.expires_at <= now
    ):
        raise problems.license_state_error(
            "license_expired",
            f"This license expired on {isoformat_z(license.expires_at) or 'an earlier date'}.",
            "Renew the license in your dashboard to keep using the product.",
        )


def check_installation(found: bool, active: bool, domain: str | None, wanted: str) -> None:
    """404 ``activation_not_found`` unless the installation is an active activation of
    the license on the domain it calls from (validate and update checks)."""
    if not found:
        raise problems.activation_not_found(
            "This installation was never activated on this license."
        )
    if not active:
        raise problems.activation_not_found("This installation was deactivated; activate it again.")
    if domain != wanted:
        raise problems.activation_not_found(
            "This installation is activated for another domain; activate it again from "
            "this one to move it."
        )


def license_facts(license: License) -> LicenseFacts:
    return LicenseFacts(
        license.id,
        license.status,
        license.max_activations,
        license.expires_at,
        tuple(license.features or ()),
    )


# --- nonces and seats ------------------------------------------------------------------------

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
    session: Session, license_id: int, nonce: str, now: dt.datetime, window: int
) -> None:
    """Remember ``nonce`` for the license; 409 if it was seen within ``window`` seconds.

    One statement: insert, or take over a row older than the window. A racing copy of
    the same request waits on the unique key and then sees the winner's row.
    """
    cutoff = now - dt.timedelta(seconds=window)
    stmt = _nonce_upsert("sqlite" if is_sqlite(session) else "postgresql")
    params = {"license_id": license_id, "nonce": nonce, "now": now, "cutoff": cutoff}
    if session.execute(stmt, params).first() is None:
        raise problems.nonce_reused()
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


def holds_seat(now: dt.datetime):
    """The activations that take a seat: the active ones, and those whose offline lease
    still works (it needs no shop to run, so deactivating it freed nothing)."""
    return or_(Activation.active.is_(True), Activation.seat_held_until > now)


def seats_used(
    session: Session,
    license_id: int,
    exclude_id: int | None = None,
    now: dt.datetime | None = None,
) -> tuple[int, int]:
    """Seats taken (production, staging + local) of the license (see holds_seat)."""
    production = Activation.environment == PRODUCTION
    query = select(
        func.coalesce(func.sum(case((production, 1), else_=0)), 0),
        func.coalesce(func.sum(case((production, 0), else_=1)), 0),
    ).where(Activation.license_id == license_id, holds_seat(now or utcnow()))
    if exclude_id is not None:
        query = query.where(Activation.id != exclude_id)
    used_production, used_other = session.execute(query).one()
    return int(used_production), int(used_other)


def seats_held_until(session: Session, license_id: int, now: dt.datetime) -> dt.datetime | None:
    """When the first seat held by a deactivated installation's offline lease frees."""
    return session.scalar(
        select(func.min(Activation.seat_held_until)).where(
            Activation.license_id == license_id,
            Activation.active.is_(False),
            Activation.seat_held_until > now,
        )
    )


# --- the lease -------------------------------------------------------------------------------


def lease_claims(
    policy: LicensingPolicy,
    license: LicenseFacts,
    product: str,
    activation: ActivationFacts,
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
            "features": list(license.features),
        },
        "iat": iat,
        "nbf": iat,
        "exp": exp,
        "refresh_after": iat + (exp - iat) // 2,
    }
    if deactivated:
        claims["deactivated"] = True
    if policy.offline:
        claims["offline"] = True
    return claims


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a call will write and answer, read from the database; ``claims`` follow
    from it. Two plans with equal claims and outcome sign to the same lease."""

    license: LicenseFacts
    product: str
    activation: ActivationFacts
    activations_used: int
    claims: dict[str, Any]
    outcome: str
    status: int = 200
    created: bool = False
    deactivated: bool = False
    insert: bool = False  # the activation row is new

    @classmethod
    def of(
        cls,
        policy: LicensingPolicy,
        data: LicenseRequest,
        now: dt.datetime,
        license: LicenseFacts,
        product: str,
        activation: ActivationFacts,
        activations_used: int,
        outcome: str,
        **flags: Any,
    ) -> Plan:
        claims = lease_claims(
            policy, license, product, activation, data.nonce, activations_used, now,
            flags.get("deactivated", False),
        )  # fmt: skip
        return cls(license, product, activation, activations_used, claims, outcome, **flags)

    def signs_like(self, other: Plan) -> bool:
        return self.claims == other.claims and self.outcome == other.outcome

    def result(self, lease: str) -> LicensingResult:
        return LicensingResult(
            license=self.license,
            product=self.product,
            activation=self.activation,
            activations_used=self.activations_used,
            lease=lease,
            lease_expires_at=dt.datetime.fromtimestamp(self.claims["exp"], dt.UTC),
            created=self.created,
            deactivated=self.deactivated,
        )


class StalePlan(Exception):
    """Under the lock the license no longer matches the plan a lease was signed for."""

    def __init__(self, current: Plan):
        super().__init__("the license changed while the lease was being signed")
        self.current = current


def sign_lease(signer: LeaseSigner, policy: LicensingPolicy, claims: dict[str, Any]) -> str:
    """The compact JWS of ``claims``, or 503 ``signing_unavailable``."""
    try:
        return signer.sign(claims)
    except SigningUnavailable as exc:
        raise problems.LeaseSigningUnavailable(exc, policy.retry_after) from None


def sign_and_commit(
    signer: LeaseSigner,
    policy: LicensingPolicy,
    plan: Plan,
    commit: Callable[[Plan, str | None], LicensingResult],
) -> LicensingResult:
    """Sign the planned lease with no lock held, then let ``commit`` write it under one.

    The signer may be remote and slow (up to its deadline). Signing inside the locked
    transaction would make every other call on the license -- and on SQLite every
    writer -- wait for the network. Signing first and committing afterwards would keep
    a seat nobody got a lease for when signing fails. So: read without locks, sign,
    then ``commit`` takes the lock, reads again and writes only if the plan still
    holds; if another call changed the license meanwhile, ``commit`` raises StalePlan,
    its transaction rolls back (nothing written, lock released) and the new plan is
    signed. Nothing is persisted unless its lease exists, and the lock is held for
    database work only. After SIGN_ATTEMPTS stale plans ``commit`` gets no lease and
    signs under the lock, so a busy license still gets an answer.
    """
    for _ in range(SIGN_ATTEMPTS):
        lease = sign_lease(signer, policy, plan.claims)
        try:
            return commit(plan, lease)
        except StalePlan as stale:
            plan = stale.current
    return commit(plan, None)


def lease_for(
    signer: LeaseSigner, policy: LicensingPolicy, planned: Plan, current: Plan, lease: str | None
) -> str:
    """Inside ``commit``: the lease signed for ``planned`` if ``current`` (read under the
    lock) signs the same, a lease signed now when no lease was made, else StalePlan."""
    if lease is None:
        return sign_lease(signer, policy, current.claims)
    if not current.signs_like(planned):
        raise StalePlan(current)
    return lease
