"""Licenses by hand (admin): search, one license with its activations and audit log, and
the changes an admin makes -- suspend, reinstate, revoke, extend the expiry, change the
seat limit, reset the activations.

Every change takes the license row the way an activation does (the SQLite write lock,
then FOR NO KEY UPDATE on PostgreSQL, see steps.open_license), so it never interleaves
with an activation counting seats, and writes one audit entry naming the admin and the
change in the same transaction. The rules:

- revoked is final: nothing but resetting the activations applies to a revoked license;
- suspend: an active license; reinstate: a suspended one (back to active);
- extend: a later expiry, either ``days`` more (from the current expiry, or from now if
  that has passed) or ``until`` a date; an expired license becomes active again. A
  license without an expiry never expires and cannot be extended;
- the seat limit (production activations) is 0 or more; activations already taken stay
  until deactivated (reset them to enforce a lower limit at once);
- features: the license's whole set of feature flags (services/licensing/features.py),
  signed into the next lease each runtime gets;
- resolve: the license's open review notes (a partial refund, or a full one whose
  renewal or upgrade could not simply be taken back: services/payments/license_changes.py)
  are marked resolved; the admin has done, or decided against, whatever they asked.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy import exists, or_, select, update
from sqlalchemy.orm import Session, aliased

from cmsshop.db import take_write_lock
from cmsshop.models import (
    Activation,
    License,
    LicenseAuditEntry,
    LicenseReview,
    Order,
    Product,
    User,
)
from cmsshop.services.licensing.steps import seats_used
from cmsshop.services.paging import Page, PageRequest, fetch_page
from cmsshop.services.webhooks import payloads
from cmsshop.services.webhooks.events import emit_event
from cmsshop.util import utcnow

ACTIONS = ("suspend", "reinstate", "revoke", "extend", "seats", "reset", "features", "resolve")
MAX_SEATS = 100_000
MAX_EXTEND_DAYS = 36_500
AUDIT_SHOWN = 200


class LicenseMissing(Exception):
    pass


class ActionRefused(Exception):
    """The action does not apply to the license as it is now (``field``: the form field
    the message belongs to)."""

    def __init__(self, message: str, field: str = "form"):
        super().__init__(message)
        self.message = message
        self.field = field


@dataclasses.dataclass(frozen=True)
class Admin:
    """Who changes a license, and from where (for the audit entry)."""

    id: int
    email: str
    ip: str
    request_id: str | None = None


@dataclasses.dataclass(frozen=True)
class LicenseSummary:
    license: License
    product: Product
    customer: User | None
    activations_used: int


@dataclasses.dataclass(frozen=True)
class AuditLine:
    entry: LicenseAuditEntry
    admin_email: str | None


@dataclasses.dataclass(frozen=True)
class ReviewLine:
    review: LicenseReview
    order_number: str


@dataclasses.dataclass(frozen=True)
class LicenseDetail:
    license: License
    product: Product
    customer: User | None
    activations: list[Activation]
    activations_used: int
    audit: list[AuditLine]
    reviews: list[ReviewLine] = dataclasses.field(default_factory=list)


# --- reading ---------------------------------------------------------------------------------


def _like(value: str) -> str:
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def search_licenses(
    session: Session, paging: PageRequest, q: str | None = None, to_review: bool = False
) -> Page:
    """Licenses newest first; ``q`` matches a key (exactly or its start), a customer's
    email or an activation's domain (parts of either); ``to_review``: only licenses with
    an open review note."""
    query = (
        select(License, Product, User)
        .join(Product, Product.id == License.product_id)
        .outerjoin(User, User.id == License.user_id)
    )
    if to_review:
        query = query.where(
            exists().where(
                LicenseReview.license_id == License.id, LicenseReview.resolved_at.is_(None)
            )
        )
    q = (q or "").strip()
    if q:
        part = f"%{_like(q.lower())}%"
        on_domain = exists().where(
            Activation.license_id == License.id, Activation.domain.like(part, escape="\\")
        )
        query = query.where(
            or_(
                License.key == q,
                License.key.like(f"{_like(q)}%", escape="\\"),
                User.email.like(part, escape="\\"),
                on_domain,
            )
        )
    query = query.order_by(License.created_at.desc(), License.id.desc())
    page = fetch_page(session, query, paging, scalars=False)
    return page.map(
        lambda row: LicenseSummary(row[0], row[1], row[2], seats_used(session, row[0].id)[0])
    )


def find_license(session: Session, key: str) -> License | None:
    return session.scalar(select(License).where(License.key == key))


def license_detail(session: Session, key: str) -> LicenseDetail:
    """One license with its activations and its audit log (newest first)."""
    license = find_license(session, key)
    if license is None:
        raise LicenseMissing(key)
    customer = session.get(User, license.user_id) if license.user_id else None
    activations = list(
        session.scalars(
            select(Activation)
            .where(Activation.license_id == license.id)
            .order_by(Activation.active.desc(), Activation.id.desc())
        )
    )
    admin = aliased(User)
    rows = session.execute(
        select(LicenseAuditEntry, admin.email)
        .outerjoin(admin, admin.id == LicenseAuditEntry.admin_id)
        .where(LicenseAuditEntry.license_id == license.id)
        .order_by(LicenseAuditEntry.created_at.desc(), LicenseAuditEntry.id.desc())
        .limit(AUDIT_SHOWN)
    ).all()
    reviews = session.execute(
        select(LicenseReview, Order.number)
        .join(Order, Order.id == LicenseReview.order_id)
        .where(LicenseReview.license_id == license.id, LicenseReview.resolved_at.is_(None))
        .order_by(LicenseReview.updated_at.desc(), LicenseReview.id.desc())
    ).all()
    return LicenseDetail(
        license=license,
        product=session.get(Product, license.product_id),
        customer=customer,
        activations=activations,
        activations_used=seats_used(session, license.id)[0],
        audit=[AuditLine(entry, email) for entry, email in rows],
        reviews=[ReviewLine(review, number) for review, number in reviews],
    )


# --- changes ---------------------------------------------------------------------------------


def _lock(session: Session, key: str) -> License:
    """The license row, locked as an activation locks it (see the module docstring)."""
    take_write_lock(session)
    license = session.scalar(
        select(License)
        .where(License.key == key)
        .with_for_update(of=License, key_share=True)
        .execution_options(populate_existing=True)
    )
    if license is None:
        raise LicenseMissing(key)
    return license


def _refuse_revoked(license: License) -> None:
    if license.status == "revoked":
        raise ActionRefused("This license is revoked; revoking is final and cannot be undone.")


def _day(value: dt.datetime | None) -> str:
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC") if value else "never"


def _audit(session: Session, license: License, admin: Admin, action: str, detail: str) -> None:
    session.add(
        LicenseAuditEntry(
            created_at=utcnow(),
            action=f"admin.{action}",
            outcome="ok",
            status=200,
            license_id=license.id,
            ip=admin.ip[:64],
            request_id=admin.request_id,
            admin_id=admin.id,
            detail=f"{detail} (by {admin.email})"[:500],
        )
    )


def suspend(session: Session, key: str, admin: Admin) -> License:
    license = _lock(session, key)
    _refuse_revoked(license)
    if license.status != "active":
        raise ActionRefused(
            f"Only an active license can be suspended; this one is {license.status}."
        )
    license.status = "suspended"
    _audit(session, license, admin, "suspend", "status active -> suspended")
    return license


def reinstate(session: Session, key: str, admin: Admin) -> License:
    license = _lock(session, key)
    _refuse_revoked(license)
    if license.status != "suspended":
        raise ActionRefused(
            f"Only a suspended license can be reinstated; this one is {license.status}."
        )
    license.status = "active"
    _audit(session, license, admin, "reinstate", "status suspended -> active")
    return license


def revoke(session: Session, key: str, admin: Admin) -> License:
    license = _lock(session, key)
    if license.status == "revoked":
        raise ActionRefused("This license is already revoked.")
    before = license.status
    license.status = "revoked"
    _audit(session, license, admin, "revoke", f"status {before} -> revoked (final)")
    subject, data = payloads.license_event(session, license)
    emit_event(session, "license.revoked", subject=subject, data=data)
    return license


def extend(
    session: Session,
    key: str,
    admin: Admin,
    *,
    days: int | None = None,
    until: dt.date | None = None,
) -> License:
    """A later expiry: ``days`` more, or ``until`` the end of a date (UTC)."""
    if (days is None) == (until is None):
        raise ActionRefused("Give either a number of days or a date.", "days")
    license = _lock(session, key)
    _refuse_revoked(license)
    if license.expires_at is None:
        raise ActionRefused("This license never expires; there is nothing to extend.")
    now = utcnow()
    old = license.expires_at
    if days is not None:
        if not 1 <= days <= MAX_EXTEND_DAYS:
            raise ActionRefused(f"Give 1 to {MAX_EXTEND_DAYS} days.", "days")
        new = max(old, now) + dt.timedelta(days=days)
        how = f"+{days} days"
    else:
        new = dt.datetime.combine(until, dt.time(23, 59, 59), dt.UTC)
        if new <= now:
            raise ActionRefused("The new expiry must be in the future.", "until")
        if new <= old:
            raise ActionRefused(
                f"The new expiry must be later than the current one ({_day(old)}).", "until"
            )
        how = f"to {until.isoformat()}"
    license.expires_at = new
    detail = f"expiry {_day(old)} -> {_day(new)} ({how})"
    if license.status == "expired":
        license.status = "active"
        detail += "; status expired -> active"
    _audit(session, license, admin, "extend", detail)
    return license


def set_seats(session: Session, key: str, admin: Admin, max_activations: int) -> License:
    if not 0 <= max_activations <= MAX_SEATS:
        raise ActionRefused(f"The seat limit must be 0 to {MAX_SEATS}.", "maxActivations")
    license = _lock(session, key)
    _refuse_revoked(license)
    before = license.max_activations
    if before == max_activations:
        raise ActionRefused(f"The seat limit is {before} already.", "maxActivations")
    license.max_activations = max_activations
    _audit(session, license, admin, "seats", f"seat limit {before} -> {max_activations}")
    return license


def set_features(session: Session, key: str, admin: Admin, features: list[str]) -> License:
    """Replace the license's feature flags (``features`` already normalised)."""
    license = _lock(session, key)
    _refuse_revoked(license)
    before = list(license.features or [])
    if before == features:
        raise ActionRefused("The license has exactly these features already.", "features")
    license.features = features
    _audit(
        session,
        license,
        admin,
        "features",
        f"features {', '.join(before) or 'none'} -> {', '.join(features) or 'none'}",
    )
    return license


