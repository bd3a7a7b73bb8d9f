"""Licence-expiring reminders: one pass (``cmsshop-admin <ini> remind-expiring``) queues
``license_expiring`` for every active license of a customer that expires within the
next days.

Idempotent per license and period: the dedupe key names the license and its expiry
date, so a second pass (or two passes at once) queues nothing more, and a renewed
license (a new expiry date) gets a reminder for its new period.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, joinedload

from cmsshop.models import License, Subscription, User
from cmsshop.services.mail.outbox import enqueue
from cmsshop.util import utcnow

REMINDER_DAYS_SETTING = "cmsshop.mail.expiry_reminder_days"
DEFAULT_REMINDER_DAYS = 14


def reminder_days(settings: Mapping[str, Any]) -> int:
    """The configured look-ahead in days (the licensing module coerces the setting; a
    raw ini value is read too, for commands run with the module off)."""
    return int(str(settings.get(REMINDER_DAYS_SETTING, DEFAULT_REMINDER_DAYS)).strip())


def expiring_licenses(session: Session, days: int, now: dt.datetime) -> list[License]:
    """Active licenses of a customer that have not expired yet and expire within ``days``,
    but for those a live subscription renews (a reminder to renew by hand would be
    wrong: a manual renewal is refused while it lives)."""
    renewed = select(Subscription.license_id).where(
        Subscription.status != "ended", Subscription.license_id.is_not(None)
    )
    return list(
        session.scalars(
            select(License)
            .where(
                License.status == "active",
                License.user_id.is_not(None),
                License.expires_at.is_not(None),
                License.expires_at > now,
                License.expires_at <= now + dt.timedelta(days=days),
                License.id.not_in(renewed),
            )
            .options(joinedload(License.product))
            .order_by(License.expires_at, License.id)
        )
    )


def expiry_dedupe_key(license: License) -> str:
    return f"license-expiring:{license.id}:{license.expires_at.date().isoformat()}"


def queue_expiry_reminders(
    session: Session, settings: Mapping[str, Any], *, days: int, now: dt.datetime | None = None
) -> int:
    """Queue the reminders of one pass in ``session``'s transaction; how many were new."""
    if days < 1:
        raise ValueError("days must be at least 1")
    now = now or utcnow()
    base_url = settings["cmsshop.base_url"].rstrip("/")
    queued = 0
    for license in expiring_licenses(session, days, now):
        customer = session.get(User, license.user_id)
        expires = license.expires_at.astimezone(dt.UTC)
        left = (expires.date() - now.astimezone(dt.UTC).date()).days
        queued += enqueue(
            session,
            settings,
            kind="license_expiring",
            to=customer.email,
            subject=f"Your {license.product.name} license expires on {expires:%Y-%m-%d}",
            template="license_expiring",
            context={
                "customer_name": customer.name,
                "product": license.product.name,
                "license_key": license.key,
                "expires_on": f"{expires:%Y-%m-%d}",
                "days_left": max(left, 0),
                "licenses_url": f"{base_url}/account/licenses",
            },
            dedupe_key=expiry_dedupe_key(license),
            user_id=customer.id,
        )
    return queued
