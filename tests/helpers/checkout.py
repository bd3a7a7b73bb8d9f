"""Carts for the checkout tests: an anonymous visitor's cart filled through the JSON
API, and the rows a checkout leaves behind (coupons are arranged with
helpers/coupons.py)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import func, select

from cmsshop.models import (
    Cart,
    Coupon,
    CouponRedemption,
    Entitlement,
    Fulfilment,
    Invoice,
    License,
    Order,
    OutboxMessage,
)
from helpers.clients import client_from


def visitor_with_cart(app, lines: dict[str, int], ip: str = "127.0.0.1"):
    """(an anonymous API client, its cart's JSON) with ``lines``: slug -> quantity."""
    client = client_from(app, ip)
    cart = client.post_json("/api/store/carts", {}, status=201).json
    for slug, quantity in lines.items():
        cart = client.put_json(
            f"/api/store/carts/{cart['id']}/lines/{slug}", {"quantity": quantity}
        ).json
    return client, cart


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


def order_count(dbsession) -> int:
    """Every order in the database, once the app's commits are seen."""
    dbsession.commit()  # end the read snapshot: see what the app committed since
    return dbsession.scalar(select(func.count()).select_from(Order))


def cart_count(dbsession) -> int:
    return dbsession.scalar(select(func.count()).select_from(Cart))


def in_days(days: float) -> dt.datetime:
    return dt.datetime.now(dt.UTC) + dt.timedelta(days=days)


# The billing details every test checkout sends (the API requires them: the country
# decides the tax). A country outside the EU, so no VAT rule applies.
BILLING = {"country": "US"}


def fill_billing(form, billing: dict | None = None) -> None:
    """Type the billing details (BILLING unless given) into a checkout form, and tick
    the terms box where the shop asks for its terms of sale (templates/legal/macros.html)."""
    for field, value in (billing or BILLING).items():
        form[field] = value
    if "acceptTerms" in form.fields:
        form["acceptTerms"] = True
