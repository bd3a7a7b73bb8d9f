"""What a buyer assembles before paying: carts and their lines; and the coupons that
discount an order, with one redemption row per order that used one.

A cart belongs to a logged-in customer (``user_id``) or to an anonymous visitor
(``visitor_hash``: the SHA-256 of the visitor's session-cookie token, so a database
leak hands out no cookies). It is created by the first "add to cart", never by a page
view. Its public ``id`` is random and says nothing; every route checks that the cart
is the caller's own (someone else's id answers 404).

Coupon redemptions are counted race-free by ``coupons.reserved``: a checkout reserves
with one conditional UPDATE (``reserved < max_redemptions``) that also locks the coupon
row until the order's transaction ends (services/checkout/coupons.py).
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    ForeignKey,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from cmsshop.models.meta import Base, UTCDateTime, one_of
from cmsshop.models.store import Product
from cmsshop.util import utcnow

COUPON_KINDS = ("percent", "fixed")
REDEMPTION_STATUSES = ("reserved", "redeemed", "released")


class Cart(Base):
    __tablename__ = "carts"
    __table_args__ = (
        CheckConstraint("user_id IS NOT NULL OR visitor_hash IS NOT NULL", name="owner"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), unique=True
    )
    visitor_hash: Mapped[str | None] = mapped_column(String(64), unique=True)
    currency: Mapped[str | None] = mapped_column(String(3))
    coupon_code: Mapped[str | None] = mapped_column(String(40))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)

    lines: Mapped[list[CartLine]] = relationship(
        back_populates="cart", cascade="all, delete-orphan", order_by="CartLine.id"
    )


class CartLine(Base):
    """One product in a cart. ``seen_amount`` is the unit price the buyer was shown
    (when added, or when they accepted a new price): a product repriced since is shown
    as such and checkout waits until the buyer accepts the new price. ``product_id`` is
    NULL once the product is gone; ``name`` keeps saying what it was."""

    __tablename__ = "cart_lines"
    __table_args__ = (
        UniqueConstraint("cart_id", "product_id"),
        CheckConstraint("quantity >= 1", name="quantity"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    cart_id: Mapped[str] = mapped_column(ForeignKey("carts.id", ondelete="CASCADE"), index=True)
    product_id: Mapped[int | None] = mapped_column(
        ForeignKey("products.id", ondelete="SET NULL"), index=True
    )
    name: Mapped[str] = mapped_column(String(200))
    quantity: Mapped[int] = mapped_column(Integer, default=1)
    seen_amount: Mapped[int | None] = mapped_column(BigInteger)
    seen_currency: Mapped[str | None] = mapped_column(String(3))
    added_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)

    cart: Mapped[Cart] = relationship(back_populates="lines")
    product: Mapped[Product | None] = relationship()


class Coupon(Base):
    """A discount code: ``percent_off`` (1-100) or an amount off per currency
    (CouponAmount), valid between two times, capped in total (``max_redemptions``) and
    per customer, optionally only for some products (CouponProduct; none: all)."""

    __tablename__ = "coupons"
    __table_args__ = (
        CheckConstraint(one_of("kind", COUPON_KINDS), name="kind"),
        CheckConstraint(
            "(kind = 'percent') = (percent_off IS NOT NULL)"
            " AND (percent_off IS NULL OR percent_off BETWEEN 1 AND 100)",
            name="percent_off",
        ),
        CheckConstraint("max_redemptions IS NULL OR max_redemptions >= 1", name="max_redemptions"),
        CheckConstraint(
            "max_per_customer IS NULL OR max_per_customer >= 1", name="max_per_customer"
        ),
        CheckConstraint("reserved >= 0", name="reserved"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    # Stored upper-case (what buyers type is upper-cased), so lookups are case-insensitive.
    code: Mapped[str] = mapped_column(String(40), unique=True)
    description: Mapped[str] = mapped_column(String(200), default="")
    kind: Mapped[str] = mapped_column(String(10))
    percent_off: Mapped[int | None] = mapped_column(Integer)
    valid_from: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    valid_until: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    max_redemptions: Mapped[int | None] = mapped_column(Integer)
    max_per_customer: Mapped[int | None] = mapped_column(Integer)
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    # Redemptions reserved or redeemed (released ones are given back).
    reserved: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    amounts: Mapped[list[CouponAmount]] = relationship(
        cascade="all, delete-orphan", order_by="CouponAmount.currency"
    )
    products: Mapped[list[CouponProduct]] = relationship(cascade="all, delete-orphan")


class CouponAmount(Base):
    """Per currency: the amount off (fixed coupons) and the minimum order subtotal."""

    __tablename__ = "coupon_amounts"
    __table_args__ = (
        CheckConstraint("amount_off IS NULL OR amount_off >= 1", name="amount_off"),
        CheckConstraint("min_subtotal IS NULL OR min_subtotal >= 0", name="min_subtotal"),
    )

    coupon_id: Mapped[int] = mapped_column(
        ForeignKey("coupons.id", ondelete="CASCADE"), primary_key=True
    )
    currency: Mapped[str] = mapped_column(ForeignKey("currencies.code"), primary_key=True)
    amount_off: Mapped[int | None] = mapped_column(BigInteger)
    min_subtotal: Mapped[int | None] = mapped_column(BigInteger)


class CouponProduct(Base):
    __tablename__ = "coupon_products"

    coupon_id: Mapped[int] = mapped_column(
        ForeignKey("coupons.id", ondelete="CASCADE"), primary_key=True
    )
    product_id: Mapped[int] = mapped_column(
        ForeignKey("products.id", ondelete="CASCADE"), primary_key=True
    )


class CouponRedemption(Base):
    """A coupon used by an order: ``reserved`` when the order is placed, ``redeemed``
    when it is paid, ``released`` (the count given back) when it expires or is
    cancelled unpaid. One per order."""

    __tablename__ = "coupon_redemptions"
    __table_args__ = (CheckConstraint(one_of("status", REDEMPTION_STATUSES), name="status"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    coupon_id: Mapped[int] = mapped_column(ForeignKey("coupons.id"), index=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    status: Mapped[str] = mapped_column(String(10), default="reserved")
    discount: Mapped[int] = mapped_column(BigInteger)
    currency: Mapped[str] = mapped_column(String(3))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)

    coupon: Mapped[Coupon] = relationship()
