"""Validate: the hot path. Runtimes call it on every lease refresh.

It runs on plain connections rather than through the ORM session: the rate counts and
one lookup without locks, the lease signed, then one short transaction for the nonce, a
second look at the same row, the ``lastValidatedAt`` touch and the audit row, each a
statement built once (see cmsshop.hotsql). On PostgreSQL that is two round trips: the
counts with the lookup, then one statement that writes the rest only if the second look
still gives the same row (three when it does not). On SQLite with a signer in this
process, the whole call is one transaction.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from typing import Any

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
from cmsshop.services.licensing.signing import LeaseSigner
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
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.util import utcnow

# validate's one read: the license, its product, the installation, the paid seats used
# and the license's feature flags.
_LOOKUP_COLUMNS = (
    "l.id, l.status, l.max_activations, l.expires_at, p.slug, a.id, a.domain, "
    "a.environment, a.active, a.activated_at, a.deactivated_at, "
    "(SELECT count(*) FROM activations AS s WHERE s.licence_id = l.id AND s.active "
    "AND s.environment = 'production'), l.features"
)
_LOOKUP_FROM = (
    "FROM licences AS l JOIN products AS p ON p.id = l.product_id "
    "LEFT OUTER JOIN activations AS a ON a.licence_id = l.id AND a.fingerprint_sha256 = :fp "
    "WHERE l.key = :key"
)
_VALIDATE_LOOKUP = HotStatement(f"SELECT {_LOOKUP_COLUMNS} {_LOOKUP_FROM}")  # noqa: S608
_LOOKUP_WIDTH = 13  # columns of a lookup row
_PURGE_NONCES = HotStatement("DELETE FROM licence_nonces WHERE seen_at < :cutoff")
_TOUCH_ACTIVATION = HotStatement("UPDATE activations SET last_validated_at = :now WHERE id = :id")
_INSERT_AUDIT = HotStatement(
    "INSERT INTO licence_audit_log (created_at, action, outcome, status, licence_id, "
    "activation_id, key_hint, product, fingerprint_sha256, domain, environment, ip, "
    "request_id) VALUES (:created_at, :action, :outcome, :status, :license_id, "
    ":activation_id, :key_hint, :product, :fingerprint_sha256, :domain, :environment, :ip, "
    ":request_id)"
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

# PostgreSQL runs data-modifying CTEs, so there the nonce rides with the second look and
# the touch with the audit insert: two round trips instead of four.
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


# PostgreSQL, the common case in one statement (data-modifying CTEs, one snapshot): the
# same lookup again, and only if it gives the very row the lease was signed for (every
# column passed back as :seen_N; the JSON flags compared as jsonb), the nonce; only if
# the nonce is new, the touch and the audit row. It answers how many nonces it stored:
# 0 means it wrote nothing (the nonce was seen, or the license changed), and the call
# takes the general path, which finds out which.
_PG_SEEN_COLUMNS = _LOOKUP_COLUMNS.replace("l.features", "CAST(l.features AS jsonb)")
_PG_SEEN_VALUES = ", ".join(f":seen_{i}" for i in range(_LOOKUP_WIDTH - 1))
_PG_IF_UNCHANGED_NONCE_TOUCH_AUDIT = HotStatement(
    f"WITH seen AS (SELECT 1 {_LOOKUP_FROM} AND ({_PG_SEEN_COLUMNS}) IS NOT DISTINCT FROM "  # noqa: S608
    f"({_PG_SEEN_VALUES}, CAST(:seen_{_LOOKUP_WIDTH - 1} AS jsonb))), "
    "n AS (INSERT INTO licence_nonces (licence_id, nonce, seen_at) "
    "SELECT id, :nonce, :now FROM licences WHERE key = :key AND EXISTS (SELECT 1 FROM seen) "
    "ON CONFLICT (licence_id, nonce) DO UPDATE SET seen_at = excluded.seen_at "
    "WHERE licence_nonces.seen_at < :cutoff RETURNING id), "
    "t AS (UPDATE activations SET last_validated_at = :now "  # seen_5: the activation id
    "WHERE id = :seen_5 AND EXISTS (SELECT 1 FROM n)), "
    "w AS (INSERT INTO licence_audit_log (created_at, action, outcome, status, licence_id, "
    "activation_id, key_hint, product, fingerprint_sha256, domain, environment, ip, "
    "request_id) SELECT :created_at, :action, :outcome, :status, :license_id, "
    ":activation_id, :key_hint, :product, :fingerprint_sha256, :domain, :environment, :ip, "
    ":request_id WHERE EXISTS (SELECT 1 FROM n)) "
    "SELECT count(*) FROM n"
)
_PG_IF_UNCHANGED = HotBatch(_PG_IF_UNCHANGED_NONCE_TOUCH_AUDIT)
_PG_PURGE_AND_IF_UNCHANGED = HotBatch(_PURGE_NONCES, _PG_IF_UNCHANGED_NONCE_TOUCH_AUDIT)


def _pg_commit_if_unchanged(
    conn: RawTransaction,
    policy: LicensingPolicy,
    data: LicenseRequest,
    audit: AuditRecord,
    now: dt.datetime,
    row: tuple,
) -> bool:
    """PostgreSQL: write the validated call in one autocommitted round trip if the
    license still reads as ``row`` (the lookup the lease was signed for); False, having
    written nothing, otherwise."""
    params = _nonce_params(conn, policy, data, now)
    params["fp"] = data.fingerprint_sha256
    params.update(audit.values("validated", 200))
    for i, value in enumerate(row):
        params[f"seen_{i}"] = value
    flags = row[_LOOKUP_WIDTH - 1]  # parsed by psycopg; sent back as JSON text
    params[f"seen_{_LOOKUP_WIDTH - 1}"] = None if flags is None else json.dumps(flags)
    purge = random.random() < NONCE_PURGE_PROBABILITY
    results = (_PG_PURGE_AND_IF_UNCHANGED if purge else _PG_IF_UNCHANGED).run(conn, params)
    return results[-1][0][0] == 1


def _fetch_one(statement: HotStatement, conn: RawTransaction, params: dict[str, Any]):
    cursor = statement.run(conn, params)
    row = cursor.fetchone()
    cursor.close()
    return row


def _plan(
    row, policy: LicensingPolicy, data: LicenseRequest, audit: AuditRecord, now: dt.datetime
) -> Plan:
    """The answer the lookup row allows (or its 4xx)."""
    if row is None:
        raise problems.license_not_found()
    license = LicenseFacts(row[0], row[1], row[2], from_db_time(row[3]), features_from_db(row[12]))
    audit.license_id = license.id
    if row[4] != data.product:
        raise problems.product_mismatch()
    check_license_state(license, now)
    if row[5] is not None:
        audit.activation_id, audit.environment = row[5], row[7]
    check_installation(row[5] is not None, bool(row[8]), row[6], data.domain)
    activation = ActivationFacts(
        id=row[5],
        domain=row[6],
        fingerprint_sha256=data.fingerprint_sha256,
        environment=row[7],
        active=True,
        activated_at=from_db_time(row[9]),
        last_validated_at=now,
        deactivated_at=from_db_time(row[10]),
    )
    return Plan.of(policy, data, now, license, row[4], activation, int(row[11]), "validated")


def validate(
    licensing: Licensing, data: LicenseRequest, audit: AuditRecord, limiter: RateLimiter
) -> LicensingResult:
    """Count the call against the rate limits, check an active installation on its
    activated domain, and refresh ``lastValidatedAt``.

    Nothing is written but the counts unless the lease was signed; no lock is held while
    signing. On PostgreSQL two round trips: the counts with the lookup, then the nonce,
    touch and audit row in one statement that writes only if the license still reads the
    same. If it wrote nothing (a seen nonce, a license changed meanwhile), the general
    path finds out which: BEGIN with the nonce and the second look, then the touch, the
    audit row and COMMIT (each a HotBatch), re-signing a changed plan.
    """
    engine, signer, policy = licensing.engine, licensing.signer, licensing.policy
    now = utcnow()
    if engine.dialect.name == "sqlite" and signer.in_process:
        return _validate_in_one_transaction(licensing, data, audit, limiter, now)
    row = _count_and_look_up(engine, limiter, data, audit)
    plan = _plan(row, policy, data, audit, now)

    def commit(planned: Plan, lease: str | None) -> LicensingResult:
        if engine.dialect.name == "postgresql":
            with raw_autocommit(engine) as conn:  # BEGIN and COMMIT ride in the batches
                if (
                    lease is not None
                    and planned is plan
                    and _pg_commit_if_unchanged(conn, policy, data, audit, now, row)
                ):
                    return plan.result(lease)
                return _commit(conn, signer, policy, data, audit, now, planned, lease)
        with one_writer(engine), raw_transaction(engine) as conn:
            return _commit(conn, signer, policy, data, audit, now, planned, lease)

    return sign_and_commit(signer, policy, plan, commit)


_COUNT_AND_LOOK_UP: dict[int, HotBatch] = {}


def _count_and_look_up(engine, limiter: RateLimiter, data: LicenseRequest, audit: AuditRecord):
    """Count the call (429 ``rate_limited`` past a limit) and read the lookup row: one
    round trip on PostgreSQL (two statements in one batch, each committing on its own),
    one short transaction on SQLite. The counts commit whatever the call does next."""
    audit.describe(data)
    counting = limiter.counting(call_checks(audit))
    lookup = {"key": data.license_key, "fp": data.fingerprint_sha256}
    if engine.dialect.name == "postgresql":
        batch = _COUNT_AND_LOOK_UP.get(len(counting.planned))
        if batch is None:
            batch = HotBatch(counting.statement, _VALIDATE_LOOKUP)
            _COUNT_AND_LOOK_UP[len(counting.planned)] = batch
        with raw_autocommit(engine) as conn:
            rows, looked = batch.run(conn, {**counting.params, **lookup})
            limiter.maybe_purge(conn, counting.now)
        row = looked[0] if looked else None
        limited = counting.decide(rows)
    else:
        # The counts are a write: wait for this process's other writers on the lock, not
        # in SQLite's busy handler (its sleeps made a third of the wall time idle).
        # A refused call reads no lookup row: the refusal path is the one a flood takes.
        with one_writer(engine), raw_transaction(engine) as conn:
            limited = counting.decide(_sqlite_count(conn, limiter, counting))
            row = _fetch_one(_VALIDATE_LOOKUP, conn, lookup) if limited is None else None
    audit.counted = True
    if limited is not None:
        raise RateLimited(limited.retry_after)
    return row


def _sqlite_count(conn: RawTransaction, limiter: RateLimiter, counting) -> list:
    """SQLite, in the caller's transaction: the counts' rows (the old windows purged now
    and then)."""
    rows = counting.run(conn).fetchall()
    limiter.maybe_purge(conn, counting.now)
    return rows


def _validate_in_one_transaction(
    licensing: Licensing,
    data: LicenseRequest,
    audit: AuditRecord,
    limiter: RateLimiter,
    now: dt.datetime,
) -> LicensingResult:
    """SQLite with a signer in this process: the whole call in one transaction under the
    process's writer lock -- the counts, the lookup, the lease, the nonce, the touch
    and the audit row -- instead of two transactions and a second look.

    SQLite has one writer at a time whatever we do, and signing in-process takes
    microseconds, so there is nothing to gain by keeping the lock free while signing
    (the reason sign_and_commit plans, signs and re-reads; a remote signer still goes
    that way).
    """
    with one_writer(licensing.engine), raw_transaction(licensing.engine) as conn:
        result, refusal = validate_in(conn, licensing, data, audit, limiter, now)
    audit.counted = True  # with the commit: a failure before it leaves the call uncounted
    if refusal is not None:
        raise refusal
    return result


def validate_in(
    conn: RawTransaction,
    licensing: Licensing,
    data: LicenseRequest,
    audit: AuditRecord,
    limiter: RateLimiter,
    now: dt.datetime,
) -> tuple[LicensingResult | None, ApiError | None]:
    """SQLite, in the caller's write transaction: one call's counts, lookup, lease,
    nonce, touch and audit row; its result or its refusal (429, a 4xx of the license or
    the nonce, 503 signing), which the caller raises once the transaction committed.
    Nothing but the counts is written unless the lease was signed: the writes of the
    call come after the signature, so a refusal commits the counts alone."""
    policy = licensing.policy
    audit.describe(data)
    counting = limiter.counting(call_checks(audit))
    limited = counting.decide(_sqlite_count(conn, limiter, counting))
    if limited is not None:
        return None, RateLimited(limited.retry_after)  # without reading the lookup row
    try:
        row = _fetch_one(
            _VALIDATE_LOOKUP, conn, {"key": data.license_key, "fp": data.fingerprint_sha256}
        )
        plan = _plan(row, policy, data, audit, now)
        lease = sign_lease(licensing.signer, policy, plan.claims)
        nonce_params = _nonce_params(conn, policy, data, now)
        if _fetch_one(_KEYED_NONCE, conn, nonce_params) is None:
            raise problems.nonce_reused()
        _sqlite_touch_and_audit(conn, audit, nonce_params, plan.activation.id)
        return plan.result(lease), None
    except ApiError as exc:  # a 4xx of the license or the nonce, 503 signing
        return None, exc


def _nonce_params(
    conn: RawTransaction, policy: LicensingPolicy, data: LicenseRequest, now: dt.datetime
) -> dict[str, Any]:
    return {
        "key": data.license_key,
        "nonce": data.nonce,
        "now": db_time(conn, now),
        "cutoff": db_time(conn, now - dt.timedelta(seconds=policy.nonce_window)),
    }


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


def _commit(
    conn: RawTransaction,
    signer: LeaseSigner,
    policy: LicensingPolicy,
    data: LicenseRequest,
    audit: AuditRecord,
    now: dt.datetime,
    planned: Plan,
    lease: str | None,
) -> LicensingResult:
    nonce_params = _nonce_params(conn, policy, data, now)
    cutoff = nonce_params["cutoff"]
    fp = data.fingerprint_sha256
    postgresql = conn.dialect_name == "postgresql"
    if postgresql:
        _, found = _PG_BEGIN_NONCE_AND_LOOKUP.run(conn, {**nonce_params, "fp": fp})
        row = found[0] if found else None
        nonce_row = row[13] if row is not None else None
    else:
        nonce_row = _fetch_one(_KEYED_NONCE, conn, nonce_params)
        row = _fetch_one(_VALIDATE_LOOKUP, conn, {"key": data.license_key, "fp": fp})
    current = _plan(row, policy, data, audit, now)
    if nonce_row is None:
        raise problems.nonce_reused()
    lease = lease_for(signer, policy, planned, current, lease)
    if postgresql:
        purge = random.random() < NONCE_PURGE_PROBABILITY
        entry = audit.values("validated", 200)
        entry.update(touched_at=nonce_params["now"], touched_id=current.activation.id)
        batch = _PG_PURGE_TOUCH_AUDIT_COMMIT if purge else _PG_TOUCH_AUDIT_COMMIT
        batch.run(conn, {**entry, "cutoff": cutoff})
    else:
        _sqlite_touch_and_audit(conn, audit, nonce_params, current.activation.id)
    return current.result(lease)


# The write transaction on PostgreSQL in two round trips; the block's connection is in
# autocommit, so BEGIN and COMMIT are statements of the batches (a failure in between
# rolls back: cmsshop.hotsql.raw_autocommit).
_PG_BEGIN_NONCE_AND_LOOKUP = HotBatch("BEGIN", _PG_NONCE_AND_LOOKUP)
_PG_TOUCH_AUDIT_COMMIT = HotBatch(_PG_TOUCH_AND_AUDIT, "COMMIT")
_PG_PURGE_TOUCH_AUDIT_COMMIT = HotBatch(_PURGE_NONCES, _PG_TOUCH_AND_AUDIT, "COMMIT")
