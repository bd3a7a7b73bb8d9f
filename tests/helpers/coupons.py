"""Arranging coupons and orders that use them, through the models and the coupons
service (as checkout leaves them), committed like every other arrangement."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select

from cmsshop.models import (
    Coupon,
    CouponAmount,
    CouponProduct,
    CouponRedemption,
    Order,
    OrderItem,
    Product,
)
from cmsshop.services.checkout import coupons
from cmsshop.services.checkout.orders import new_order_number
from cmsshop.util import utcnow


def make_coupon(
    session,
    code: str = "SAVE10",
    *,
    kind: str = "percent",
    percent_off: int | None = 10,
    amounts: dict[str, dict] | None = None,
    products: tuple[str, ...] = (),
    **fields,
) -> Coupon:
    """A coupon; ``amounts`` ``{"EUR": {"amount_off": 500, "min_subtotal": 2000}}``,
    ``products`` slugs (none: every product)."""
    coupon = Coupon(
        code=code,
        kind=kind,
        percent_off=percent_off if kind == "percent" else None,
        **fields,
    )
    coupon.amounts = [
        CouponAmount(currency=currency, **values) for currency, values in (amounts or {}).items()
    ]
    if products:
        ids = session.scalars(select(Product.id).where(Product.slug.in_(products))).all()
        coupon.products = [CouponProduct(product_id=product_id) for product_id in ids]
    session.add(coupon)
    session.commit()
    return coupon


def place_with_coupon(
    session,
    user,
    code: str,
    slugs=("site-guard",),
    *,
    currency: str = "EUR",
    quantities: dict[str, int] | None = None,
    created_at: dt.datetime | None = None,
    provider: str = "cardprovider",
) -> Order:
    """A pending order of ``slugs`` with coupon ``code`` applied and its redemption
    reserved in the order's transaction, as checkout places it; CouponRefused when the
    coupon refuses (nothing is committed then)."""
    now = utcnow()
    try:
        coupon = coupons.find_coupon(session, code)
        products = {
            p.slug: p for p in session.scalars(select(Product).where(Product.slug.in_(slugs)))
        }
        units = []
        for slug in slugs:
            product = products[slug]
            amount = next(p.amount for p in product.prices if p.currency == currency)
            units.append((product, amount, (quantities or {}).get(slug, 1)))
        lines = [
            coupons.DiscountLine(product.id, amount * quantity, "purchase")
            for product, amount, quantity in units
        ]
        discounts = coupons.check_coupon(
            session, coupon, currency=currency, lines=lines, user_id=user.id, now=now
        )
        items = [
            OrderItem(
                product_id=product.id,
                product_slug=product.slug,
                name=product.name,
                quantity=quantity,
                unit_amount=amount,
                discount=discount,
                amount=amount * quantity - discount,
            )
            for (product, amount, quantity), discount in zip(units, discounts, strict=True)
        ]
        order = Order(
            number=new_order_number(),
            user_id=user.id,
            currency=currency,
            total=sum(item.amount for item in items),
            discount=sum(discounts),
            status="pending",
            provider=provider,
            created_at=created_at or now,
        )
        order.items = items
        session.add(order)
        session.flush()
        coupons.reserve_redemption(session, coupon, order=order, discount=sum(discounts), now=now)
        session.commit()
    except BaseException:
        session.rollback()
        raise
    return order


def redemption_of(session, order: Order) -> CouponRedemption | None:
    session.commit()  # ends the read snapshot (SQLite WAL)
    session.expire_all()
    return session.scalar(select(CouponRedemption).where(CouponRedemption.order_id == order.id))


def reserved_count(session, code: str) -> int:
    session.commit()  # ends the read snapshot (SQLite WAL)
    session.expire_all()
    return session.scalar(select(Coupon.reserved).where(Coupon.code == code))
