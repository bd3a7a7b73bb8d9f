"""Outgoing webhooks: the seller's endpoints, the events written in the transaction of
their cause (an outbox), one delivery per event and endpoint, and each attempt's log
(services/webhooks). The payment providers' incoming webhooks are payments'."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from cmsshop.models.meta import Base, UTCDateTime, one_of
from cmsshop.util import utcnow

# The event types an endpoint can subscribe to; webhook.test is the console's "send
# test event" (delivered only to the endpoint it was sent to).
WEBHOOK_EVENT_TYPES = (
    "order.paid",
    "order.refunded",
    "license.created",
    "license.revoked",
    "license.renewed",
    "license.upgraded",
    "activation.created",
    "activation.deleted",
    "ticket.created",
)
TEST_EVENT_TYPE = "webhook.test"
# pending: to be attempted at next_attempt_at; succeeded: a 2xx answer; failed: given up
# (the retry window ran out, or the endpoint was disabled or deleted meanwhile).
DELIVERY_STATUSES = ("pending", "succeeded", "failed")
# What one attempt came to: a 2xx; another status; no answer (refused connection,
# reset, TLS error, a timeout); or not attempted because the address is not allowed.
ATTEMPT_OUTCOMES = ("succeeded", "http_error", "network_error", "timeout", "refused_address")


class WebhookEndpoint(Base):
    __tablename__ = "webhook_endpoints"

    id: Mapped[int] = mapped_column(primary_key=True)
    url: Mapped[str] = mapped_column(String(2048))
    description: Mapped[str] = mapped_column(String(500), default="")
    event_types: Mapped[list] = mapped_column(JSON, default=list)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    # The signing secret, Fernet-encrypted under the server secret (cmsshop.crypto); the
    # previous one stays valid (signed with too) until previous_secret_expires_at.
    secret_encrypted: Mapped[str] = mapped_column(Text)
    previous_secret_encrypted: Mapped[str | None] = mapped_column(Text)
    previous_secret_expires_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    # The first failed attempt since the last success (None while healthy): the endpoint
    # is disabled once it has failed for the whole retry window.
    failing_since: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    disabled_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    disabled_reason: Mapped[str | None] = mapped_column(String(300))


class WebhookEvent(Base):
    """One event, written in the transaction of its cause: rolled back with it."""

    __tablename__ = "webhook_events"
    __table_args__ = (Index("ix_webhook_events_created_at", "created_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    # The id receivers see and deduplicate on: "evt_" + 24 hex digits.
    public_id: Mapped[str] = mapped_column(String(40), unique=True)
    type: Mapped[str] = mapped_column(String(40))
    # What the event is about ("order:CS-2026-000001", "license:12"): deliveries of one
    # subject to one endpoint go out in the order the events were written.
    subject: Mapped[str] = mapped_column(String(80))
    # The body's "data" object.
    data: Mapped[dict] = mapped_column(JSON, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class WebhookDelivery(Base):
    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        UniqueConstraint("event_id", "endpoint_id"),
        CheckConstraint(one_of("status", DELIVERY_STATUSES), name="status"),
        Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),
        Index("ix_webhook_deliveries_order", "endpoint_id", "subject", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    event_id: Mapped[int] = mapped_column(ForeignKey("webhook_events.id", ondelete="CASCADE"))
    endpoint_id: Mapped[int] = mapped_column(ForeignKey("webhook_endpoints.id", ondelete="CASCADE"))
    subject: Mapped[str] = mapped_column(String(80))  # the event's, for the ordering
    status: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    next_attempt_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Retries stop after this (None: created_at plus cmsshop.webhooks.retry_for).
    retry_until: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    # A worker holds the delivery while it attempts it (another worker skips it).
    locked_until: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    last_attempt_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    delivered_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)

    event: Mapped[WebhookEvent] = relationship(lazy="joined")
    endpoint: Mapped[WebhookEndpoint] = relationship()


class WebhookAttempt(Base):
    """The delivery log: one row per attempt."""

    __tablename__ = "webhook_attempts"
    __table_args__ = (
        CheckConstraint(one_of("outcome", ATTEMPT_OUTCOMES), name="outcome"),
        Index("ix_webhook_attempts_delivery", "delivery_id", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    delivery_id: Mapped[int] = mapped_column(
        ForeignKey("webhook_deliveries.id", ondelete="CASCADE")
    )
    started_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    outcome: Mapped[str] = mapped_column(String(20))
    status_code: Mapped[int | None] = mapped_column(Integer)
    latency_ms: Mapped[int] = mapped_column(Integer, default=0)
    # The first bytes of the answer (decoded leniently) or the error, for the console.
    response_excerpt: Mapped[str] = mapped_column(String(1000), default="")
    error: Mapped[str | None] = mapped_column(String(300))
    manual: Mapped[bool] = mapped_column(Boolean, default=False)  # a redelivery asked for
