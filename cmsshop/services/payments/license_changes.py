"""Renewals and paid upgrades of licenses the buyer already has.

An order item of kind ``renewal`` buys more time on its ``target_license_id``: one more
product duration, counted from the license's current expiry -- not from the day of
payment -- while the license is valid or expired no longer than the grace period
(``cmsshop.license_renewal_grace_days``, default 30); a license expired longer than that
is renewed from the payment (checkout already refuses it: buy a new license). An item of
kind ``upgrade`` moves the license to a product of the same ``upgrade_group`` with a
higher ``tier`` and more seats; its price is the difference of the two products' prices.

A license bought with quantity q (one license with q times the product's seats,
docs/licensing.md) keeps that multiplier: its renewal costs q times the renewal price,
its upgrade q times the difference and gives q times the new product's seats. q is the
quantity of the license's original purchase item (1 for a license issued by hand);
renewal and upgrade lines carry it as their own quantity, which fulfilment applies.

Both are priced at checkout (the buyer's own license, in a state that allows it) and
applied at fulfilment, which is the same exactly-once path as a purchase: the order row
is locked, the fulfilment gate row is unique per order, and here each license is locked
FOR UPDATE before it is read, so two renewals of one license paid at the same moment
both count (one after the other), and a ``license_changes`` row unique per order item
backs it up. The license's state is checked again at payment: if it was revoked or
suspended (or already upgraded) meanwhile, the order goes to ``needs_review`` and nothing
changes.

When the money goes back, so does the change (docs/payments.md, "Renewals and upgrades"):
a full refund or a lost dispute (chargeback) of such an order restores what its
``license_changes`` row says the license had before -- an upgrade's tier, seats and
feature flags, with the production installations over the old seat limit deactivated
newest first; a renewal's expiry -- and mails the customer. It runs in the transaction
that moves the order to ``refunded``, under the order's lock, so it happens once however
often or in whatever order the provider's events arrive; ``reversed_at`` backs that up.
A change that a later one builds on (a later renewal counted from its expiry, a later
upgrade from its tier) or that an admin has changed since is not undone: the license goes
to the admin's review list instead, as it does on a partial refund (``license_reviews``).
The license itself was paid for by its first order and is never revoked here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cmsshop.models import (
    Activation,
    Currency,
    License,
    LicenseAuditEntry,
    LicenseChange,
    LicenseReview,
    Order,
    OrderItem,
    Product,
    Subscription,
    SubscriptionPeriod,
    User,
)
from cmsshop.models.subscriptions import RENEWING_STATUSES
from cmsshop.services.licensing.domains import PRODUCTION
from cmsshop.services.licensing.features import features_of_product
from cmsshop.services.licensing.issuing import seats_of
from cmsshop.services.mail.outbox import enqueue
from cmsshop.services.store.currencies import format_amount
from cmsshop.services.webhooks import payloads
from cmsshop.services.webhooks.events import emit_event
from cmsshop.util import utcnow

DEFAULT_GRACE_DAYS = 30
DEFAULT_WINDOW_DAYS = 30
GRACE_SETTING = "cmsshop.license_renewal_grace_days"
WINDOW_SETTING = "cmsshop.license_renewal_window_days"


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


def purchased_quantities(session: Session, licenses: list[License]) -> dict[int, int]:
    """License id -> the quantity its purchase bought (1 without a purchase item)."""
    item_ids = {lic.order_item_id for lic in licenses if lic.order_item_id is not None}
    bought = (
        dict(
            session.execute(
                select(OrderItem.id, OrderItem.quantity).where(OrderItem.id.in_(item_ids))
            ).all()
        )
        if item_ids
        else {}
    )
    return {lic.id: bought.get(lic.order_item_id, 1) for lic in licenses}


def _line(product: Product, name: str, kind: str, license: License, unit: int, quantity: int):
    """An order line (the shape services/checkout/pricing.py describes); no coupon ever
    discounts a renewal or an upgrade."""
    return {
        "product_id": product.id,
        "slug": product.slug,
        "name": name[:200],
        "kind": kind,
        "target_license_id": license.id,
        "quantity": quantity,
        "unit_amount": unit,
        "discount": 0,
        "amount": unit * quantity,
    }


def price_renewal(
    session: Session, user_id: int, key: str, currency: str, now: dt.datetime, grace
) -> dict:
    """The order line of a renewal of the buyer's license ``key``: the product's price
    times the quantity the license was bought with."""
    license, product = _customer_license(session, user_id, key, "renew")
    if product.duration_days is None or license.expires_at is None:
        raise ItemRefused("renew", "this license never expires; there is nothing to renew")
    if license.status in ("revoked", "suspended"):
        raise ItemRefused("renew", f"this license is {license.status}")
    if subscribed(session, [license.id]):
        # Paying by hand on top of a live subscription would charge the buyer twice.
        raise ItemRefused("renew", "this license renews itself by subscription")
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
    quantity = purchased_quantities(session, [license])[license.id]
    name = f"Renewal of {product.name} ({license.key}) until {new_expiry:%Y-%m-%d}"
    return _line(product, name, "renewal", license, amount, quantity)


def subscribed(session: Session, license_ids: list[int]) -> set[int]:
    """Those of ``license_ids`` that a live subscription renews (services/subscriptions):
    they are not renewed or upgraded by hand."""
    if not license_ids:
        return set()
    return set(
        session.scalars(
            select(Subscription.license_id).where(
                Subscription.license_id.in_(license_ids), Subscription.status != "ended"
            )
        )
    )


def upgrade_problem(
    license: License, current: Product, target: Product, quantity: int = 1
) -> str | None:
    """Why ``license`` (of ``current``, bought ``quantity`` times) cannot move to
    ``target`` (None: it can)."""
    if current.upgrade_group is None or target.upgrade_group != current.upgrade_group:
        return f"{target.name} is not an upgrade of {current.name}"
    if target.tier <= current.tier:
        return f"{target.name} is not a higher tier than {current.name}"
    if seats_of(target, quantity) <= license.max_activations:
        return f"{target.name} gives no more seats than this license has"
    return None


def price_upgrade(
    session: Session, user_id: int, key: str, slug: str, currency: str, now: dt.datetime
) -> dict:
    """The order line of an upgrade of the buyer's license ``key`` to product ``slug``:
    the difference of the two products' prices, times the quantity the license was
    bought with."""
    license, current = _customer_license(session, user_id, key, "upgrade")
    if license.status != "active" or is_expired(license, now):
        raise ItemRefused("upgrade", f"only an active license can be upgraded ({license.status})")
    if subscribed(session, [license.id]):
        # The subscription would go on charging the old product's price.
        raise ItemRefused("upgrade", "this license renews itself by subscription")
    target = session.scalar(select(Product).where(Product.slug == slug))
    if target is None or not target.published or target.archived or not target.licensed:
        raise ItemRefused("to", "no such product for sale")
    quantity = purchased_quantities(session, [license])[license.id]
    problem = upgrade_problem(license, current, target, quantity)
    if problem:
        raise ItemRefused("to", problem)
    new_price, old_price = _price(target, currency), _price(current, currency)
    if new_price is None or old_price is None:
        raise ItemRefused("to", f"this upgrade is not sold in {currency}")
    name = f"Upgrade of {license.key} from {current.name} to {target.name}"
    return _line(target, name, "upgrade", license, max(0, new_price - old_price), quantity)


def purchase_currencies(session: Session, licenses: list[License]) -> dict[int, str]:
    """License id -> the currency its purchase was paid in (absent without a purchase)."""
    item_ids = {lic.order_item_id for lic in licenses if lic.order_item_id is not None}
    paid_in = (
        dict(
            session.execute(
                select(OrderItem.id, Order.currency)
                .join(Order, Order.id == OrderItem.order_id)
                .where(OrderItem.id.in_(item_ids))
            ).all()
        )
        if item_ids
        else {}
    )
    return {lic.id: paid_in[lic.order_item_id] for lic in licenses if lic.order_item_id in paid_in}


def license_offers(
    session: Session,
    licenses: list[License],
    settings: Mapping[str, Any],
    default_currency: str | None = None,
) -> dict[int, dict]:
    """For the customer's licenses page: license id -> {"renews_until": the expiry a
    renewal would give (None: not offered), "renewal_price": (amount, currency) or None,
    "upgrades": products it may move to}.

    A renewal is offered only when it makes sense: the license expires within the
    renewal window (``cmsshop.license_renewal_window_days``) or expired within the grace
    period, and it is sold in the currency the license was bought in (else
    ``default_currency``), so the button can say what it costs.
    """
    now, grace = utcnow(), grace_of(settings)
    window = dt.timedelta(days=settings.get(WINDOW_SETTING, DEFAULT_WINDOW_DAYS))
    currencies = purchase_currencies(session, licenses)
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
    quantities = purchased_quantities(session, licenses)
    renewing = subscribed(session, [lic.id for lic in licenses])
    offers = {}
    for lic in licenses:
        product = lic.product
        renewable = (
            lic.id not in renewing
            and product.duration_days is not None
            and lic.expires_at is not None
            and lic.status not in ("revoked", "suspended")
            and now - grace <= lic.expires_at <= now + window
            and not product.archived
        )
        currency = currencies.get(lic.id, default_currency)
        amount = _price(product, currency) if renewable and currency else None
        if amount is None:
            renewable = False
        upgrades = []
        if lic.status == "active" and not is_expired(lic, now) and lic.id not in renewing:
            upgrades = [
                p
                for p in candidates
                if upgrade_problem(lic, product, p, quantities[lic.id]) is None
            ]
        offers[lic.id] = {
            "renews_until": renewed_expiry(lic, product, now, grace) if renewable else None,
            "renewal_price": (amount * quantities[lic.id], currency) if renewable else None,
            "upgrades": upgrades,
        }
    return offers


# --- at fulfilment ---------------------------------------------------------------------------


def lock_license(session: Session, license_id: int) -> License | None:
    """The license, re-read and locked FOR UPDATE (renewals, upgrades, subscriptions)."""
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
        license = lock_license(session, item.target_license_id)
        if license is None or license.user_id != order.user_id:
            problems.append(f"item {item.id}: the license to {item.kind} is gone")
        elif license.status in ("revoked", "suspended"):
            problems.append(f"item {item.id}: the license is {license.status}")
        elif item.kind == "renewal" and license.expires_at is None:
            problems.append(f"item {item.id}: the license no longer expires")
        elif item.kind == "upgrade":
            current = session.get(Product, license.product_id)
            problem = upgrade_problem(license, current, item.product, item.quantity)
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


def apply_license_changes(
    session: Session,
    order: Order,
    settings: Mapping[str, Any],
    *,
    renews_until: dt.datetime | None = None,
) -> None:
    """Extend or upgrade the licenses of the order's renewal/upgrade items (in the
    fulfilment's transaction, after its gate row; call change_problems first).
    ``renews_until``: a subscription's renewal sets this expiry (services/subscriptions)."""
    now = utcnow()
    grace = grace_of(settings)
    for item in order.items:
        if item.kind == "purchase":
            continue
        license = lock_license(session, item.target_license_id)
        product = session.get(Product, license.product_id)
        change = LicenseChange(
            order_item_id=item.id,
            license_id=license.id,
            kind=item.kind,
            old_expires_at=license.expires_at,
            old_product_id=license.product_id,
            old_max_activations=license.max_activations,
            old_features=list(license.features or []),
            created_at=now,
        )
        if item.kind == "renewal":
            old = license.expires_at
            license.expires_at = renews_until or renewed_expiry(license, product, now, grace)
            detail = f"expiry {old:%Y-%m-%d} -> {license.expires_at:%Y-%m-%d}"
            if license.status == "expired":
                license.status = "active"
                detail += "; status expired -> active"
        else:
            target = item.product
            old_seats = license.max_activations
            license.product_id = target.id
            license.max_activations = seats_of(target, item.quantity)
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
        subject, data = payloads.license_event(session, license, orderNumber=order.number)
        event_type = "license.renewed" if item.kind == "renewal" else "license.upgraded"
        emit_event(session, event_type, subject=subject, data=data)
    session.flush()


