"""Validate: the hot path. Runtimes call it on every lease refresh.

It runs on plain connections rather than through the ORM session: one lookup without
locks, the lease signed, then one short transaction for the nonce, a second look at the
same row, the ``lastValidatedAt`` touch and the audit row, each a statement built once
(see cmsshop.hotsql). Rate counts are taken before (services.licensing.counting).
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from cmsshop.hotsql import HotStatement, RawTransaction, db_time, from_db_time, raw_transaction
from cmsshop.services.licensing import problems
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
)
from cmsshop.util import utcnow

# validate's one read: the license, its product, the installation, the paid seats used
# and the license's feature flags.
_VALIDATE_LOOKUP = HotStatement(
    "SELECT l.id, l.status, l.max_activations, l.expires_at, p.slug, a.id, a.domain, "
    "a.environment, a.active, a.activated_at, a.deactivated_at, "
    "(SELECT count(*) FROM activations AS s WHERE s.licence_id = l.id AND s.active "
    "AND s.environment = 'production'), l.features "
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


def validate(licensing: Licensing, data: LicenseRequest, audit: AuditRecord) -> LicensingResult:
    """Check an active installation on its activated domain; refresh ``lastValidatedAt``.

    Nothing is written unless the lease was signed; no lock is held while signing.
    """
    engine, signer, policy = licensing.engine, licensing.signer, licensing.policy
    now = utcnow()
    lookup = {"key": data.license_key, "fp": data.fingerprint_sha256}
    with raw_transaction(engine) as conn:  # read only
        plan = _plan(_fetch_one(_VALIDATE_LOOKUP, conn, lookup), policy, data, audit, now)

    def commit(planned: Plan, lease: str | None) -> LicensingResult:
        with one_writer(engine), raw_transaction(engine) as conn:
            return _commit(conn, signer, policy, data, audit, now, planned, lease)

    return sign_and_commit(signer, policy, plan, commit)


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
    cutoff = db_time(conn, now - dt.timedelta(seconds=policy.nonce_window))
    nonce_params = {
        "key": data.license_key,
        "nonce": data.nonce,
        "now": db_time(conn, now),
        "cutoff": cutoff,
    }
    fp = data.fingerprint_sha256
    postgresql = conn.dialect_name == "postgresql"
    if postgresql:
        row = _fetch_one(_PG_NONCE_AND_LOOKUP, conn, {**nonce_params, "fp": fp})
        nonce_row = row[13] if row is not None else None
    else:
        nonce_row = _fetch_one(_KEYED_NONCE, conn, nonce_params)
        row = _fetch_one(_VALIDATE_LOOKUP, conn, {"key": data.license_key, "fp": fp})
    current = _plan(row, policy, data, audit, now)
    if nonce_row is None:
        raise problems.nonce_reused()
    lease = lease_for(signer, policy, planned, current, lease)
    if random.random() < NONCE_PURGE_PROBABILITY:
        _PURGE_NONCES.run(conn, {"cutoff": cutoff}).close()
    entry = audit.values("validated", 200)
    entry["created_at"] = db_time(conn, entry["created_at"])
    if postgresql:
        entry.update(touched_at=nonce_params["now"], touched_id=current.activation.id)
        _PG_TOUCH_AND_AUDIT.run(conn, entry).close()
    else:
        touch = {"id": current.activation.id, "now": nonce_params["now"]}
        _TOUCH_ACTIVATION.run(conn, touch).close()
        _INSERT_AUDIT.run(conn, entry).close()
    return current.result(lease)
