"""Activate and deactivate: taking and freeing a seat of a license.

Each call reads and plans without a lock, signs the lease, and then writes in a short
transaction of its own that holds the license lock only for database work (see
steps.sign_and_commit). The request's own session is not used: the call commits
before the answer is sent, and a failure leaves nothing behind.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from cmsshop.db import one_snapshot, take_write_lock
from cmsshop.errors import NotFound
from cmsshop.models import Activation, License, LicenseAuditEntry, Product
from cmsshop.services.licensing import problems
from cmsshop.services.licensing.domains import PRODUCTION, classify_environment
from cmsshop.services.licensing.records import (
    ActivationFacts,
    AuditRecord,
    LicenseRequest,
    Licensing,
    LicensingPolicy,
    LicensingResult,
    key_hint,
    normalise_license_key,
)
from cmsshop.services.licensing.steps import (
    Plan,
    find_activation,
    is_sqlite,
    lease_for,
    license_facts,
    one_writer,
    open_license,
    record_nonce,
    seats_held_until,
    seats_used,
    sign_and_commit,
)
from cmsshop.services.webhooks.events import emit_event
from cmsshop.services.webhooks.payloads import activation_event
from cmsshop.util import utcnow


@dataclasses.dataclass(frozen=True)
class SeatCall:
    """One activate/deactivate call: the same inputs for its plan and its re-check."""

    policy: LicensingPolicy
    data: LicenseRequest
    audit: AuditRecord
    now: dt.datetime


_NEXT_ID_PG = text("SELECT nextval(pg_get_serial_sequence('activations', 'id'))")


def _new_activation_id(session: Session, reserved: int | None) -> int:
    """The id a new activation will get, known before the lease that names it is signed.

    PostgreSQL hands out a sequence value (kept across re-reads, as nobody else can get
    it). SQLite assigns max(id) + 1, read again under the write lock: if another
    activation took it meanwhile, the plan is stale and is signed again.
    """
    if is_sqlite(session):
        return int(session.scalar(select(func.coalesce(func.max(Activation.id), 0)))) + 1
    return reserved if reserved is not None else int(session.scalar(_NEXT_ID_PG))


def _facts(activation: Activation) -> ActivationFacts:
    return ActivationFacts(
        id=activation.id,
        domain=activation.domain,
        fingerprint_sha256=activation.fingerprint_sha256,
        environment=activation.environment,
        active=activation.active,
        activated_at=activation.activated_at,
        last_validated_at=activation.last_validated_at,
        deactivated_at=activation.deactivated_at,
        seat_held_until=activation.seat_held_until,
    )


def _open(
    session: Session, data: LicenseRequest, audit: AuditRecord, lock: bool
) -> tuple[License, str, Activation | None]:
    """The usable license (locked if ``lock``), its product and the installation's row."""
    license, product = open_license(session, data, audit, lock=lock)
    activation = find_activation(session, license.id, data.fingerprint_sha256)
    if activation is not None:
        audit.activation_id = activation.id
    return license, product, activation


def plan_activation(
    session: Session, call: SeatCall, *, lock: bool = False, reserved_id: int | None = None
) -> Plan:
    """What activating would do now (or the 4xx it would answer); writes nothing."""
    policy, data, audit, now = call.policy, call.data, call.audit, call.now
    license, product, activation = _open(session, data, audit, lock)
    facts = license_facts(license)
    environment = classify_environment(data.domain, policy.seat_rules)
    audit.environment = environment
    if activation is not None and activation.active and activation.domain == data.domain:
        used_production, _ = seats_used(session, license.id, now=now)
        return Plan.of(
            policy, data, now, facts, product, _facts(activation), used_production,
            "already_active",
        )  # fmt: skip

    was_active = activation is not None and activation.active
    # The installation's own seat is not counted against it: an active one keeps it, and
    # one coming back takes the seat its offline lease still holds, not a second one.
    used_production, used_other = seats_used(
        session, license.id, exclude_id=activation.id if activation is not None else None, now=now
    )
    if environment == PRODUCTION:
        used, cap, kind = used_production, license.max_activations, "production"
    else:
        used, cap, kind = used_other, policy.staging_cap, "staging/local"
    if used >= cap:
        raise problems.activation_limit_reached(
            used, cap, environment, kind, held_until=seats_held_until(session, license.id, now)
        )

    if activation is None:
        new = ActivationFacts(
            id=_new_activation_id(session, reserved_id),
            domain=data.domain,
            fingerprint_sha256=data.fingerprint_sha256,
            environment=environment,
            active=True,
            activated_at=now,
            last_validated_at=None,
            deactivated_at=None,
        )
        outcome, created = "activated", True
    else:
        outcome, created = ("moved", False) if was_active else ("reactivated", True)
        new = dataclasses.replace(
            _facts(activation),
            domain=data.domain,
            environment=environment,
            active=True,
            activated_at=activation.activated_at if was_active else now,
            deactivated_at=None,
        )
    used_after = used_production + (1 if environment == PRODUCTION else 0)
    return Plan.of(
        policy, data, now, facts, product, new, used_after, outcome,
        status=201 if created else 200, created=created, insert=activation is None,
    )  # fmt: skip