# --- when the money goes back ----------------------------------------------------------------

REVERSAL_MAIL = "license_change_reversed"


@dataclasses.dataclass(frozen=True)
class Reversed:
    """One change taken back, as the customer's mail tells it."""

    kind: str
    key: str
    product_before: str
    product_after: str
    seats: int
    deactivated: list[str]
    expires_on: str | None


def _changes_of(session: Session, order: Order) -> list[LicenseChange]:
    """The order's changes not taken back yet, the latest first (an order that renews and
    upgrades one license is undone in the opposite order it was done)."""
    return list(
        session.scalars(
            select(LicenseChange)
            .join(OrderItem, OrderItem.id == LicenseChange.order_item_id)
            .where(OrderItem.order_id == order.id, LicenseChange.reversed_at.is_(None))
            .order_by(LicenseChange.id.desc())
        )
    )


EXPIRY_CHANGED = "the expiry was changed since"


def _subscription_expiry_without(
    session: Session, order: Order, license: License
) -> dt.datetime | None:
    """When ``order`` paid a period of a subscription that no longer renews itself (it
    ended: cancelled by this very refund, say) and the license's expiry is the one that
    subscription gave it (``paid_through``, lifecycle.follow_license), the renewal's
    expiry was moved by the subscription, not by hand: the expiry without this period is
    the latest other period still paid for. None otherwise."""
    period = session.scalar(
        select(SubscriptionPeriod).where(
            SubscriptionPeriod.order_id == order.id, SubscriptionPeriod.refunded_at.is_(None)
        )
    )
    if period is None:
        return None
    subscription = session.get(Subscription, period.subscription_id)
    if (
        subscription is None
        or subscription.status in RENEWING_STATUSES
        or subscription.license_id != license.id
        or license.expires_at != subscription.paid_through
    ):
        return None
    return session.scalar(
        select(func.max(SubscriptionPeriod.period_end)).where(
            SubscriptionPeriod.subscription_id == subscription.id,
            SubscriptionPeriod.refunded_at.is_(None),
            SubscriptionPeriod.id != period.id,
        )
    )


