"""Renewals and paid upgrades of licenses the buyer already has.

An order item of kind ``renewal`` buys more time on its ``target_license_id``: one more
product duration, counted from the license's current expiry -- not from the day of
payment -- while the license is valid or expired no longer than the grace period
(``cmsshop.license_renewal_grace_days``, default 30); a license expired longer than that
is renewed from the payment (checkout already refuses it: buy a new license). An item of
kind ``upgrade`` moves the license to a product of the same ``upgrade_group`` with a
higher ``tier`` and more seats; its price is the difference of the two products' prices.

Both are priced at checkout (the buyer's own license, in a state that allows it) and
applied at fulfilment, which is the same exactly-once path as a purchase: the order row
is locked, the fulfilment gate row is unique per order, and here each license is locked
FOR UPDATE before it is read, so two renewals of one license paid at the same moment
both count (one after the other), and a ``license_changes`` row unique per order item
backs it up. The license's state is checked again at payment: if it was revoked or
suspended (or already upgraded) meanwhile, the order goes to ``needs_review`` and nothing
changes. A refund of a renewal or upgrade order revokes no license (the license was paid
for by its first order): an admin decides what to take back (docs/payments.md).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import License, LicenseAuditEntry, LicenseChange, Order, Product
from cmsshop.services.licensing.features import features_of_product
from cmsshop.services.licensing.issuing import DEFAULT_MAX_ACTIVATIONS
from cmsshop.util import utcnow

DEFAULT_GRACE_DAYS = 30
GRACE_SETTING = "cmsshop.license_renewal_grace_days"


class ItemRefused(Exception):
    """A renewal or upgrade that cannot be sold (``field``: renew / upgrade / to)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


def grace_of(settings: Mapping[str, Any]) -> dt.timedelta:
    return dt.timedelta(days=int(settings.get(GRACE_SETTING, DEFAULT_GRACE_DAYS)))


def is_expired(license: License, now: dt.datetime) -> bool:
    return license.status == "expired" or (
        license.expires_at is not None and license.expires_at <= now
    )


def renewed_expiry(license: License, product: Product, now: dt.datetime, grace: dt.timedelta):
    """The expiry a renewal gives: one duration from the current expiry while within the
    grace period, else from ``now``."""
    start = license.expires_at
    if start is None or start < now - grace:
        start = now
    return start + dt.timedelta(days=product.duration_days)


def _customer_license(session: Session, user_id: int, key: str, field: str):
    row = session.execute(
        select(License, Product)
        .join(Product, Product.id == License.product_id)
        .where(License.key == key.strip().upper(), License.user_id == user_id)
    ).first()
    if row is None:
        # Someone else's key answers as an unknown one.
        raise ItemRefused(field, "you have no license with this key")
    return row


def _price(product: Product, currency: str) -> int | None:
    return next((p.amount for p in product.prices if p.currency == currency), None)


def price_renewal(
    session: Session, user_id: int, key: str, currency: str, now: dt.datetime, grace
) -> dict:
    """The order line of a renewal of the buyer's license ``key``."""
    license, product = _customer_license(session, user_id, key, "renew")
    if product.duration_days is None or license.expires_at is None:
        raise ItemRefused("renew", "this license never expires; there is nothing to renew")
    if license.status in ("revoked", "suspended"):
        raise ItemRefused("renew", f"this license is {license.status}")
    if license.expires_at < now - grace:
        raise ItemRefused(
            "renew",
            f"this license expired more than {grace.days} days ago; buy a new license",
        )
    if product.archived:
        raise ItemRefused("renew", "this product is no longer sold")
    amount = _price(product, currency)
    if amount is None:
        raise ItemRefused("renew", f"renewals are not sold in {currency}")
    new_expiry = renewed_expiry(license, product, now, grace)
    return {
        "product_id": product.id,
        "slug": product.slug,
        "name": f"Renewal of {product.name} ({license.key}) until {new_expiry:%Y-%m-%d}"[:200],
        "amount": amount,
        "kind": "renewal",
        "target_license_id": license.id,
    }


def seats_of(product: Product) -> int:
    """The seats a license of ``product`` has (as issue_license gives them)."""
    if product.max_activations is None:
        return DEFAULT_MAX_ACTIVATIONS
    return product.max_activations


def upgrade_problem(license: License, current: Product, target: Product) -> str | None:
    """Why ``license`` (of ``current``) cannot move to ``target`` (None: it can)."""
    if current.upgrade_group is None or target.upgrade_group != current.upgrade_group:
        return f"{target.name} is not an upgrade of {current.name}"
    if target.tier <= current.tier:
        return f"{target.name} is not a higher tier than {current.name}"
    if seats_of(target) <= license.max_activations:
        return f"{target.name} gives no more seats than this license has"
    return None


