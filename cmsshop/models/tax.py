"""The seller's legal identity and tax settings, the shop's logo, and buyers' billing
details: what an invoice must name and what decides the tax of an order."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import JSON, ForeignKey, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from cmsshop.models.meta import Base, UTCDateTime
from cmsshop.util import utcnow


class ShopSetting(Base):
    """One saved value of a shop-wide setting edited in the console (``seller.legalName``,
    ``tax.pricesIncludeTax``...). A key without a row falls back to the ini/environment
    default (services.invoices.seller)."""

    __tablename__ = "shop_settings"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[object] = mapped_column(JSON)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)
    updated_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))


class ShopFile(Base):
    """A small file the seller uploads in the console (the invoice logo), kept in the
    database so every app process serves the same bytes."""

    __tablename__ = "shop_files"

    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    content_type: Mapped[str] = mapped_column(String(40))
    data: Mapped[bytes] = mapped_column(LargeBinary)
    sha256: Mapped[str] = mapped_column(String(64))
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class BillingProfile(Base):
    """A customer's billing details, prefilled at their next checkout and editable in the
    account. An order keeps its own copy (Order.billing), so editing this never changes
    an order or an issued invoice."""

    __tablename__ = "billing_profiles"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    country: Mapped[str] = mapped_column(String(2))  # ISO 3166-1 alpha-2
    region: Mapped[str | None] = mapped_column(String(10))  # ISO 3166-2 subdivision, e.g. US-WA
    name: Mapped[str] = mapped_column(String(200), default="")
    company: Mapped[str | None] = mapped_column(String(200))
    address_line1: Mapped[str | None] = mapped_column(String(200))
    address_line2: Mapped[str | None] = mapped_column(String(200))
    city: Mapped[str | None] = mapped_column(String(100))
    postal_code: Mapped[str | None] = mapped_column(String(20))
    vat_id: Mapped[str | None] = mapped_column(String(20))  # normalised, with country prefix
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)