def _why_not_undone(session: Session, change: LicenseChange, license: License) -> str | None:
    """Why ``change`` cannot simply be undone now (None: it can)."""
    later = session.scalar(
        select(LicenseChange.id).where(
            LicenseChange.license_id == license.id,
            LicenseChange.kind == change.kind,
            LicenseChange.id > change.id,
            LicenseChange.reversed_at.is_(None),
        )
    )
    if change.kind == "renewal":
        if later is not None:
            return "a later renewal counts from the expiry it gave"
        if license.expires_at != change.new_expires_at:
            return EXPIRY_CHANGED
        return None
    if later is not None:
        return "a later upgrade builds on it"
    if (license.product_id, license.max_activations) != (
        change.new_product_id,
        change.new_max_activations,
    ):
        return "the license's product or seats were changed since"
    return None


def note_for_review(
    session: Session, order: Order, license_id: int, note: str, amount: int | None = None
) -> bool:
    """Put ``license_id`` on the admin's review list for ``order`` (one entry per order
    and license). A later event updates the entry, and reopens a resolved one, only with a
    larger refunded amount (or none stated): an older, smaller partial refund delivered
    late changes nothing. False when nothing changed."""
    now = utcnow()
    review = session.scalar(
        select(LicenseReview).where(
            LicenseReview.order_id == order.id, LicenseReview.license_id == license_id
        )
    )
    if review is None:
        session.add(
            LicenseReview(
                license_id=license_id,
                order_id=order.id,
                note=note[:500],
                refunded_amount=amount,
                created_at=now,
                updated_at=now,
            )
        )
        session.flush()
        return True
    if amount is not None and review.refunded_amount is not None:
        if amount <= review.refunded_amount:
            return False
    elif review.note == note[:500]:
        return False
    review.note, review.refunded_amount, review.updated_at = note[:500], amount, now
    review.resolved_at = review.resolved_by = None
    return True


