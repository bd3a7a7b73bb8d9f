"""Carts and coupons for the checkout tests: an anonymous visitor's cart filled through
the JSON API, a coupon row, the rows a checkout leaves behind."""

from __future__ import annotations

import datetime as dt

from helpers.clients import client_from
from sqlalchemy import func, select

from cmsshop.models import (
    Cart,
    Coupon,
    CouponAmount,
    CouponProduct,
    CouponRedemption,
    Entitlement,
    Fulfilment,
    Invoice,
    License,
    Order,
    OutboxMessage,
    Product,
)


def visitor_with_cart(app, lines: dict[str, int], ip: str = "127.0.0.1"):
    """(an anonymous API client, its cart's JSON) with ``lines``: slug -> quantity."""
    client = client_from(app, ip)
    cart = client.post_json("/api/store/carts", {}, status=201).json
    for slug, quantity in lines.items():
        cart = client.put_json(
            f"/api/store/carts/{cart['id']}/lines/{slug}", {"quantity": quantity}
        ).json
    return client, cart


def add_coupon(
    dbsession,
    code: str,
    *,
    percent_off: int | None = None,
    amounts: dict[str, tuple[int | None, int | None]] | None = None,
    products: tuple[str, ...] = (),
    **fields,
) -> Coupon:
    """A coupon: ``percent_off``, or ``amounts`` {currency: (amount off, minimum)}."""
    coupon = Coupon(
        code=code,
        kind="percent" if percent_off is not None else "fixed",
        percent_off=percent_off,
        **fields,
    )
    coupon.amounts = [
        CouponAmount(currency=currency, amount_off=off, min_subtotal=minimum)
        for currency, (off, minimum) in (amounts or {}).items()
    ]
    for slug in products:
        product_id = dbsession.scalar(select(Product.id).where(Product.slug == slug))
        coupon.products.append(CouponProduct(product_id=product_id))
    dbsession.add(coupon)
    dbsession.commit()
    return coupon


def delivered(dbsession, number: str) -> dict[str, int]:
    """What order ``number``'s fulfilment created, counted."""
    dbsession.commit()  # end the read snapshot: see what the app committed since
    order = dbsession.scalar(select(Order).where(Order.number == number))
    item_ids = [item.id for item in order.items]

    def count(model, *where):
        return dbsession.scalar(select(func.count()).select_from(model).where(*where))

    return {
        "fulfilments": count(Fulfilment, Fulfilment.order_id == order.id),
        "invoices": count(Invoice, Invoice.order_id == order.id),
        "entitlements": count(Entitlement, Entitlement.order_item_id.in_(item_ids)),
        "licenses": count(License, License.order_item_id.in_(item_ids)),
        "receipts": count(OutboxMessage, OutboxMessage.dedupe_key == f"receipt:order:{order.id}"),
    }


def redemption_statuses(dbsession, code: str) -> list[str]:
    dbsession.commit()  # end the read snapshot: see what the app committed since
    return list(
        dbsession.scalars(
            select(CouponRedemption.status)
            .join(Coupon, Coupon.id == CouponRedemption.coupon_id)
            .where(Coupon.code == code)
            .order_by(CouponRedemption.id)
        )
    )


def cart_count(dbsession) -> int:
    return dbsession.scalar(select(func.count()).select_from(Cart))


def in_days(days: float) -> dt.datetime:
    return dt.datetime.now(dt.UTC) + dt.timedelta(days=days)