def reset_activations(session: Session, key: str, admin: Admin) -> License:
    """Deactivate every active installation (each runtime must activate again)."""
    license = _lock(session, key)
    now = utcnow()
    reset = list(
        session.scalars(
            select(Activation).where(
                Activation.license_id == license.id, Activation.active.is_(True)
            )
        )
    )
    for activation in reset:
        activation.active = False
        activation.deactivated_at = now
        subject, data = payloads.activation_event(session, activation, license.key)
        emit_event(session, "activation.deleted", subject=subject, data=data)
    count = len(reset)
    _audit(session, license, admin, "reset", f"{count} active activation(s) deactivated")
    return license


def find_activation(session: Session, license: License, activation_id: int) -> Activation | None:
    """The license's activation of ``activation_id`` (None if it has no such one)."""
    return session.scalar(
        select(Activation).where(
            Activation.id == activation_id, Activation.license_id == license.id
        )
    )


def deactivate_activation(session: Session, key: str, admin: Admin, activation_id: int) -> License:
    """Deactivate one installation of the license (the console's row button; the runtime
    must activate again). Refused if it is not an active installation of this license."""
    license = _lock(session, key)
    activation = find_activation(session, license, activation_id)
    if activation is None or not activation.active:
        raise ActionRefused("This installation is not active; there is nothing to deactivate.")
    activation.active = False
    activation.deactivated_at = utcnow()
    subject, data = payloads.activation_event(session, activation, license.key)
    emit_event(session, "activation.deleted", subject=subject, data=data)
    _audit(
        session,
        license,
        admin,
        "deactivate",
        f"activation {activation.domain} ({activation.environment}) deactivated",
    )
    return license


