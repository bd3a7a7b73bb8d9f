"""Licensing: licenses, their activations, the nonces seen per license and the audit log
of every call. Fulfilment issues licenses; the licensing routes activate and validate
them.

The tables keep the spelling they were created with (``licences``, ``licence_nonces``,
``licence_audit_log``, column ``licence_id``; migrations 0001 and 0004): renaming live
tables is a risky migration for no behaviour. Code says "license" everywhere; only the
stored names below say "licence".
"""

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
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from cmsshop.models.meta import Base, UTCDateTime, one_of
from cmsshop.models.store import Product
from cmsshop.util import utcnow

LICENSE_STATUSES = ("active", "suspended", "revoked", "expired")


class License(Base):
    __tablename__ = "licences"
    __table_args__ = (
        CheckConstraint(one_of("status", LICENSE_STATUSES), name="status"),
        CheckConstraint("max_activations >= 0", name="max_activations"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    # Nullable so an operator can issue a license by hand; unique when set.
    order_item_id: Mapped[int | None] = mapped_column(ForeignKey("order_items.id"), unique=True)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), index=True)
    product_id: Mapped[int] = mapped_column(ForeignKey("products.id"), index=True)
    status: Mapped[str] = mapped_column(String(20), default="active")
    max_activations: Mapped[int] = mapped_column(Integer)
    expires_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    # Feature flags signed into every lease (``lic.features``): copied from the product when
    # issued, then the license's own (an admin may change them; services/licensing/features.py).
    features: Mapped[list[str]] = mapped_column(JSON, default=list, server_default="[]")
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    product: Mapped[Product] = relationship()
    activations: Mapped[list[Activation]] = relationship(
        back_populates="license", order_by="Activation.id"
    )


class Activation(Base):
    __tablename__ = "activations"
    __table_args__ = (
        UniqueConstraint("licence_id", "fingerprint_sha256"),
        CheckConstraint("environment IN ('production', 'staging', 'local')", name="environment"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    license_id: Mapped[int] = mapped_column(
        "licence_id", ForeignKey("licences.id", ondelete="CASCADE")
    )
    fingerprint: Mapped[str] = mapped_column(String(256))
    fingerprint_sha256: Mapped[str] = mapped_column(String(64))
    domain: Mapped[str] = mapped_column(String(255))
    environment: Mapped[str] = mapped_column(String(20), default="production")
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    activated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_validated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    deactivated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    # The expiry of the last offline lease issued to this installation: that lease works
    # without the shop until then, so the seat stays counted until then even after a
    # deactivation (NULL: no offline lease, the seat is freed when deactivated).
    seat_held_until: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)

    license: Mapped[License] = relationship(back_populates="activations")


class LicenseNonce(Base):
    """A nonce a runtime sent for a license. The unique pair makes a replay within the
    window fail even when two copies of a request race; rows older than the window are
    purged now and then (and may be reused once they are that old)."""

    __tablename__ = "licence_nonces"
    __table_args__ = (
        UniqueConstraint("licence_id", "nonce"),
        Index("ix_licence_nonces_seen_at", "seen_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    license_id: Mapped[int] = mapped_column(
        "licence_id", ForeignKey("licences.id", ondelete="CASCADE")
    )
    nonce: Mapped[str] = mapped_column(String(128))
    seen_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class LicenseAuditEntry(Base):
    """One licensing call: what was asked, by whom (IP) and how it ended (``outcome`` is
    ``ok`` or the error code). Failed calls are written after the request's rollback.
    An admin's change by hand (``admin.*`` actions) names the admin and the change."""

    __tablename__ = "licence_audit_log"
    __table_args__ = (
        Index("ix_licence_audit_log_created_at", "created_at"),
        Index("ix_licence_audit_log_licence_id", "licence_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    action: Mapped[str] = mapped_column(String(20))  # activate, validate, deactivate
    outcome: Mapped[str] = mapped_column(String(64))
    status: Mapped[int] = mapped_column(Integer)
    license_id: Mapped[int | None] = mapped_column(
        "licence_id", ForeignKey("licences.id", ondelete="SET NULL")
    )
    activation_id: Mapped[int | None] = mapped_column(Integer)
    # The first 16 hex digits of SHA-256(key) for unknown keys: enough to spot a
    # guessing run, useless for recovering a key.
    key_hint: Mapped[str | None] = mapped_column(String(16))
    product: Mapped[str | None] = mapped_column(String(100))
    fingerprint_sha256: Mapped[str | None] = mapped_column(String(64))
    domain: Mapped[str | None] = mapped_column(String(255))
    environment: Mapped[str | None] = mapped_column(String(20))
    ip: Mapped[str] = mapped_column(String(64))
    request_id: Mapped[str | None] = mapped_column(String(64))
    admin_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    # What an admin changed, e.g. "status active -> suspended".
    detail: Mapped[str | None] = mapped_column(String(500))
