"""Subscriptions: products sold as a recurring charge, the provider-side subscription of
each buyer, and every period the provider was paid for (services/subscriptions).

A subscription's first period is paid by the order that bought it; each later period
is an ordinary renewal order of its license, so invoices, refunds and the license's
change history work as they do for a renewal bought by hand. ``subscription_periods``
is unique per provider invoice: the gate that makes one paid invoice extend the
license once, however often and in whatever order its events arrive.

A provider that bills against plans made in advance (PayPal) keeps them in
``subscription_provider_plans``; a subscription payment whose event names no
subscription and matches none waits in ``parked_payments`` for the reconciliation.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from cmsshop.models.meta import Base, UTCDateTime, one_of
from cmsshop.util import utcnow

INTERVALS = ("day", "week", "month", "year")
# The longest free trial a plan may offer, in days (a quarter: PayPal bills a trial cycle
# of at most 365 days and Stripe allows 730, so the bound is ours, not a provider's).
MAX_TRIAL_DAYS = 90
# trialing/active/past_due: live and renewing itself; paused and cancel_scheduled: live
# but not renewing; ended: final (a late "active" event never revives it).
SUBSCRIPTION_STATUSES = ("trialing", "active", "past_due", "paused", "cancel_scheduled", "ended")
RENEWING_STATUSES = ("trialing", "active", "past_due")


class SubscriptionPlan(Base):
    """A product sold as a subscription: billed every ``interval_count`` ``interval`` at
    the product's own price. Kept off ``products``: altering that table on SQLite
    rebuilds it, and with it the triggers its search relies on."""

    __tablename__ = "subscription_plans"
    __table_args__ = (
        CheckConstraint(one_of("interval", INTERVALS), name="interval"),
        # Stripe's limits: at most one year between two charges.
        CheckConstraint("interval_count >= 1 AND interval_count <= 52", name="interval_count"),
        CheckConstraint(f"trial_days >= 0 AND trial_days <= {MAX_TRIAL_DAYS}", name="trial_days"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    product_id: Mapped[int] = mapped_column(
        ForeignKey("products.id", ondelete="CASCADE"), unique=True
    )
    interval: Mapped[str] = mapped_column(String(10))
    interval_count: Mapped[int] = mapped_column(Integer, default=1)
    # Days free before the first charge (0: none), for a buyer's first subscription of
    # the product only (services/subscriptions/plans.py ``trial_days_for``).
    trial_days: Mapped[int] = mapped_column(Integer, default=0)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class Subscription(Base):
    """One buyer's subscription at a provider, as the provider last told us."""

    __tablename__ = "subscriptions"
    __table_args__ = (
        UniqueConstraint("provider", "provider_subscription_id"),
        CheckConstraint(one_of("status", SUBSCRIPTION_STATUSES), name="status"),
        # One live subscription per license: a second one would bill the buyer twice.
        Index(
            "uq_subscriptions_live_license",
            "license_id",
            unique=True,
            sqlite_where=text("status != 'ended'"),
            postgresql_where=text("status != 'ended'"),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    provider: Mapped[str] = mapped_column(String(40))
    provider_subscription_id: Mapped[str] = mapped_column(String(255))
    # The buyer at the provider (where the card is updated).
    provider_customer_id: Mapped[str | None] = mapped_column(String(255))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    # The order that bought it (and paid its first period).
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"), unique=True)
    license_id: Mapped[int | None] = mapped_column(ForeignKey("licences.id"))
    plan_id: Mapped[int | None] = mapped_column(
        ForeignKey("subscription_plans.id", ondelete="SET NULL")
    )
    status: Mapped[str] = mapped_column(String(20), default="active")
    # The provider's current period and whether it ends the subscription then.
    current_period_end: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    cancel_at_period_end: Mapped[bool] = mapped_column(Boolean, default=False)
    # The end of the latest period paid for (the latest of subscription_periods).
    paid_through: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    # The provider's time of the newest event applied: an older one changes nothing.
    last_event_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    synced_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    ended_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class SubscriptionPeriod(Base):
    """One period the provider was paid for: its invoice, the order that records the
    payment, and the service period it pays (the provider's own dates)."""

    __tablename__ = "subscription_periods"
    __table_args__ = (UniqueConstraint("provider", "provider_invoice_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    subscription_id: Mapped[int] = mapped_column(
        ForeignKey("subscriptions.id", ondelete="CASCADE"), index=True
    )
    provider: Mapped[str] = mapped_column(String(40))
    provider_invoice_id: Mapped[str] = mapped_column(String(255))
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"), unique=True)
    period_start: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    period_end: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    amount: Mapped[int] = mapped_column(Integer)
    currency: Mapped[str] = mapped_column(String(3))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Its order's money went back in full: it no longer counts towards paid_through.
    refunded_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)


class SubscriptionProviderPlan(Base):
    """A plan made at a provider that bills against plans created in advance (PayPal):
    one per product plan, provider, currency, amount, billing cycle, free trial and
    discounted first cycle, so a second checkout of the same product at the same price
    reuses it. A changed price, cycle, trial or first cycle is a new row; the
    subscriptions sold on the old plan go on with it."""

    __tablename__ = "subscription_provider_plans"
    __table_args__ = (
        # Named by hand: the convention's name (every column) is longer than PostgreSQL's
        # 63 characters.
        UniqueConstraint(
            "plan_id",
            "provider",
            "currency",
            "amount",
            "interval",
            "interval_count",
            "trial_days",
            "first_amount",
            name="uq_subscription_provider_plans_key",
        ),
        CheckConstraint(one_of("interval", INTERVALS), name="interval"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    plan_id: Mapped[int] = mapped_column(ForeignKey("subscription_plans.id", ondelete="CASCADE"))
    provider: Mapped[str] = mapped_column(String(40))
    currency: Mapped[str] = mapped_column(String(3))
    amount: Mapped[int] = mapped_column(Integer)  # minor units charged every cycle
    interval: Mapped[str] = mapped_column(String(10))
    interval_count: Mapped[int] = mapped_column(Integer)
    # The free days before the first charge (0: the plan bills from the start).
    trial_days: Mapped[int] = mapped_column(Integer, default=0)
    # What the first cycle charges when a coupon discounted it (a priced TRIAL cycle
    # before the regular ones, which charge ``amount``); 0: every cycle costs ``amount``.
    first_amount: Mapped[int] = mapped_column(Integer, default=0)
    provider_plan_id: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class ParkedPayment(Base):
    """A subscription payment the provider reported without naming its subscription, and
    that matched none here (PayPal sends some renewal sales without their
    ``billing_agreement_id``). Kept, never dropped: the reconciliation tries it again
    and reports it until it is recorded as a period (``resolved_at``)."""

    __tablename__ = "parked_payments"
    __table_args__ = (UniqueConstraint("provider", "payment_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    provider: Mapped[str] = mapped_column(String(40))
    event_id: Mapped[str] = mapped_column(String(255))  # the provider's event id
    payment_id: Mapped[str] = mapped_column(String(255))  # the provider's payment (sale) id
    amount: Mapped[int | None] = mapped_column(Integer)  # as the event states it
    currency: Mapped[str | None] = mapped_column(String(3))
    # The stored delivery (its payload), which the reconciliation interprets again.
    payment_event_id: Mapped[int | None] = mapped_column(
        ForeignKey("payment_events.id", ondelete="SET NULL")
    )
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    resolved_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    # How it was resolved (the subscription it was recorded for), for the console.
    resolution: Mapped[str | None] = mapped_column(String(500))
