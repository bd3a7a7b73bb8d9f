"""The rate limiter's fixed-window counters (see cmsshop.services.ratelimit)."""

from __future__ import annotations

from sqlalchemy import (
    Integer,
    String,
)
from sqlalchemy.orm import Mapped, mapped_column

from cmsshop.models.meta import Base


class RateCounter(Base):
    """Fixed-window counters shared by every app process (so limits hold behind a
    load balancer). Rows of past windows are purged opportunistically."""

    __tablename__ = "rate_counters"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    window_start: Mapped[int] = mapped_column(Integer, primary_key=True)
    count: Mapped[int] = mapped_column(Integer, default=0)
