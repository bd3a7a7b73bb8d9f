"""Orders, fulfilment and what fulfilment creates: invoices, entitlements, licenses.

Every "exactly once" rule of the payment flow is a unique constraint here, so a race
that slips past a row lock still cannot write a second row (the loser's transaction
fails with IntegrityError and is retried, and the retry sees the winner's row).
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from cmsshop.models.accounts import User
from cmsshop.models.meta import Base, UTCDateTime, one_of
from cmsshop.models.store import Product
from cmsshop.util import utcnow

ORDER_STATUSES = (
    "pending",
    "paid",
    "refunded",
    "disputed",
    "cancelled",
    "failed",
    "needs_review",
)
ENTITLEMENT_STATUSES = ("active", "on_hold", "revoked")
# What an order item sells: a new license (or an unlicensed product), more time on a
# license the buyer has (renewal), or a higher tier of it (upgrade).
ITEM_KINDS = ("purchase", "renewal", "upgrade")
# Order.provider of an order whose total is zero: fulfilled when placed, no provider.
FREE_PROVIDER = "free"


class Order(Base):
    __tablename__ = "orders"
    __table_args__ = (CheckConstraint(one_of("status", ORDER_STATUSES), name="status"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    number: Mapped[str] = mapped_column(String(32), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    currency: Mapped[str] = mapped_column(ForeignKey("currencies.code"))
    # What the buyer pays, tax included (the gross): the amount the provider must confirm.
    total: Mapped[int] = mapped_column(BigInteger)
    # The tax included in ``total`` (0 when none is charged, and on orders from before).
    tax: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # How the tax was decided when the order was placed (services.tax.checkout): regime,
    # country, rate, the rates row's validFrom, notes, flags, evidence. Kept, never
    # recomputed: a rate that changes before the payment arrives changes nothing here.
    tax_details: Mapped[dict | None] = mapped_column(JSON)
    # A cross-border consumer sale in the EU: its net in euro cents, counted towards the
    # micro-seller threshold (null for every other sale).
    cross_border_eur: Mapped[int | None] = mapped_column(BigInteger)
    # The coupon's discount, included in ``total`` (the lines carry their share of it).
    discount: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    coupon_code: Mapped[str | None] = mapped_column(String(40))
    status: Mapped[str] = mapped_column(String(20), default="pending")
    # A payment provider's name, or FREE_PROVIDER for an order that cost nothing.
    provider: Mapped[str] = mapped_column(String(40))
    # Placed without logging in (guest checkout): the order belongs to the account of the
    # address given, and ``visitor_hash`` (SHA-256 of the placing visitor's cookie token)
    # lets that browser see this one order's status, nothing else of the account.
    guest: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    visitor_hash: Mapped[str | None] = mapped_column(String(64))
    # The billing details given at checkout (country, name, address, company, vatId and
    # how the VAT ID was checked), a snapshot: later edits of the buyer's profile never
    # change it. None for orders placed before billing details were asked for.
    billing: Mapped[dict | None] = mapped_column(JSON)
    # The version of the terms of sale the buyer accepted at checkout, and when (None:
    # no terms were published then, or the order is older than terms acceptance).
    terms_version: Mapped[int | None] = mapped_column(Integer)
    terms_accepted_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    # The provider's checkout object (Stripe Checkout Session id, PayPal order id).
    provider_checkout_id: Mapped[str | None] = mapped_column(String(255), index=True)
    # The provider's payment object once confirmed (PaymentIntent id, capture id); indexed
    # because refund and dispute events name the payment, not the order.
    payment_reference: Mapped[str | None] = mapped_column(String(255), index=True)
    # The provider's subscription the order bought, from its first invoice on (migration
    # 0036): held for review, the order has no subscriptions row, and a refund still
    # cancels this (services/subscriptions/refund_cancel.py).
    provider_subscription_id: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    paid_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    items: Mapped[list[OrderItem]] = relationship(
        back_populates="order", cascade="all, delete-orphan", order_by="OrderItem.id"
    )


class OrderItem(Base):
    __tablename__ = "order_items"
    __table_args__ = (
        CheckConstraint("amount >= 0", name="amount"),
        CheckConstraint("quantity >= 1", name="quantity"),
        CheckConstraint("discount >= 0", name="discount"),
        CheckConstraint(one_of("kind", ITEM_KINDS), name="kind"),
        CheckConstraint("(kind = 'purchase') = (target_license_id IS NULL)", name="target_license"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id", ondelete="CASCADE"), index=True)
    product_id: Mapped[int] = mapped_column(ForeignKey("products.id"), index=True)
    # Snapshots: what the customer bought, whatever the product becomes later.
    product_slug: Mapped[str] = mapped_column(String(100))
    name: Mapped[str] = mapped_column(String(200))
    # unit_amount x quantity - discount = amount, what this line costs in the order's
    # total. unit_amount is NULL on lines placed before quantities existed (= amount).
    quantity: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    unit_amount: Mapped[int | None] = mapped_column(BigInteger)
    discount: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    amount: Mapped[int] = mapped_column(BigInteger)
    # The line's net and tax (net + tax = what the line adds to the order's total). With
    # prices entered tax-inclusive ``amount`` is the gross, tax-exclusive it is the net.
    # NULL on lines placed before taxes were charged: all net (services.payments.lines).
    net: Mapped[int | None] = mapped_column(BigInteger)
    tax: Mapped[int | None] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(String(10), default="purchase", server_default="purchase")
    # The license a renewal extends or an upgrade moves (services/payments/license_changes.py).
    # Not a foreign key: licences.order_item_id already points here, and a cycle of foreign
    # keys would leave no order to create or empty the two tables in. Licenses are never
    # deleted, and the id is checked when the order is placed and again when it is paid.
    target_license_id: Mapped[int | None] = mapped_column(Integer, index=True)

    order: Mapped[Order] = relationship(back_populates="items")
    product: Mapped[Product] = relationship()

    @property
    def gross(self) -> int:
        """What the line adds to the order's total, tax included (a line from before
        taxes: its amount)."""
        return self.amount if self.net is None else self.net + (self.tax or 0)


class Fulfilment(Base):
    """The gate of exactly-once fulfilment: one row per order and per provider payment."""

    __tablename__ = "fulfilments"
    __table_args__ = (UniqueConstraint("provider", "payment_reference"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"), unique=True)
    provider: Mapped[str] = mapped_column(String(40))
    payment_reference: Mapped[str] = mapped_column(String(255))
    payment_event_id: Mapped[int | None] = mapped_column(ForeignKey("payment_events.id"))
    manual: Mapped[bool] = mapped_column(Boolean, default=False)
    admin_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    reason: Mapped[str | None] = mapped_column(Text)
    confirmed_amount: Mapped[int | None] = mapped_column(BigInteger)
    confirmed_currency: Mapped[str | None] = mapped_column(String(3))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class InvoiceCounter(Base):
    """Per-year counter, locked FOR UPDATE while numbering so numbers are gap-free."""

    __tablename__ = "invoice_counters"

    year: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    last_sequence: Mapped[int] = mapped_column(Integer, default=0)


class Invoice(Base):
    __tablename__ = "invoices"
    __table_args__ = (UniqueConstraint("year", "sequence"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    number: Mapped[str] = mapped_column(String(32), unique=True)  # INV-2026-000042
    year: Mapped[int] = mapped_column(Integer)
    sequence: Mapped[int] = mapped_column(Integer)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    issued_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    currency: Mapped[str] = mapped_column(String(3))
    total: Mapped[int] = mapped_column(BigInteger)
    # [{"product", "name", "quantity", "unitAmount", "discount", "net", "taxRate", "tax",
    #   "amount"}]: amount is the line's gross (services.payments.lines.invoice_lines)
    lines: Mapped[list] = mapped_column(JSON)
    # The seller's identity when issued (services.tax.invoice_pdf.seller_snapshot), so a
    # later change in the console never changes an issued invoice; null before it was kept.
    seller: Mapped[dict | None] = mapped_column(JSON)
    # The tax the invoice states: regime, country, notes and totals per rate
    # (services.tax.checkout.invoice_tax); null on invoices issued before taxes.
    tax: Mapped[dict | None] = mapped_column(JSON)

    order: Mapped[Order] = relationship()


class Entitlement(Base):
    __tablename__ = "entitlements"
    __table_args__ = (CheckConstraint(one_of("status", ENTITLEMENT_STATUSES), name="status"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    order_item_id: Mapped[int] = mapped_column(ForeignKey("order_items.id"), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    product_id: Mapped[int] = mapped_column(ForeignKey("products.id"), index=True)
    status: Mapped[str] = mapped_column(String(20), default="active")
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    order_item: Mapped[OrderItem] = relationship()
    product: Mapped[Product] = relationship()


class OrderNote(Base):
    """A staff note on an order (the admin console's order page): who wrote what, when.
    Notes are kept, never edited: they are the order's paper trail."""

    __tablename__ = "order_notes"

    id: Mapped[int] = mapped_column(primary_key=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"), index=True)
    author_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)

    author: Mapped[User] = relationship()


class LicenseChange(Base):
    """What a paid renewal or upgrade did to a license: one row per order item (unique:
    the exactly-once backstop, like the other fulfilment tables), with the values before
    and after, which are also what a full refund or chargeback restores. ``reversed_at``
    is set, once, when that happens (``reversal``: refund / chargeback)."""

    __tablename__ = "license_changes"
    __table_args__ = (
        CheckConstraint("kind IN ('renewal', 'upgrade')", name="kind"),
        CheckConstraint(
            "reversal IS NULL OR reversal IN ('refund', 'chargeback')", name="reversal"
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    order_item_id: Mapped[int] = mapped_column(ForeignKey("order_items.id"), unique=True)
    license_id: Mapped[int] = mapped_column(ForeignKey("licences.id"), index=True)
    kind: Mapped[str] = mapped_column(String(10))
    old_expires_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    new_expires_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    old_product_id: Mapped[int] = mapped_column(ForeignKey("products.id"))
    new_product_id: Mapped[int] = mapped_column(ForeignKey("products.id"))
    old_max_activations: Mapped[int] = mapped_column(Integer)
    new_max_activations: Mapped[int] = mapped_column(Integer)
    # The license's own feature flags before an upgrade (an admin may have set them):
    # NULL on changes recorded before this was kept (the old product's flags stand in).
    old_features: Mapped[list[str] | None] = mapped_column(JSON)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    reversed_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    reversal: Mapped[str | None] = mapped_column(String(10))


class LicenseReview(Base):
    """A license an admin has to look at because of its order's money: a partial refund,
    or a full one whose change could not simply be taken back. One per order and license
    (unique: a repeated or late event updates it instead of adding another); open until
    an admin marks it resolved."""

    __tablename__ = "license_reviews"
    __table_args__ = (UniqueConstraint("order_id", "license_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    license_id: Mapped[int] = mapped_column(ForeignKey("licences.id"), index=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"))
    note: Mapped[str] = mapped_column(String(500))
    # The refunded amount the note is about (cumulative, the order's currency), if any.
    refunded_amount: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    resolved_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    resolved_by: Mapped[int | None] = mapped_column(ForeignKey("users.id"))


REFUND_STATUSES = ("requested", "pending", "succeeded", "failed")


class Refund(Base):
    """A refund of an order, asked for in the console or the admin API (``requested_by``
    the admin) or made at the provider's dashboard (``requested_by`` NULL, created when
    its event arrives). Recorded as ``requested`` before the provider is called; the
    provider's answer makes it ``pending`` (or ``succeeded``) with its refund id, or
    ``failed`` with the error. Entitlements and licences change only on the provider's
    confirming event (services/payments/fulfilment.refund), never here. ``lines`` is a
    refund by line: [{"item": order_item_id, "amount": minor units}]."""

    __tablename__ = "refunds"
    __table_args__ = (
        CheckConstraint("amount > 0", name="amount"),
        CheckConstraint(one_of("status", REFUND_STATUSES), name="status"),
        UniqueConstraint("provider", "provider_refund_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"), index=True)
    amount: Mapped[int] = mapped_column(BigInteger)
    currency: Mapped[str] = mapped_column(String(3))
    lines: Mapped[list | None] = mapped_column(JSON)
    reason: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(20), default="requested")
    provider: Mapped[str] = mapped_column(String(40))
    provider_refund_id: Mapped[str | None] = mapped_column(String(255))
    idempotency_key: Mapped[str] = mapped_column(String(64), unique=True)
    requested_by: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    confirmed_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    error: Mapped[str | None] = mapped_column(Text)
    # Asked in the console to leave running the subscription a full refund of this order
    # would cancel (services/subscriptions/refund_cancel.py).
    keep_subscription: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    order: Mapped[Order] = relationship()
