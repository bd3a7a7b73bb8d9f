"""Payment provider settings saved by an admin (secrets encrypted at rest)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Boolean, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from cmsshop.models.meta import Base, UTCDateTime
from cmsshop.util import utcnow


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