def _money(session: Session, order: Order, amount: int) -> str:
    currency = session.get(Currency, order.currency)
    if currency is None:  # a foreign key target; never missing
        return f"{amount} {order.currency}"
    return format_amount(amount, currency.symbol, currency.decimals)


def review_partial_refund(session: Session, order: Order, amount: int) -> bool:
    """A partial refund of a paid (or disputed, or held) order: every license the order
    issued or changed goes to the admin's review list, unchanged. False when that was
    already known (a repeated or older event)."""
    item_ids = [item.id for item in order.items]
    issued = session.scalars(select(License.id).where(License.order_item_id.in_(item_ids)))
    changed = session.scalars(
        select(LicenseChange.license_id).where(LicenseChange.order_item_id.in_(item_ids))
    )
    note = (
        f"Partial refund of order {order.number}: {_money(session, order, amount)} of "
        f"{_money(session, order, order.total)}. Nothing was taken back; decide whether to."
    )
    noted = False
    for license_id in sorted({*issued, *changed}):
        noted = note_for_review(session, order, license_id, note, amount) or noted
    return noted


def _trim_seats(session: Session, license: License, now: dt.datetime) -> list[str]:
    """Deactivate the production installations over the seat limit, newest first (the
    ones that came with the upgrade); their domains."""
    active = list(
        session.scalars(
            select(Activation)
            .where(
                Activation.license_id == license.id,
                Activation.active.is_(True),
                Activation.environment == PRODUCTION,
            )
            .order_by(Activation.activated_at.desc(), Activation.id.desc())
        )
    )
    over = active[: max(0, len(active) - license.max_activations)]
    for activation in over:
        activation.active = False
        activation.deactivated_at = now
        subject, data = payloads.activation_event(session, activation, license.key)
        emit_event(session, "activation.deleted", subject=subject, data=data)
    return [activation.domain for activation in over]


