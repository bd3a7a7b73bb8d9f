"""Licensing records: the nonces seen per license and the audit log of every call.
(Stored in tables named ``licence_*``; see models.commerce.License.)

Licenses and activations themselves live in models/commerce.py (fulfilment issues them).
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from cmsshop.models.meta import Base, UTCDateTime
from cmsshop.util import utcnow


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
    ``ok`` or the error code). Failed calls are written after the request's rollback."""

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
