"""Subscriptions: products sold as a recurring charge, the provider-side subscription of
each buyer, and every period the provider was paid for (services/subscriptions).

A subscription's first period is paid by the order that bought it; each later period
is an ordinary renewal order of its license, so invoices, refunds and the license's
change history work as they do for a renewal bought by hand. ``subscription_periods``
is unique per provider invoice: the gate that makes one paid invoice extend the
license once, however often and in whatever order its events arrive.
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
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    product_id: Mapped[int] = mapped_column(
        ForeignKey("products.id", ondelete="CASCADE"), unique=True
    )
    interval: Mapped[str] = mapped_column(String(10))
    interval_count: Mapped[int] = mapped_column(Integer, default=1)
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
