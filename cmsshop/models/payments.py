"""Payments: the provider event log (every webhook delivery, verified or not) and the
provider settings saved by an admin (secrets encrypted at rest)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from cmsshop.models.meta import Base, UTCDateTime, one_of
from cmsshop.util import utcnow

EVENT_STATUSES = (
    "received",
    "processed",
    "ignored",
    "duplicate",
    "pending_order",
    "confirm_failed",
    "rejected",
    "error",
)


class PaymentEvent(Base):
    """The provider event log. Written in its own short transaction so it survives a
    fulfilment rollback; the unique (provider, event_id) pair makes replays visible."""

    __tablename__ = "payment_events"
    __table_args__ = (
        UniqueConstraint("provider", "event_id"),
        CheckConstraint(one_of("status", EVENT_STATUSES), name="status"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    provider: Mapped[str] = mapped_column(String(40))
    event_id: Mapped[str] = mapped_column(String(255))
    event_type: Mapped[str] = mapped_column(String(100))
    received_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    payload_sha256: Mapped[str] = mapped_column(String(64))
    payload: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(20), default="received", index=True)
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    last_error: Mapped[str | None] = mapped_column(Text)
    order_number: Mapped[str | None] = mapped_column(String(32), index=True)
    processed_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    # The delivery's headers (JSON, cookies and credentials removed): a delivery rejected
    # for a reason since fixed (a wrong secret) is re-verified from them on reprocess.
    headers: Mapped[str | None] = mapped_column(Text)
    # Queued processing (cmsshop.payments.webhook_processing = queued): when the worker
    # takes the event (next); NULL once it is final, gave up, or was handled inline.
    next_attempt_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, index=True)


class PaymentSetting(Base):
    """One saved value of a provider's settings field (``cardprovider.apiKey``).

    ``value`` is the JSON of the value; for a secret field it is a Fernet token of that
    JSON under a key derived from ``cmsshop.secret`` (services.payment_settings). A field
    without a row falls back to the ini default.
    """

    __tablename__ = "payment_settings"
    __table_args__ = (UniqueConstraint("provider", "field"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    provider: Mapped[str] = mapped_column(String(40))
    field: Mapped[str] = mapped_column(String(64))
    value: Mapped[str] = mapped_column(Text)
    encrypted: Mapped[bool] = mapped_column(Boolean, default=False)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)
    updated_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
