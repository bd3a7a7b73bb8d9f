"""The seller's legal identity and tax settings, the shop's logo, buyers' billing
details (what an invoice must name and what decides the tax of an order), and credit
notes (what corrects an issued invoice)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import JSON, BigInteger, CheckConstraint, ForeignKey, Integer, LargeBinary, String
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


class CreditNoteCounter(Base):
    """The last credit note number of a year: credit notes are their own gap-free series
    (CN-2026-000001), numbered like invoices (services.payments.fulfilment)."""

    __tablename__ = "credit_note_counters"

    year: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    last_sequence: Mapped[int] = mapped_column(Integer, default=0)


class CreditNote(Base):
    """A credit note: a refund or a lost chargeback corrects an issued invoice, which is
    never edited. Its lines and totals are negative, at the invoice's own tax rates.

    ``cause`` makes it exactly once: ``refund:<refunds.id>`` for a confirmed refund,
    ``chargeback:<invoices.id>`` for a lost dispute (services.tax.credit_notes)."""

    __tablename__ = "credit_notes"
    __table_args__ = (
        CheckConstraint("total <= 0", name="total"),
        CheckConstraint("kind IN ('refund', 'chargeback')", name="kind"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    number: Mapped[str] = mapped_column(String(32), unique=True)  # CN-2026-000042
    year: Mapped[int] = mapped_column(Integer)
    sequence: Mapped[int] = mapped_column(Integer)
    cause: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[str] = mapped_column(String(20))
    invoice_id: Mapped[int] = mapped_column(ForeignKey("invoices.id"), index=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    refund_id: Mapped[int | None] = mapped_column(ForeignKey("refunds.id"))
    issued_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    currency: Mapped[str] = mapped_column(String(3))
    total: Mapped[int] = mapped_column(BigInteger)
    net_total: Mapped[int] = mapped_column(BigInteger)
    tax_total: Mapped[int] = mapped_column(BigInteger)
    # [{"product", "name", "taxRate" (percent, a decimal string), "net", "tax", "amount"}],
    # every amount negative minor units; "amount" is the gross.
    lines: Mapped[list] = mapped_column(JSON)
