"""The admin dashboard's figures: sales today and this month, and what waits for staff.

Each figure is one set-based statement (GROUP BY or a conditional sum), so the dashboard
costs six statements whatever the number of orders, events or tickets. Every table
exists whatever modules are on (models/__init__ lists them all), so the figures of a
module that is off are simply zero. Days and months are UTC.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from cmsshop.hotsql import from_db_time
from cmsshop.models import Currency, LicenseReview, Order, PaymentEvent, SupportTicket
from cmsshop.services.payments.events.log import FINAL_STATUSES

# Orders an admin has to look at: not paid yet, or held for review.
WAITING_ORDER_STATUSES = ("pending", "needs_review")
# Payment events that did not go through (models.payments.EVENT_STATUSES): an unexpected
# error, a provider API that failed to confirm, a delivery refused (bad signature...).
FAILED_EVENT_STATUSES = ("error", "confirm_failed", "rejected")


@dataclass(frozen=True)
class Sales:
    """Paid orders of one currency: counts and revenue (minor units) today and this
    month, with the currency's symbol and decimals for display."""

    currency: str
    symbol: str
    decimals: int
    orders_today: int
    revenue_today: int
    orders_month: int
    revenue_month: int


# A queued payment event due for longer than this was not taken by any worker: the
# dashboard says so (is `cmsshop-admin worker` running?).
WORKER_LATE = dt.timedelta(minutes=1)


@dataclass(frozen=True)
class Queue:
    """Payment events waiting for the worker (queued processing): how many, how many of
    them are overdue (due for longer than WORKER_LATE), and the oldest one's receipt."""

    waiting: int = 0
    overdue: int = 0
    oldest: dt.datetime | None = None


@dataclass(frozen=True)
class Overview:
    day_start: dt.datetime
    month_start: dt.datetime
    sales: list[Sales] = field(default_factory=list)
    waiting_orders: dict[str, int] = field(default_factory=dict)
    failed_events: dict[str, int] = field(default_factory=dict)
    open_tickets: int = 0
    # Licenses on the review list: a partial refund, or a full one whose renewal or
    # upgrade could not simply be taken back (services/payments/license_changes.py).
    license_reviews: int = 0
    queue: Queue = field(default_factory=Queue)

    @property
    def orders_today(self) -> int:
        return sum(s.orders_today for s in self.sales)

    @property
    def orders_month(self) -> int:
        return sum(s.orders_month for s in self.sales)

    @property
    def failed_events_total(self) -> int:
        return sum(self.failed_events.values())


def utc_periods(now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """The starts of ``now``'s UTC day and UTC month."""
    now = now.astimezone(dt.UTC)
    day_start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return day_start, day_start.replace(day=1)


def sales_since(session: Session, day_start: dt.datetime, month_start: dt.datetime) -> list[Sales]:
    """Paid orders (status ``paid``: refunded and disputed ones are not revenue) by the
    time they were paid, per currency; one statement."""
    today = Order.paid_at >= day_start
    stmt = (
        select(
            Order.currency,
            Currency.symbol,
            Currency.decimals,
            func.sum(case((today, 1), else_=0)),
            func.sum(case((today, Order.total), else_=0)),
            func.count(Order.id),
            func.sum(Order.total),
        )
        .join(Currency, Currency.code == Order.currency)
        .where(Order.status == "paid", Order.paid_at >= month_start)
        .group_by(Order.currency, Currency.symbol, Currency.decimals)
        .order_by(Order.currency)
    )
    return [
        Sales(code, symbol, decimals, int(n_today or 0), int(r_today or 0), n, int(r_month or 0))
        for code, symbol, decimals, n_today, r_today, n, r_month in session.execute(stmt)
    ]


def _counts_by_status(session: Session, model, statuses: tuple[str, ...]) -> dict[str, int]:
    stmt = (
        select(model.status, func.count()).where(model.status.in_(statuses)).group_by(model.status)
    )
    found = dict(session.execute(stmt).all())
    return {status: int(found.get(status, 0)) for status in statuses}


def payment_queue(session: Session, now: dt.datetime) -> Queue:
    """The queued payment events not final yet; one statement."""
    late = PaymentEvent.next_attempt_at < now - WORKER_LATE
    waiting, overdue, oldest = session.execute(
        select(
            func.count(),
            func.sum(case((late, 1), else_=0)),
            func.min(PaymentEvent.received_at),
        ).where(
            PaymentEvent.next_attempt_at.is_not(None),
            PaymentEvent.status.not_in(FINAL_STATUSES),
        )
    ).one()
    return Queue(int(waiting or 0), int(overdue or 0), from_db_time(oldest))


def overview(session: Session, now: dt.datetime) -> Overview:
    """The dashboard at ``now``."""
    day_start, month_start = utc_periods(now)
    return Overview(
        day_start=day_start,
        month_start=month_start,
        sales=sales_since(session, day_start, month_start),
        waiting_orders=_counts_by_status(session, Order, WAITING_ORDER_STATUSES),
        failed_events=_counts_by_status(session, PaymentEvent, FAILED_EVENT_STATUSES),
        open_tickets=_counts_by_status(session, SupportTicket, ("open",))["open"],
        license_reviews=session.scalar(
            select(func.count(func.distinct(LicenseReview.license_id))).where(
                LicenseReview.resolved_at.is_(None)
            )
        ),
        queue=payment_queue(session, now),
    )
