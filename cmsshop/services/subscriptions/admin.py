"""The console's view of subscriptions: the list, and one subscription's timeline (its
periods and their orders, the provider events about it, and the changes to its
license), read-only; the repair is ``reconcile``."""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cmsshop.errors import NotFound
from cmsshop.models import (
    License,
    LicenseAuditEntry,
    Order,
    PaymentEvent,
    Product,
    Subscription,
    SubscriptionPeriod,
    SubscriptionPlan,
    User,
)
from cmsshop.models.meta import MAX_ID
from cmsshop.services.paging import Page, PageRequest, fetch_page

TIMELINE_LIMIT = 200  # the newest entries of each kind; the event log has the rest


@dataclasses.dataclass(frozen=True)
class Row:
    subscription: Subscription
    email: str
    product: str | None
    license_key: str | None


@dataclasses.dataclass(frozen=True)
class TimelineEntry:
    at: dt.datetime
    kind: str  # period / event / license
    text: str
    order_number: str | None = None


@dataclasses.dataclass(frozen=True)
class Detail:
    row: Row
    first_order: str
    periods: list[tuple[SubscriptionPeriod, str]]  # (period, its order's number)
    timeline: list[TimelineEntry]


def _rows_query():
    return (
        select(Subscription, User.email, Product.name, License.key)
        .join(User, User.id == Subscription.user_id)
        .join(License, License.id == Subscription.license_id, isouter=True)
        # No license (an order held for review, refunded: never delivered): the plan's.
        .join(SubscriptionPlan, SubscriptionPlan.id == Subscription.plan_id, isouter=True)
        .join(
            Product,
            Product.id == func.coalesce(License.product_id, SubscriptionPlan.product_id),
            isouter=True,
        )
    )


def list_subscriptions(session: Session, paging: PageRequest, status: str | None) -> Page:
    """Subscriptions, newest first, of one status or all."""
    where = [Subscription.status == status] if status else []
    page = fetch_page(
        session,
        _rows_query().where(*where).order_by(Subscription.id.desc()),
        paging,
        count_query=select(func.count()).select_from(Subscription).where(*where),
        scalars=False,
    )
    return page.map(lambda row: Row(*row))


def subscription_detail(session: Session, subscription_id) -> Detail:
    found = None
    if isinstance(subscription_id, int) and 1 <= subscription_id <= MAX_ID:
        found = session.execute(_rows_query().where(Subscription.id == subscription_id)).first()
    if found is None:
        raise NotFound("There is no such subscription.", code="subscription_not_found")
    row = Row(*found)
    subscription = row.subscription
    periods = session.execute(
        select(SubscriptionPeriod, Order.number)
        .join(Order, Order.id == SubscriptionPeriod.order_id)
        .where(SubscriptionPeriod.subscription_id == subscription.id)
        .order_by(SubscriptionPeriod.period_end)
    ).all()
    first = session.scalar(select(Order.number).where(Order.id == subscription.order_id))
    numbers = {first, *(number for _, number in periods)}
    timeline = [
        TimelineEntry(
            period.created_at,
            "period",
            f"paid {period.amount} {period.currency} for {period.period_start:%Y-%m-%d} to "
            f"{period.period_end:%Y-%m-%d} (invoice {period.provider_invoice_id})",
            number,
        )
        for period, number in periods
    ]
    events = session.execute(
        select(PaymentEvent)
        .where(PaymentEvent.order_number.in_(numbers))
        .order_by(PaymentEvent.id.desc())
        .limit(TIMELINE_LIMIT)
    ).scalars()
    timeline += [
        TimelineEntry(
            event.received_at,
            "event",
            f"{event.event_type}: {event.status}"
            + (f" ({event.last_error})" if event.last_error else ""),
            event.order_number,
        )
        for event in events
    ]
    if subscription.license_id is not None:
        changes = session.scalars(
            select(LicenseAuditEntry)
            .where(
                LicenseAuditEntry.license_id == subscription.license_id,
                LicenseAuditEntry.action.in_(("subscription", "renewal")),
            )
            .order_by(LicenseAuditEntry.id.desc())
            .limit(TIMELINE_LIMIT)
        )
        timeline += [TimelineEntry(c.created_at, "license", c.detail or c.action) for c in changes]
    timeline.sort(key=lambda entry: entry.at, reverse=True)
    return Detail(row, first, [(p, n) for p, n in periods], timeline)
