"""Rate limits and the audit trail of licensing calls.

The rate policies belong to licensing (the module declares them from its settings):
per client IP, per license key (hashed) and, for activate/deactivate only, the churn
of seats per key. Every call is counted in a short transaction of its own before it
does any work, so a refused call costs no signature, and the counters are never
locked for the length of a call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager

from sqlalchemy.orm import Session

from cmsshop.errors import ApiError, RateLimited
from cmsshop.services.licensing.records import AuditRecord, LicenseRequest
from cmsshop.services.ratelimit import Check, RateLimiter

LICENSE_IP_POLICY = "license.ip"
LICENSE_KEY_POLICY = "license.key"
LICENSE_CHURN_POLICY = "license.churn"
# policy name -> the setting that gives its COUNT/SECONDS
RATE_POLICY_SETTINGS = {
    LICENSE_IP_POLICY: "cmsshop.license_rate_per_ip",
    LICENSE_KEY_POLICY: "cmsshop.license_rate_per_license",
    LICENSE_CHURN_POLICY: "cmsshop.license_rate_churn",
}

log = logging.getLogger("cmsshop.licensing")


def call_checks(audit: AuditRecord) -> list[Check]:
    """The rate checks of a call described by ``audit`` (the IP alone before parsing)."""
    if audit.key_hint is None:
        return [(LICENSE_IP_POLICY, audit.ip)]
    checks = [(LICENSE_IP_POLICY, audit.ip), (LICENSE_KEY_POLICY, audit.key_hint)]
    if audit.action != "validate":
        checks.append((LICENSE_CHURN_POLICY, audit.key_hint))
    return checks


def admit_call(limiter: RateLimiter, data: LicenseRequest, audit: AuditRecord) -> None:
    """Describe the call in its audit record and count it; 429 ``rate_limited`` when a
    limit is reached."""
    audit.describe(data)
    refusal = limiter.count(call_checks(audit))
    audit.counted = True
    if refusal is not None:
        raise RateLimited(refusal.retry_after)


def record_failure(
    limiter: RateLimiter,
    own_transaction: Callable[[], AbstractContextManager[Session]],
    audit: AuditRecord,
    exc: BaseException,
) -> None:
    """Audit a failed call (and count it, if it failed before it was counted) once the
    request's transaction has ended, in a transaction of its own.

    Successful calls are audited by the call itself; failures roll back. Writing after
    the rollback means that on SQLite the entry never waits on a lock the call held.
    """
    if isinstance(exc, ApiError):
        outcome, status = exc.code, exc.status
    else:
        outcome, status = "internal_error", 500
    try:
        if not audit.counted:
            limiter.count(call_checks(audit))
        with own_transaction() as session:
            session.add(audit.entry(outcome, status))
    except Exception:  # noqa: BLE001 - the audit must not turn an answer into a crash
        log.warning("could not write licensing audit entry", exc_info=True)