def resolve_reviews(session: Session, key: str, admin: Admin) -> License:
    """Mark the license's open review notes resolved."""
    license = _lock(session, key)
    now = utcnow()
    result = session.execute(
        update(LicenseReview)
        .where(LicenseReview.license_id == license.id, LicenseReview.resolved_at.is_(None))
        .values(resolved_at=now, resolved_by=admin.id)
        .execution_options(synchronize_session=False)
    )
    count = result.rowcount or 0
    if count == 0:
        raise ActionRefused("This license has no open review notes.")
    _audit(session, license, admin, "resolve", f"{count} review note(s) resolved")
    return license


def apply_action(session: Session, key: str, admin: Admin, action: str, values: dict) -> License:
    """Run one of ACTIONS with its values (``days``/``until``, ``maxActivations``,
    ``features``)."""
    if action == "suspend":
        return suspend(session, key, admin)
    if action == "reinstate":
        return reinstate(session, key, admin)
    if action == "revoke":
        return revoke(session, key, admin)
    if action == "extend":
        return extend(session, key, admin, days=values.get("days"), until=values.get("until"))
    if action == "seats":
        if values.get("maxActivations") is None:
            raise ActionRefused("Give the new seat limit.", "maxActivations")
        return set_seats(session, key, admin, values["maxActivations"])
    if action == "reset":
        return reset_activations(session, key, admin)
    if action == "features":
        if values.get("features") is None:
            raise ActionRefused(
                "Give the license's features (an empty list clears them).", "features"
            )
        return set_features(session, key, admin, values["features"])
    if action == "resolve":
        return resolve_reviews(session, key, admin)
    raise ValueError(f"unknown license action {action!r}")