def price_upgrade(
    session: Session, user_id: int, key: str, slug: str, currency: str, now: dt.datetime
) -> dict:
    """The order line of an upgrade of the buyer's license ``key`` to product ``slug``:
    the difference of the two products' prices."""
    license, current = _customer_license(session, user_id, key, "upgrade")
    if license.status != "active" or is_expired(license, now):
        raise ItemRefused("upgrade", f"only an active license can be upgraded ({license.status})")
    target = session.scalar(select(Product).where(Product.slug == slug))
    if target is None or not target.published or target.archived or not target.licensed:
        raise ItemRefused("to", "no such product for sale")
    problem = upgrade_problem(license, current, target)
    if problem:
        raise ItemRefused("to", problem)
    new_price, old_price = _price(target, currency), _price(current, currency)
    if new_price is None or old_price is None:
        raise ItemRefused("to", f"this upgrade is not sold in {currency}")
    return {
        "product_id": target.id,
        "slug": target.slug,
        "name": f"Upgrade of {license.key} from {current.name} to {target.name}"[:200],
        "amount": max(0, new_price - old_price),
        "kind": "upgrade",
        "target_license_id": license.id,
    }


def license_offers(
    session: Session, licenses: list[License], settings: Mapping[str, Any]
) -> dict[int, dict]:
    """For the customer's licenses page: license id -> {"renews_until": the expiry a
    renewal would give (None: not renewable), "upgrades": products it may move to}."""
    now, grace = utcnow(), grace_of(settings)
    groups = {lic.product.upgrade_group for lic in licenses if lic.product.upgrade_group}
    candidates = (
        list(
            session.scalars(
                select(Product)
                .where(
                    Product.upgrade_group.in_(groups),
                    Product.published.is_(True),
                    Product.archived.is_(False),
                    Product.licensed.is_(True),
                )
                .order_by(Product.tier, Product.name)
            )
        )
        if groups
        else []
    )
    offers = {}
    for lic in licenses:
        product = lic.product
        renewable = (
            product.duration_days is not None
            and lic.expires_at is not None
            and lic.status not in ("revoked", "suspended")
            and lic.expires_at >= now - grace
            and not product.archived
        )
        upgrades = []
        if lic.status == "active" and not is_expired(lic, now):
            upgrades = [p for p in candidates if upgrade_problem(lic, product, p) is None]
        offers[lic.id] = {
            "renews_until": renewed_expiry(lic, product, now, grace) if renewable else None,
            "upgrades": upgrades,
        }
    return offers


# --- at fulfilment ---------------------------------------------------------------------------


def _lock_license(session: Session, license_id: int) -> License | None:
    return session.scalar(
        select(License)
        .where(License.id == license_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )


def change_problems(session: Session, order: Order, now: dt.datetime) -> list[str]:
    """Why the order's renewals/upgrades cannot be applied now (locks their licenses)."""
    problems = []
    for item in order.items:
        if item.kind == "purchase":
            continue
        license = _lock_license(session, item.target_license_id)
        if license is None or license.user_id != order.user_id:
            problems.append(f"item {item.id}: the license to {item.kind} is gone")
        elif license.status in ("revoked", "suspended"):
            problems.append(f"item {item.id}: the license is {license.status}")
        elif item.kind == "renewal" and license.expires_at is None:
            problems.append(f"item {item.id}: the license no longer expires")
        elif item.kind == "upgrade":
            current = session.get(Product, license.product_id)
            problem = upgrade_problem(license, current, item.product)
            if problem:
                problems.append(f"item {item.id}: {problem}")
    return problems


def _audit(session: Session, license: License, action: str, detail: str, order: Order):
    session.add(
        LicenseAuditEntry(
            created_at=utcnow(),
            action=action,
            outcome="ok",
            status=200,
            license_id=license.id,
            ip="-",
            detail=f"{detail} (order {order.number})"[:500],
        )
    )


def apply_license_changes(session: Session, order: Order, settings: Mapping[str, Any]) -> None:
    """Extend or upgrade the licenses of the order's renewal/upgrade items (in the
    fulfilment's transaction, after its gate row; call change_problems first)."""
    now = utcnow()
    grace = grace_of(settings)
    for item in order.items:
        if item.kind == "purchase":
            continue
        license = _lock_license(session, item.target_license_id)
        product = session.get(Product, license.product_id)
        change = LicenseChange(
            order_item_id=item.id,
            license_id=license.id,
            kind=item.kind,
            old_expires_at=license.expires_at,
            old_product_id=license.product_id,
            old_max_activations=license.max_activations,
            created_at=now,
        )
        if item.kind == "renewal":
            old = license.expires_at
            license.expires_at = renewed_expiry(license, product, now, grace)
            detail = f"expiry {old:%Y-%m-%d} -> {license.expires_at:%Y-%m-%d}"
            if license.status == "expired":
                license.status = "active"
                detail += "; status expired -> active"
        else:
            target = item.product
            old_seats = license.max_activations
            license.product_id = target.id
            license.max_activations = seats_of(target)
            license.features = features_of_product(target)
            detail = (
                f"product {product.slug} -> {target.slug}; seats {old_seats} -> "
                f"{license.max_activations}"
            )
        license.updated_at = now
        change.new_expires_at = license.expires_at
        change.new_product_id = license.product_id
        change.new_max_activations = license.max_activations
        session.add(change)
        _audit(session, license, item.kind, detail, order)
    session.flush()