def plan_deactivation(
    session: Session, call: SeatCall, *, lock: bool = False, reserved_id: int | None = None
) -> Plan:
    """What deactivating would do now (or the 4xx it would answer); writes nothing."""
    policy, data, audit, now = call.policy, call.data, call.audit, call.now
    license, product, activation = _open(session, data, audit, lock)
    if activation is None:
        raise problems.activation_not_found(
            "This installation was never activated on this license."
        )
    audit.environment = activation.environment
    facts = _facts(activation)
    used_production, _ = seats_used(session, license.id, exclude_id=activation.id, now=now)
    if activation.active:
        outcome = "deactivated"
        facts = dataclasses.replace(facts, active=False, deactivated_at=now)
    else:
        outcome = "already_inactive"
    if activation.environment == PRODUCTION and (facts.seat_held_until or now) > now:
        used_production += 1  # its offline lease still works: the seat stays taken
    return Plan.of(
        policy, data, now, license_facts(license), product, facts, used_production, outcome,
        deactivated=True,
    )  # fmt: skip


def _write(session: Session, plan: Plan, data: LicenseRequest) -> None:
    """Make the activation row say what the plan says; an activation that starts or
    stops holding a seat is an outgoing webhook event (a validate-like repeat is not)."""
    facts = plan.activation
    if plan.insert:
        activation = Activation(
            id=facts.id, license_id=plan.license.id, fingerprint=data.fingerprint
        )
        session.add(activation)
        was_active = False
    else:
        activation = session.get(Activation, facts.id)
        was_active = activation.active
    activation.fingerprint_sha256 = facts.fingerprint_sha256
    activation.domain = facts.domain
    activation.environment = facts.environment
    activation.active = facts.active
    activation.activated_at = facts.activated_at
    activation.deactivated_at = facts.deactivated_at
    if plan.claims.get("offline") and not plan.deactivated:
        # An offline lease runs without the shop until its expiry: the seat is held
        # until then, whatever later happens to the activation (seats_used).
        expires = dt.datetime.fromtimestamp(plan.claims["exp"], dt.UTC)
        held = activation.seat_held_until
        activation.seat_held_until = expires if held is None or held < expires else held
    if was_active != bool(facts.active):
        session.flush()
        _emit_activation(session, activation, data.license_key, bool(facts.active))


def _emit_activation(session: Session, activation: Activation, key: str | None, active: bool):
    subject, payload = activation_event(session, activation, key)
    event_type = "activation.created" if active else "activation.deleted"
    emit_event(session, event_type, subject=subject, data=payload)


def _change_seat(planner, licensing: Licensing, data: LicenseRequest, audit: AuditRecord):
    engine, signer, policy = licensing.engine, licensing.signer, licensing.policy
    call = SeatCall(policy, data, audit, utcnow())
    # Read only, no lock, nothing to commit; one snapshot, or a commit between the plan's
    # statements could answer a 4xx no moment ever justified (the lock's re-read below
    # only runs for plans that want to write).
    with Session(engine) as session:
        plan = planner(one_snapshot(session), call)

    def commit(planned: Plan, lease: str | None) -> LicensingResult:
        reserved = planned.activation.id if planned.insert else None
        with one_writer(engine), Session(engine) as session, session.begin():
            take_write_lock(session)
            current = planner(session, call, lock=True, reserved_id=reserved)
            lease = lease_for(signer, policy, planned, current, lease)
            record_nonce(session, current.license.id, data.nonce, call.now, policy.nonce_window)
            _write(session, current, data)
            audit.activation_id = current.activation.id
            audit.environment = current.activation.environment
            session.add(audit.entry(current.outcome, current.status))
        return current.result(lease)

    return sign_and_commit(signer, policy, plan, commit)


def activate(licensing: Licensing, data: LicenseRequest, audit: AuditRecord) -> LicensingResult:
    """Bind the installation to the license, using a seat unless it already has one.

    Idempotent: the same fingerprint again returns its activation with a fresh lease. A
    known fingerprint on a new domain moves the activation (and needs a seat of the new
    domain's kind). Local and staging sites use the separate staging cap.
    """
    return _change_seat(plan_activation, licensing, data, audit)


def deactivate(licensing: Licensing, data: LicenseRequest, audit: AuditRecord) -> LicensingResult:
    """Free the installation's seat (found by fingerprint, whatever its domain now).

    Idempotent: an installation that is already inactive gets the same answer again.
    """
    return _change_seat(plan_deactivation, licensing, data, audit)


# --- the owner frees a seat from the dashboard ----------------------------------------------

CUSTOMER_DEACTIVATE = "customer_deactivate"  # the audit action: the license's owner acted
# The window of cmsshop.license_self_deactivations_per_month: a rolling 30 days, so the
# allowance never resets all at once on the first of a month.
SELF_DEACTIVATION_WINDOW = dt.timedelta(days=30)