def _undo(
    session: Session,
    change: LicenseChange,
    license: License,
    now: dt.datetime,
    expiry: dt.datetime | None = None,
):
    """Restore what ``change`` found (a renewal: ``expiry`` when given, the subscription's
    own); the audit detail and what the mail says."""
    if change.kind == "renewal":
        before = license.expires_at
        license.expires_at = expiry or change.old_expires_at
        product = session.get(Product, license.product_id)
        detail = f"expiry {before:%Y-%m-%d} -> {license.expires_at:%Y-%m-%d}"
        return detail, Reversed(
            "renewal", license.key, product.name, product.name, license.max_activations, [],
            f"{license.expires_at:%Y-%m-%d}",
        )  # fmt: skip
    upgraded = session.get(Product, change.new_product_id)
    previous = session.get(Product, change.old_product_id)
    license.product_id = previous.id
    license.max_activations = change.old_max_activations
    license.features = (
        list(change.old_features)
        if change.old_features is not None
        else features_of_product(previous)
    )
    session.flush()
    dropped = _trim_seats(session, license, now)
    detail = (
        f"product {upgraded.slug} -> {previous.slug}; seats {change.new_max_activations} -> "
        f"{license.max_activations}; deactivated {', '.join(dropped) or 'none'}"
    )
    return detail, Reversed(
        "upgrade", license.key, upgraded.name, previous.name, license.max_activations, dropped,
        None,
    )  # fmt: skip


def reverse_license_changes(
    session: Session, order: Order, settings: Mapping[str, Any], *, reversal: str
) -> list[str]:
    """Take back the renewals and upgrades of a locked ``order`` whose money went back in
    full (``reversal``: refund / chargeback), in the transaction that moves it to
    ``refunded``; mail the customer what was taken back. Notes on what was not."""
    now = utcnow()
    done: list[Reversed] = []
    notes = []
    for change in _changes_of(session, order):
        license = lock_license(session, change.license_id)
        if license is None:
            continue
        if license.status == "revoked":
            # Nothing left to take back from; the row says the money went back.
            change.reversed_at, change.reversal = now, reversal
            continue
        problem = _why_not_undone(session, change, license)
        expiry = None
        if problem == EXPIRY_CHANGED:
            # Moved by its ended subscription (not by hand): taken back from there.
            expiry = _subscription_expiry_without(session, order, license)
            problem = None if expiry is not None else problem
        if problem is not None:
            note = (
                f"Full {reversal} of order {order.number}: its {change.kind} was not taken "
                f"back ({problem}); decide what to take back."
            )
            note_for_review(session, order, license.id, note)
            notes.append(f"license {license.key}: {change.kind} held for review ({problem})")
            continue
        detail, told = _undo(session, change, license, now, expiry)
        change.reversed_at, change.reversal = now, reversal
        license.updated_at = now
        _audit(session, license, f"{change.kind}_reversed", f"{reversal}: {detail}", order)
        done.append(told)
    take_back_period(session, order, now)
    session.flush()
    if done:
        _queue_reversal_mail(session, settings, order, reversal, done)
    return notes


def take_back_period(session: Session, order: Order, now: dt.datetime) -> None:
    """The subscription period ``order`` paid for (services/subscriptions), if any, no
    longer counts: its subscription's ``paid_through`` is the latest period still paid
    for, so a later sync cannot give the refunded time back."""
    period = session.scalar(
        select(SubscriptionPeriod).where(
            SubscriptionPeriod.order_id == order.id, SubscriptionPeriod.refunded_at.is_(None)
        )
    )
    if period is None:
        return
    period.refunded_at = now
    subscription = session.scalar(
        select(Subscription)
        .where(Subscription.id == period.subscription_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    session.flush()
    subscription.paid_through = session.scalar(
        select(func.max(SubscriptionPeriod.period_end)).where(
            SubscriptionPeriod.subscription_id == subscription.id,
            SubscriptionPeriod.refunded_at.is_(None),
        )
    )
    subscription.updated_at = now


def _queue_reversal_mail(
    session: Session,
    settings: Mapping[str, Any],
    order: Order,
    reversal: str,
    done: list[Reversed],
) -> None:
    user = session.get(User, order.user_id)
    base_url = settings["cmsshop.base_url"].rstrip("/")
    enqueue(
        session,
        settings,
        kind=REVERSAL_MAIL,
        to=user.email,
        subject=f"Your license after the {reversal} of order {order.number}",
        template=REVERSAL_MAIL,
        context={
            "customer_name": user.name,
            "order_number": order.number,
            "reversal": reversal,
            "changes": [dataclasses.asdict(item) for item in reversed(done)],
            "licenses_url": f"{base_url}/account/licenses",
        },
        # One mail per order: the reversal happens once, this backs it up.
        dedupe_key=f"license-reversal:order:{order.id}",
        user_id=user.id,
    )
