"""Dashboard records: the download log and the file delivery modes."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import BigInteger, CheckConstraint, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from cmsshop.models.meta import Base, UTCDateTime
from cmsshop.util import utcnow

DELIVERY_MODES = ("stream", "x-accel-redirect")


class DownloadLog(Base):
    """One row per download answered (200/206, or handed to the web server).

    The release is kept as a nullable reference so that deleting a release later does
    not fail on its log rows; ``version`` keeps what was downloaded readable anyway.
    """

    __tablename__ = "download_logs"
    __table_args__ = (
        CheckConstraint("delivery IN ('stream', 'x-accel-redirect')", name="delivery"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    entitlement_id: Mapped[int] = mapped_column(
        ForeignKey("entitlements.id", ondelete="CASCADE"), index=True
    )
    release_id: Mapped[int | None] = mapped_column(
        ForeignKey("releases.id", ondelete="SET NULL"), index=True
    )
    version: Mapped[str] = mapped_column(String(50))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    ip: Mapped[str] = mapped_column(String(64))
    user_agent: Mapped[str | None] = mapped_column(String(255))
    status: Mapped[int] = mapped_column(Integer)
    # Inclusive byte offsets of a Range request (both null for a whole-file download).
    range_start: Mapped[int | None] = mapped_column(BigInteger)
    range_end: Mapped[int | None] = mapped_column(BigInteger)
    # Bytes the response promised (0 when the web server sends the file).
    content_length: Mapped[int] = mapped_column(BigInteger)
    delivery: Mapped[str] = mapped_column(String(20))
