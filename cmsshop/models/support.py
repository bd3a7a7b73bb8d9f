"""Operational records kept by the core: 5xx error records and rate-limit counters."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from cmsshop.models.meta import Base, UTCDateTime
from cmsshop.util import utcnow


class ErrorRecord(Base):
    """One server error, found again by the support code the client was shown."""

    __tablename__ = "error_records"

    id: Mapped[int] = mapped_column(primary_key=True)
    support_code: Mapped[str] = mapped_column(String(32), unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    request_id: Mapped[str | None] = mapped_column(String(64))
    method: Mapped[str] = mapped_column(String(16))
    path: Mapped[str] = mapped_column(String(2048))
    status: Mapped[int] = mapped_column(Integer)
    error_code: Mapped[str] = mapped_column(String(64))
    exception_type: Mapped[str | None] = mapped_column(String(255))
    traceback: Mapped[str | None] = mapped_column(Text)


class RateCounter(Base):
    """Fixed-window counters shared by every app process (so limits hold behind a
    load balancer). Rows of past windows are purged opportunistically."""

    __tablename__ = "rate_counters"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    window_start: Mapped[int] = mapped_column(Integer, primary_key=True)
    count: Mapped[int] = mapped_column(Integer, default=0)
