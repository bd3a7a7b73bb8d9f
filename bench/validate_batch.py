"""Diagnostic: SQLite validate calls run as one batch with a fixed number of statements.

    .venv/bin/python bench/validate_batch.py     # checks it against validate_in

``validate_batch`` does for a list of validate calls what ``validation.validate_in`` does
for each in turn -- the rate counts, the lookup, the lease, the nonce, the touch, the
audit row -- in one transaction with seven statements whatever the batch's size (one
upsert and one read of the counts, one lookup, one read and one insert of the nonces, one
touch, one insert of the audit rows; the reads answer one row of JSON each, so that no
statement steps once per call). It leaves out the now-and-then purges of old nonces and
counter windows. It exists for bench/validate_floor.py, which serves it from one thread
that takes every queued call (the set-based group commit floor): the cheapest way found to
do validate's SQLite work under 16 connections, measured to show how far that work alone
can go (docs/licensing.md, Performance). It is not how cmsshop validates.

Run alone, it checks itself and exits 1 if it differs: 40 calls with replayed nonces,
unknown keys, unknown installations and a rate limit reached, once through
``validate_in`` call by call and once as a batch, on two copies of one database; the
outcomes, the counters, the nonces and the audit rows must be the same.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/benchlib.py

from cmsshop.errors import ApiError, RateLimited  # noqa: E402
from cmsshop.hotsql import db_time  # noqa: E402
from cmsshop.services.licensing import problems  # noqa: E402
from cmsshop.services.licensing.counting import call_checks  # noqa: E402
from cmsshop.services.licensing.steps import sign_lease  # noqa: E402
from cmsshop.services.licensing.validation import _LOOKUP_COLUMNS, _plan  # noqa: E402

AUDIT_COLUMNS = (
    "created_at", "action", "outcome", "status", "licence_id", "activation_id", "key_hint",
    "product", "fingerprint_sha256", "domain", "environment", "ip", "request_id",
)  # fmt: skip


def _rows(count: int, width: int) -> str:
    return ", ".join("(" + ", ".join("?" * width) + ")" for _ in range(count))


def _json_rows(db, sql: str, params: list) -> list:
    (text,) = db.execute(sql, params).fetchone()
    return json.loads(text)


def validate_batch(conn, licensing, limiter, calls) -> list:
    """For ``calls`` -- ``(LicenseRequest, AuditRecord, now)`` in arrival order -- each
    call's result, or the ApiError it is refused with, written in the caller's SQLite
    transaction ``conn`` (a RawTransaction)."""
    db, policy = conn.dbapi, licensing.policy
    outcomes: list = [None] * len(calls)

    # The counts: every check of every call in one upsert, then the totals in one read;
    # each call's count is the total less the steps of the calls after it.
    checks_of, steps = [], {}
    for data, audit, _ in calls:
        audit.describe(data)
        counting = limiter.counting(call_checks(audit))
        checks = []
        for i, (key, rule, retry_after) in enumerate(counting.planned):
            window = (key, counting.params[f"start{i}"])
            steps[window] = steps.get(window, 0) + 1
            checks.append((window, rule.limit, retry_after))
        checks_of.append(checks)
    db.execute(
        f"INSERT INTO rate_counters (key, window_start, count) VALUES {_rows(len(steps), 3)} "  # noqa: S608
        "ON CONFLICT (key, window_start) DO UPDATE SET count = rate_counters.count "
        "+ excluded.count",
        [x for (key, start), n in steps.items() for x in (key, start, n)],
    )
    keys = sorted({key for key, _ in steps})
    totals = _json_rows(
        db,
        "SELECT json_group_array(json_array(key, window_start, count)) FROM rate_counters "  # noqa: S608
        f"WHERE key IN ({', '.join('?' * len(keys))})",
        keys,
    )
    running = {window: 0 for window in steps}
    for key, start, count in totals:
        if (key, start) in steps:
            running[(key, start)] = count - steps[(key, start)]
    allowed = []
    for i, checks in enumerate(checks_of):
        refusal = None
        for window, limit, retry_after in checks:
            running[window] += 1
            if refusal is None and running[window] > limit:
                refusal = RateLimited(retry_after)
        calls[i][1].counted = True
        if refusal is None:
            allowed.append(i)
        else:
            outcomes[i] = refusal
    if not allowed:
        return outcomes

    # The lookups in one statement; the plans and leases in Python.
    wanted = [(i, calls[i][0].license_key, calls[i][0].fingerprint_sha256) for i in allowed]
    found = {
        row[0]: row[1:]
        for row in _json_rows(
            db,
            f"SELECT json_group_array(json_array(b.column1, {_LOOKUP_COLUMNS})) "  # noqa: S608
            f"FROM (VALUES {_rows(len(allowed), 3)}) AS b "
            "JOIN licences AS l ON l.key = b.column2 JOIN products AS p ON p.id = l.product_id "
            "LEFT OUTER JOIN activations AS a ON a.licence_id = l.id "
            "AND a.fingerprint_sha256 = b.column3",
            [x for call in wanted for x in call],
        )
    }
    signed = []
    for i in allowed:
        data, audit, now = calls[i]
        try:
            plan = _plan(found.get(i), policy, data, audit, now)
            signed.append((i, plan, sign_lease(licensing.signer, policy, plan.claims)))
        except ApiError as exc:
            outcomes[i] = exc
    if not signed:
        return outcomes

    # The nonces: those seen within the window refuse their call (an earlier call of the
    # batch included); the others are stored in one statement.
    seen = {
        (licence_id, nonce): seen_at
        for licence_id, nonce, seen_at in _json_rows(
            db,
            "SELECT json_group_array(json_array(n.licence_id, n.nonce, n.seen_at)) "  # noqa: S608
            f"FROM (VALUES {_rows(len(signed), 2)}) AS b JOIN licence_nonces AS n "
            "ON n.licence_id = b.column1 AND n.nonce = b.column2",
            [x for i, plan, _ in signed for x in (plan.license.id, calls[i][0].nonce)],
        )
    }
    fresh = []
    for i, plan, lease in signed:
        data, audit, now = calls[i]
        nonce = (plan.license.id, data.nonce)
        cutoff = db_time(conn, now - dt.timedelta(seconds=policy.nonce_window))
        if nonce in seen and seen[nonce] >= cutoff:
            outcomes[i] = problems.nonce_reused()
            continue
        seen[nonce] = at = db_time(conn, now)
        fresh.append((i, plan, lease, at))
    if not fresh:
        return outcomes
    db.execute(
        f"INSERT INTO licence_nonces (licence_id, nonce, seen_at) VALUES {_rows(len(fresh), 3)} "  # noqa: S608
        "ON CONFLICT (licence_id, nonce) DO UPDATE SET seen_at = excluded.seen_at",
        [x for i, plan, _, at in fresh for x in (plan.license.id, calls[i][0].nonce, at)],
    )

    # The touches and the audit rows, one statement each.
    touched = {plan.activation.id: at for _, plan, _, at in fresh}
    db.execute(
        "UPDATE activations SET last_validated_at = b.column2 "  # noqa: S608
        f"FROM (VALUES {_rows(len(touched), 2)}) AS b WHERE activations.id = b.column1",
        [x for item in touched.items() for x in item],
    )
    entries = []
    for i, plan, lease, _ in fresh:
        entry = calls[i][1].values("validated", 200)
        entry["created_at"] = db_time(conn, entry["created_at"])
        entry["licence_id"] = entry.pop("license_id")
        entries.extend(entry[column] for column in AUDIT_COLUMNS)
        outcomes[i] = plan.result(lease)
    db.execute(
        f"INSERT INTO licence_audit_log ({', '.join(AUDIT_COLUMNS)}) "  # noqa: S608
        f"VALUES {_rows(len(fresh), len(AUDIT_COLUMNS))}",
        entries,
    )
    return outcomes


def check() -> int:
    """validate_batch against validate_in call by call, on two copies of one database."""
    import random
    import shutil
    import sqlite3
    import tempfile

    from licensing import PRODUCT, activated_sample, bench_settings, prepare_database

    from cmsshop.config import SINGLETONS, configure
    from cmsshop.hotsql import raw_transaction
    from cmsshop.services.licensing import validation
    from cmsshop.services.licensing.records import AuditRecord, Licensing, LicensingPolicy
    from cmsshop.services.licensing.signing import LeaseSigner, generate_signing_key
    from cmsshop.services.ratelimit import RateLimiter
    from cmsshop.util import utcnow
    from cmsshop.views.licensing import license_result_body, well_formed_license_request

    workdir = tempfile.mkdtemp(prefix="cmsshop-bench-")
    key_dir = os.path.join(workdir, "keys")
    generate_signing_key(key_dir)
    prepare_database(f"sqlite:///{workdir}/one.sqlite", 1000, 50, reset=False)
    shutil.copy(f"{workdir}/one.sqlite", f"{workdir}/batch.sqlite")
    sample = activated_sample(f"sqlite:///{workdir}/one.sqlite", 50)
    rng = random.Random(3)
    bodies: list[dict] = []
    for n in range(40):
        body = {"product": PRODUCT, "nonce": f"{rng.getrandbits(64):032x}"}
        body.update(sample[rng.randrange(5)])  # five installations: a limit is reached
        if n % 7 == 3:
            body = dict(bodies[-1])  # a replay
        if n % 11 == 5:
            body["licenseKey"] = "NOPE-" + body["licenseKey"]
        if n % 13 == 6:
            body["fingerprint"] = "never-activated-installation"
        bodies.append(body)

    def run(name: str, batch: bool):
        settings = bench_settings(f"sqlite:///{workdir}/{name}.sqlite", key_dir)
        settings["cmsshop.license_rate_per_license"] = "6/60"
        registry = configure(settings).make_wsgi_app().registry
        services = {iface: service for (iface, _), service in registry[SINGLETONS].items()}
        licensing = Licensing(
            registry["cmsshop.engine"], services[LeaseSigner], services[LicensingPolicy]
        )
        limiter = services[RateLimiter]
        calls = [
            (well_formed_license_request(body), AuditRecord("validate", "192.0.2.1"), utcnow())
            for body in bodies
        ]
        with raw_transaction(licensing.engine) as conn:
            if batch:
                outcomes = validate_batch(conn, licensing, limiter, calls)
            else:
                outcomes = []
                for data, audit, now in calls:
                    result, refusal = validation.validate_in(
                        conn, licensing, data, audit, limiter, now
                    )
                    outcomes.append(refusal or result)
        licensing.engine.dispose()
        answers = []
        for outcome in outcomes:
            if isinstance(outcome, ApiError):
                answers.append((outcome.status, outcome.code))
            else:
                answer = license_result_body(outcome)
                del answer["lease"], answer["leaseExpiresAt"]  # signed, timed: differ
                del answer["activation"]["lastValidatedAt"]
                answers.append((200, json.dumps(answer, sort_keys=True)))
        with sqlite3.connect(f"{workdir}/{name}.sqlite") as db:
            stored = [
                db.execute(sql).fetchall()
                for sql in (
                    "SELECT key, count FROM rate_counters ORDER BY key",
                    "SELECT licence_id, nonce FROM licence_nonces ORDER BY 1, 2",
                    "SELECT outcome, licence_id, activation_id, key_hint, ip "
                    "FROM licence_audit_log ORDER BY id",
                )
            ]
        return answers, stored

    one, batched = run("one", batch=False), run("batch", batch=True)
    statuses = sorted({status for status, _ in one[0]})
    print(f"40 calls; statuses {statuses}; ", end="")
    if one == batched:
        print("the batch answers and stores what validate_in does")
        return 0
    for n, (a, b) in enumerate(zip(one[0], batched[0], strict=True)):
        if a != b:
            print(f"\ncall {n}: validate_in answers {a[0]}, the batch {b[0]}")
    print("the batch differs from validate_in")
    return 1


if __name__ == "__main__":
    sys.exit(check())