class DeactivationLimitReached(Exception):
    """The owner used up the license's self-service deactivations of the window."""

    def __init__(self, limit: int, retry_after: int):
        super().__init__(f"{limit} self-service deactivations in 30 days")
        self.limit = limit
        self.retry_after = retry_after


def _self_deactivations_since(
    session: Session, license_id: int, since: dt.datetime
) -> list[dt.datetime]:
    """When the owner freed a seat of the license since ``since``, oldest first (only
    real deactivations count: an answer ``already_inactive`` changed nothing)."""
    return list(
        session.scalars(
            select(LicenseAuditEntry.created_at)
            .where(
                LicenseAuditEntry.license_id == license_id,
                LicenseAuditEntry.action == CUSTOMER_DEACTIVATE,
                LicenseAuditEntry.outcome == "deactivated",
                LicenseAuditEntry.created_at > since,
            )
            .order_by(LicenseAuditEntry.created_at)
        )
    )


@dataclasses.dataclass(frozen=True)
class OwnerDeactivation:
    """What freeing a seat from the dashboard did: ``outcome`` is ``deactivated`` or
    ``already_inactive`` (the same answer again: a double click changes nothing)."""

    outcome: str
    activation: ActivationFacts
    activations_used: int  # production seats in use afterwards
    max_activations: int
    fingerprint: str  # as the runtime sent it (the owner's own installation id)


def owner_activation_not_found() -> NotFound:
    return NotFound(
        "This license has no activation with this id.",
        code="activation_not_found",
        title="Activation not found",
        hints=["Reload the list of your license's activations."],
    )


def deactivate_for_owner(
    engine,
    user_id: int,
    raw_key: str | None,
    activation_id: int | None,
    audit: AuditRecord,
    limit: int | None = None,
) -> OwnerDeactivation:
    """The license's owner frees the seat of one activation (e.g. a site that is gone
    and can no longer call deactivate itself).

    The one rule behind the dashboard's JSON route and its page. Only the customer the
    license was issued to may do it (anyone else: 404 ``license_not_found``, the same as
    an unknown key); the activation must belong to that license (404
    ``activation_not_found``). It works whatever the license's state: freeing a seat
    grants nothing. Idempotent: an activation that is already inactive is answered
    ``already_inactive`` and left as it is. The runtime's lease stays valid until it
    expires (it is signed and checked offline), but its next validate for that site
    answers 404 ``activation_not_found``.

    Locking as activate/deactivate do: a short transaction of its own (committed before
    the answer), the in-process writer lock and the write lock on SQLite, and the license
    row FOR NO KEY UPDATE on PostgreSQL, so a racing activation counts seats after this
    one. The audit entry (action ``customer_deactivate``, with the request's IP and id;
    the actor is the license's owner) is written in the same transaction.

    ``limit``: at most this many deactivations per license in SELF_DEACTIVATION_WINDOW,
    counted from the audit log under the same lock (two racing requests cannot both take
    the last one). Past it, DeactivationLimitReached (with the seconds until the oldest
    counted one leaves the window); the refusal is audited and nothing else changes.
    """
    license_key = normalise_license_key(raw_key)
    if license_key is None:
        raise problems.license_not_found()
    if activation_id is None:  # an id that did not parse
        raise owner_activation_not_found()
    with one_writer(engine), Session(engine) as session, session.begin():
        take_write_lock(session)
        row = session.execute(
            select(License, Product.slug)
            .join(Product, Product.id == License.product_id)
            .where(License.key == license_key, License.user_id == user_id)
            .with_for_update(of=License, key_share=True)
        ).first()
        if row is None:
            raise problems.license_not_found()
        license, product = row
        activation = session.scalar(
            select(Activation).where(
                Activation.id == activation_id, Activation.license_id == license.id
            )
        )
        if activation is None:
            raise owner_activation_not_found()
        refused: DeactivationLimitReached | None = None
        if activation.active and limit is not None:
            now = utcnow()
            recent = _self_deactivations_since(session, license.id, now - SELF_DEACTIVATION_WINDOW)
            if len(recent) >= limit:
                frees_at = recent[-limit] + SELF_DEACTIVATION_WINDOW
                refused = DeactivationLimitReached(
                    limit, max(1, int((frees_at - now).total_seconds()) + 1)
                )
        if refused is not None:
            outcome = "deactivation_limit_reached"
        elif activation.active:
            outcome = "deactivated"
            activation.active = False
            activation.deactivated_at = utcnow()
            session.flush()
            _emit_activation(session, activation, license.key, False)
        else:
            outcome = "already_inactive"
        used_production, _ = seats_used(session, license.id)
        audit.license_id, audit.activation_id = license.id, activation.id
        audit.product, audit.key_hint = product[:100], key_hint(license.key)
        audit.fingerprint_sha256 = activation.fingerprint_sha256
        audit.domain, audit.environment = activation.domain[:255], activation.environment
        session.add(audit.entry(outcome, 429 if refused else 200))
        if refused is None:
            return OwnerDeactivation(
                outcome,
                _facts(activation),
                used_production,
                license.max_activations,
                activation.fingerprint,
            )
    # Only the refusal's audit entry was written (and committed above).
    raise refused
