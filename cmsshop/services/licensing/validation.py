"""Validate: the hot path. Runtimes call it on every lease refresh.

It runs plain SQL on pooled connections rather than through the ORM session
(cmsshop.hotsql says why), in the same few steps on both databases:

1. count the call against the rate limits and read the lookup row (one round trip on
   PostgreSQL, one short transaction on SQLite); the counts commit whatever happens next;
2. plan the answer from that row and sign its lease, with no lock held;
3. write the nonce, the ``lastValidatedAt`` touch and the audit row, only if the license
   still reads as planned (:func:`cmsshop.services.licensing.steps.sign_and_commit`).

The dialects differ in how few round trips each step takes, and a signer in this process
lets SQLite do all three steps in one transaction. Every saving is measured with
``bench/licensing.py`` (SQLite, and PostgreSQL with ``--database-url``).
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import functools
import json
import random
from typing import Any, NamedTuple

from cmsshop.errors import ApiError, RateLimited
from cmsshop.hotsql import (
    HotBatch,
    HotStatement,
    RawTransaction,
    db_time,
    from_db_time,
    raw_autocommit,
    raw_transaction,
)
from cmsshop.services.licensing import problems
from cmsshop.services.licensing.counting import call_checks
from cmsshop.services.licensing.features import features_from_db
from cmsshop.services.licensing.records import (
    ActivationFacts,
    AuditRecord,
    LicenseFacts,
    LicenseRequest,
    Licensing,
    LicensingPolicy,
    LicensingResult,
)
from cmsshop.services.licensing.steps import (
    NONCE_PURGE_PROBABILITY,
    Plan,
    check_installation,
    check_license_state,
    lease_for,
    one_writer,
    sign_and_commit,
    sign_lease,
)
from cmsshop.services.ratelimit import Counting, RateLimiter
from cmsshop.util import utcnow


class LookupRow(NamedTuple):
    """validate's one read: the license, its product, the installation (None columns
    when the fingerprint has none), the paid seats used and the license's flags. The
    columns of every lookup statement below, in this order."""

    license_id: int
    status: str
    max_activations: int
    expires_at: Any
    product: str
    activation_id: int | None
    domain: str | None
    environment: str | None
    active: Any
    activated_at: Any
    deactivated_at: Any
    production_seats: int
    features: Any


# The lookup and, on PostgreSQL, the nonce stored in the same statement (its id, or
# None when the nonce was seen within the window).
NoncedLookupRow = collections.namedtuple("NoncedLookupRow", (*LookupRow._fields, "nonce_id"))

_LOOK_UP = HotStatement(
    "SELECT l.id, l.status, l.max_activations, l.expires_at, p.slug, a.id, a.domain, "
    "a.environment, a.active, a.activated_at, a.deactivated_at, "
    "(SELECT count(*) FROM activations AS s WHERE s.licence_id = l.id AND s.active "
    "AND s.environment = 'production'), l.features "
    "FROM licences AS l JOIN products AS p ON p.id = l.product_id "
    "LEFT OUTER JOIN activations AS a ON a.licence_id = l.id AND a.fingerprint_sha256 = :fp "
    "WHERE l.key = :key"
)
# The nonce, with the license found by key (INSERT .. SELECT): the write transaction's
# first statement is a write, so on SQLite no read comes before the write lock.
# (SQLite needs the WHERE to parse ON CONFLICT after a SELECT.)
_KEYED_NONCE = HotStatement(
    "INSERT INTO licence_nonces (licence_id, nonce, seen_at) "
    "SELECT id, :nonce, :now FROM licences WHERE key = :key "
    "ON CONFLICT (licence_id, nonce) DO UPDATE SET seen_at = excluded.seen_at "
    "WHERE licence_nonces.seen_at < :cutoff RETURNING id"
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

# PostgreSQL runs data-modifying CTEs, so there the nonce rides with the second look and
# the touch with the audit insert: two round trips instead of four (bench/licensing.py
# --database-url postgresql+psycopg://...).
_PG_NONCE_AND_LOOK_UP = HotStatement(
    "WITH n AS (INSERT INTO licence_nonces (licence_id, nonce, seen_at) "
    "SELECT id, :nonce, :now FROM licences WHERE key = :key "
    "ON CONFLICT (licence_id, nonce) DO UPDATE SET seen_at = excluded.seen_at "
    "WHERE licence_nonces.seen_at < :cutoff RETURNING id) "
    "SELECT l.id, l.status, l.max_activations, l.expires_at, p.slug, a.id, a.domain, "
    "a.environment, a.active, a.activated_at, a.deactivated_at, "
    "(SELECT count(*) FROM activations AS s WHERE s.licence_id = l.id AND s.active "
    "AND s.environment = 'production'), l.features, (SELECT id FROM n) "
    "FROM licences AS l JOIN products AS p ON p.id = l.product_id "
    "LEFT OUTER JOIN activations AS a ON a.licence_id = l.id AND a.fingerprint_sha256 = :fp "
    "WHERE l.key = :key"
)
_PG_TOUCH_AND_AUDIT = HotStatement(
    "WITH t AS (UPDATE activations SET last_validated_at = :now WHERE id = :touched_id) "
    "INSERT INTO licence_audit_log (created_at, action, outcome, status, licence_id, "
    "activation_id, key_hint, product, fingerprint_sha256, domain, environment, ip, "
    "request_id) VALUES (:created_at, :action, :outcome, :status, :license_id, "
    ":activation_id, :key_hint, :product, :fingerprint_sha256, :domain, :environment, :ip, "
    ":request_id)"
)
# PostgreSQL, the common case in one statement and one snapshot, which spares the
# second look's round trip: the same lookup again and, only if it gives the very row the
# lease was signed for (each column passed back as :seen_<column>; the JSON flags
# compared as jsonb), the nonce; only if the nonce is new, the touch and the audit row.
# It answers how many nonces it stored: 0 means it wrote nothing (the nonce was seen, or
# the license changed), and the general path finds out which.
_PG_IF_UNCHANGED_NONCE_TOUCH_AUDIT = HotStatement(
    "WITH seen AS (SELECT 1 "
    "FROM licences AS l JOIN products AS p ON p.id = l.product_id "
    "LEFT OUTER JOIN activations AS a ON a.licence_id = l.id AND a.fingerprint_sha256 = :fp "
    "WHERE l.key = :key AND (l.id, l.status, l.max_activations, l.expires_at, p.slug, a.id, "
    "a.domain, a.environment, a.active, a.activated_at, a.deactivated_at, "
    "(SELECT count(*) FROM activations AS s WHERE s.licence_id = l.id AND s.active "
    "AND s.environment = 'production'), CAST(l.features AS jsonb)) IS NOT DISTINCT FROM "
    "(:seen_license_id, :seen_status, :seen_max_activations, :seen_expires_at, "
    ":seen_product, :seen_activation_id, :seen_domain, :seen_environment, :seen_active, "
    ":seen_activated_at, :seen_deactivated_at, :seen_production_seats, "
    "CAST(:seen_features AS jsonb))), "
    "n AS (INSERT INTO licence_nonces (licence_id, nonce, seen_at) "
    "SELECT id, :nonce, :now FROM licences WHERE key = :key AND EXISTS (SELECT 1 FROM seen) "
    "ON CONFLICT (licence_id, nonce) DO UPDATE SET seen_at = excluded.seen_at "
    "WHERE licence_nonces.seen_at < :cutoff RETURNING id), "
    "t AS (UPDATE activations SET last_validated_at = :now "
    "WHERE id = :seen_activation_id AND EXISTS (SELECT 1 FROM n)), "
    "w AS (INSERT INTO licence_audit_log (created_at, action, outcome, status, licence_id, "
    "activation_id, key_hint, product, fingerprint_sha256, domain, environment, ip, "
    "request_id) SELECT :created_at, :action, :outcome, :status, :license_id, "
    ":activation_id, :key_hint, :product, :fingerprint_sha256, :domain, :environment, :ip, "
    ":request_id WHERE EXISTS (SELECT 1 FROM n)) "
    "SELECT count(*) FROM n"
)
_SEEN_NAMES = tuple(f"seen_{name}" for name in LookupRow._fields)

# The batches. PostgreSQL: the first runs in autocommit (each statement commits on its
# own); the general path's connection is in autocommit too, so BEGIN and COMMIT are
# statements of its batches (a failure in between rolls back: hotsql.raw_autocommit).
_PG_IF_UNCHANGED = HotBatch(_PG_IF_UNCHANGED_NONCE_TOUCH_AUDIT)
_PG_PURGE_AND_IF_UNCHANGED = HotBatch(_PURGE_NONCES, _PG_IF_UNCHANGED_NONCE_TOUCH_AUDIT)
_PG_BEGIN_NONCE_AND_LOOK_UP = HotBatch("BEGIN", _PG_NONCE_AND_LOOK_UP)
_PG_TOUCH_AUDIT_COMMIT = HotBatch(_PG_TOUCH_AND_AUDIT, "COMMIT")
_PG_PURGE_TOUCH_AUDIT_COMMIT = HotBatch(_PURGE_NONCES, _PG_TOUCH_AND_AUDIT, "COMMIT")
_PG_COUNT_AND_LOOK_UP: dict[int, HotBatch] = {}  # by the number of rate checks


@dataclasses.dataclass(frozen=True)
class _Counted:
    """What the first step gives once the counts committed: the lookup row and its plan,
    or the call's refusal, or -- when the call was done in the same transaction -- its
    result."""

    row: LookupRow | None = None
    plan: Plan | None = None
    refusal: ApiError | None = None
    result: LicensingResult | None = None


def validate(
    licensing: Licensing, data: LicenseRequest, audit: AuditRecord, limiter: RateLimiter
) -> LicensingResult:
    """Count the call against the rate limits, check an active installation on its
    activated domain, and refresh ``lastValidatedAt``.

    Nothing is written but the counts unless the lease was signed, and no lock is held
    while a remote signer works (see the module's docstring for the steps).
    """
    now = utcnow()
    audit.describe(data)
    postgresql = licensing.engine.dialect.name == "postgresql"
    first_step = _pg_count_and_look_up if postgresql else _sqlite_count_and_look_up
    counted = first_step(licensing, data, audit, limiter, now)
    # The one place the call is marked counted: a failure after this point is audited
    # without counting it twice (counting.record_failure).
    audit.counted = True
    if counted.refusal is not None:
        raise counted.refusal
    if counted.result is not None:
        return counted.result
    commit = _pg_commit if postgresql else _sqlite_commit
    write = functools.partial(commit, licensing, data, audit, now, counted)
    return sign_and_commit(licensing.signer, licensing.policy, counted.plan, write)


# --- step 1: count and look up ---------------------------------------------------------------


def _pg_count_and_look_up(
    licensing: Licensing,
    data: LicenseRequest,
    audit: AuditRecord,
    limiter: RateLimiter,
    now: dt.datetime,
) -> _Counted:
    """PostgreSQL: the counts and the lookup in one round trip (two statements in one
    batch, each committing on its own)."""
    counting = limiter.counting(call_checks(audit))
    batch = _PG_COUNT_AND_LOOK_UP.get(len(counting.planned))
    if batch is None:
        batch = _PG_COUNT_AND_LOOK_UP[len(counting.planned)] = HotBatch(
            counting.statement, _LOOK_UP
        )
    lookup = {"key": data.license_key, "fp": data.fingerprint_sha256}
    with raw_autocommit(licensing.engine) as conn:
        counts, found = batch.run(conn, {**counting.params, **lookup})
        limiter.maybe_purge(conn, counting.now)
    limited = counting.decide(counts)
    if limited is not None:
        return _Counted(refusal=RateLimited(limited.retry_after))
    row = LookupRow._make(found[0]) if found else None
    try:
        return _Counted(row, _plan(row, licensing.policy, data, audit, now))
    except ApiError as exc:  # a 4xx of the license
        return _Counted(refusal=exc)


def _sqlite_count_and_look_up(
    licensing: Licensing,
    data: LicenseRequest,
    audit: AuditRecord,
    limiter: RateLimiter,
    now: dt.datetime,
) -> _Counted:
    """SQLite: the counts and the lookup in one short transaction.

    With a signer in this process the whole call happens in that transaction -- the
    lease signed, the nonce, touch and audit row written -- instead of a second
    transaction with a second look: SQLite has one writer at a time whatever we do and
    signing in-process takes microseconds, so keeping the lock free while signing gains
    nothing (one transaction instead of two: bench/licensing.py). A remote signer may
    take up to its deadline, so then the lock is released before signing.

    Refusals are returned, not raised, so that the counts commit with them.
    """
    engine, policy = licensing.engine, licensing.policy
    # The counts are a write: wait for this process's other writers on the lock, not in
    # SQLite's busy handler (its sleeps made a third of the wall time idle).
    with one_writer(engine), raw_transaction(engine) as conn:
        counting = limiter.counting(call_checks(audit))
        limited = counting.decide(_sqlite_count(conn, limiter, counting))
        if limited is not None:
            # No lookup row read: the refusal path is the one a flood takes.
            return _Counted(refusal=RateLimited(limited.retry_after))
        row = _fetch_one(_LOOK_UP, conn, {"key": data.license_key, "fp": data.fingerprint_sha256})
        row = None if row is None else LookupRow._make(row)
        try:
            plan = _plan(row, policy, data, audit, now)
            if not licensing.signer.in_process:
                return _Counted(row, plan)
            lease = sign_lease(licensing.signer, policy, plan.claims)
            nonce_params = _nonce_params(conn, policy, data, now)
            if _fetch_one(_KEYED_NONCE, conn, nonce_params) is None:
                raise problems.nonce_reused()
            _sqlite_touch_and_audit(conn, audit, nonce_params, plan.activation.id)
            return _Counted(row, plan, result=plan.result(lease))
        except ApiError as exc:  # a 4xx of the license or the nonce, 503 signing
            return _Counted(refusal=exc)


def _sqlite_count(conn: RawTransaction, limiter: RateLimiter, counting: Counting) -> list:
    """SQLite, in the caller's transaction: the counts' rows (the old windows purged now
    and then)."""
    rows = counting.run(conn).fetchall()
    limiter.maybe_purge(conn, counting.now)
    return rows


# --- step 2: the plan --------------------------------------------------------------------------


def _plan(
    row: LookupRow | NoncedLookupRow | None,
    policy: LicensingPolicy,
    data: LicenseRequest,
    audit: AuditRecord,
    now: dt.datetime,
) -> Plan:
    """The answer the lookup row allows (or its 4xx); notes what it found in ``audit``."""
    if row is None:
        raise problems.license_not_found()
    license = LicenseFacts(
        row.license_id,
        row.status,
        row.max_activations,
        from_db_time(row.expires_at),
        features_from_db(row.features),
    )
    audit.license_id = license.id
    if row.product != data.product:
        raise problems.product_mismatch()
    check_license_state(license, now)
    found = row.activation_id is not None
    if found:
        audit.activation_id, audit.environment = row.activation_id, row.environment
    check_installation(found, bool(row.active), row.domain, data.domain)
    activation = ActivationFacts(
        id=row.activation_id,
        domain=row.domain,
        fingerprint_sha256=data.fingerprint_sha256,
        environment=row.environment,
        active=True,
        activated_at=from_db_time(row.activated_at),
        last_validated_at=now,
        deactivated_at=from_db_time(row.deactivated_at),
    )
    return Plan.of(
        policy, data, now, license, row.product, activation, int(row.production_seats), "validated"
    )


# --- step 3: write what was signed -------------------------------------------------------------


def _pg_commit(
    licensing: Licensing,
    data: LicenseRequest,
    audit: AuditRecord,
    now: dt.datetime,
    counted: _Counted,
    planned: Plan,
    lease: str | None,
) -> LicensingResult:
    """PostgreSQL: the one-statement write when the lease was signed for the first
    lookup, else (or when it wrote nothing) the general path."""
    with raw_autocommit(licensing.engine) as conn:  # BEGIN and COMMIT ride in the batches
        if (
            lease is not None
            and planned is counted.plan
            and _pg_commit_if_unchanged(conn, licensing.policy, data, audit, now, counted.row)
        ):
            return planned.result(lease)
        return _commit_after_second_look(conn, licensing, data, audit, now, planned, lease)


def _sqlite_commit(
    licensing: Licensing,
    data: LicenseRequest,
    audit: AuditRecord,
    now: dt.datetime,
    counted: _Counted,
    planned: Plan,
    lease: str | None,
) -> LicensingResult:
    """SQLite with a remote signer: the general path in a write transaction of its own."""
    with one_writer(licensing.engine), raw_transaction(licensing.engine) as conn:
        return _commit_after_second_look(conn, licensing, data, audit, now, planned, lease)


def _pg_commit_if_unchanged(
    conn: RawTransaction,
    policy: LicensingPolicy,
    data: LicenseRequest,
    audit: AuditRecord,
    now: dt.datetime,
    row: LookupRow,
) -> bool:
    """PostgreSQL: write the validated call in one autocommitted round trip if the
    license still reads as ``row`` (the lookup the lease was signed for); False, having
    written nothing, otherwise."""
    params = _nonce_params(conn, policy, data, now)
    params["fp"] = data.fingerprint_sha256
    params.update(audit.values("validated", 200))
    params.update(zip(_SEEN_NAMES, row, strict=True))
    # psycopg parsed the flags; they go back as JSON text
    params["seen_features"] = None if row.features is None else json.dumps(row.features)
    purge = random.random() < NONCE_PURGE_PROBABILITY
    *_, [(nonces_stored,)] = (_PG_PURGE_AND_IF_UNCHANGED if purge else _PG_IF_UNCHANGED).run(
        conn, params
    )
    return nonces_stored == 1


def _commit_after_second_look(
    conn: RawTransaction,
    licensing: Licensing,
    data: LicenseRequest,
    audit: AuditRecord,
    now: dt.datetime,
    planned: Plan,
    lease: str | None,
) -> LicensingResult:
    """In one write transaction: the nonce (409 if seen), a second look at the license,
    the lease (the one signed if the plan still holds, else StalePlan), then the touch
    and the audit row. PostgreSQL: BEGIN with the nonce and the second look, then the
    touch, the audit row and COMMIT, two round trips."""
    policy = licensing.policy
    nonce_params = _nonce_params(conn, policy, data, now)
    if conn.dialect_name == "postgresql":
        _, found = _PG_BEGIN_NONCE_AND_LOOK_UP.run(
            conn, {**nonce_params, "fp": data.fingerprint_sha256}
        )
        row = NoncedLookupRow._make(found[0]) if found else None
        nonce_id = None if row is None else row.nonce_id
    else:
        nonce_id = _fetch_one(_KEYED_NONCE, conn, nonce_params)
        found = _fetch_one(_LOOK_UP, conn, {"key": data.license_key, "fp": data.fingerprint_sha256})
        row = None if found is None else LookupRow._make(found)
    current = _plan(row, policy, data, audit, now)
    if nonce_id is None:
        raise problems.nonce_reused()
    lease = lease_for(licensing.signer, policy, planned, current, lease)
    if conn.dialect_name == "postgresql":
        entry = audit.values("validated", 200)
        entry.update(now=nonce_params["now"], touched_id=current.activation.id)
        purge = random.random() < NONCE_PURGE_PROBABILITY
        batch = _PG_PURGE_TOUCH_AUDIT_COMMIT if purge else _PG_TOUCH_AUDIT_COMMIT
        batch.run(conn, {**entry, "cutoff": nonce_params["cutoff"]})
    else:
        _sqlite_touch_and_audit(conn, audit, nonce_params, current.activation.id)
    return current.result(lease)


def _sqlite_touch_and_audit(
    conn: RawTransaction, audit: AuditRecord, nonce_params: dict[str, Any], activation_id: int
) -> None:
    """The writes of a validated call after its nonce (SQLite, one statement each)."""
    if random.random() < NONCE_PURGE_PROBABILITY:
        _PURGE_NONCES.run(conn, {"cutoff": nonce_params["cutoff"]}).close()
    _TOUCH_ACTIVATION.run(conn, {"id": activation_id, "now": nonce_params["now"]}).close()
    entry = audit.values("validated", 200)
    entry["created_at"] = db_time(conn, entry["created_at"])
    _INSERT_AUDIT.run(conn, entry).close()


def _nonce_params(
    conn: RawTransaction, policy: LicensingPolicy, data: LicenseRequest, now: dt.datetime
) -> dict[str, Any]:
    return {
        "key": data.license_key,
        "nonce": data.nonce,
        "now": db_time(conn, now),
        "cutoff": db_time(conn, now - dt.timedelta(seconds=policy.nonce_window)),
    }


def _fetch_one(statement: HotStatement, conn: RawTransaction, params: dict[str, Any]):
    cursor = statement.run(conn, params)
    row = cursor.fetchone()
    cursor.close()
    return row
