"""Arranging helpers of the payment tests: catalogue, orders, row counts.

Data is arranged through a plain session and committed, as every test here commits
for real.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import func, select

from cmsshop.models import (
    Currency,
    Entitlement,
    Fulfilment,
    Invoice,
    License,
    Order,
    OrderItem,
    PaymentEvent,
    Product,
    ProductPrice,
)
from cmsshop.services.checkout.orders import new_order_number


def make_catalogue(session) -> dict[str, Product]:
    for code, default in (("EUR", True), ("USD", False), ("GBP", False)):
        session.add(
            Currency(
                code=code,
                name=code,
                symbol=code,
                decimals=2,
                enabled=code != "GBP",
                is_default=default,
            )
        )
    specs = [
        ("site-guard", "SiteGuard", True, 3, 365, {"EUR": 4900, "USD": 5400}, True),
        ("pixel-forge", "PixelForge", True, 2, None, {"EUR": 7900}, True),
        ("themes", "Theme Pack", False, None, None, {"EUR": 1900, "USD": 2100}, True),
        ("draft", "Draft", False, None, None, {"EUR": 100}, False),
    ]
    products = {}
    for slug, name, licensed, max_act, days, prices, published in specs:
        product = Product(
            slug=slug,
            name=name,
            licensed=licensed,
            max_activations=max_act,
            duration_days=days,
            published=published,
        )
        product.prices = [ProductPrice(currency=c, amount=a) for c, a in prices.items()]
        session.add(product)
        products[slug] = product
    session.commit()
    return products


def make_order(
    session,
    user,
    slugs=("site-guard",),
    *,
    currency: str = "EUR",
    status: str = "pending",
    number: str | None = None,
    provider: str = "cardprovider",
    checkout_id: str | None = None,
    quantities: Mapping[str, int] | None = None,
    discounts: Mapping[str, int] | None = None,
    coupon_code: str | None = None,
) -> Order:
    """A placed order of ``slugs`` at today's prices: ``quantities`` and ``discounts``
    (a line's share of a coupon) by slug, as checkout writes them (unit price x quantity
    - discount = amount; the order's discount is the lines')."""
    quantities, discounts = quantities or {}, discounts or {}
    products = {p.slug: p for p in session.scalars(select(Product).where(Product.slug.in_(slugs)))}
    items = []
    for slug in slugs:
        product = products[slug]
        unit = next(p.amount for p in product.prices if p.currency == currency)
        quantity, discount = quantities.get(slug, 1), discounts.get(slug, 0)
        items.append(
            OrderItem(
                product_id=product.id,
                product_slug=slug,
                name=product.name,
                quantity=quantity,
                unit_amount=unit,
                discount=discount,
                amount=unit * quantity - discount,
            )
        )
    order = Order(
        number=number or new_order_number(),
        user_id=user.id,
        currency=currency,
        total=sum(i.amount for i in items),
        discount=sum(i.discount for i in items),
        coupon_code=coupon_code,
        status=status,
        provider=provider,
        provider_checkout_id=checkout_id,
    )
    order.items = items
    session.add(order)
    session.commit()
    return order


def counts(session) -> dict[str, int]:
    session.commit()  # ends the read snapshot (SQLite WAL)
    session.expire_all()

    def count(model, *where):
        return session.scalar(select(func.count()).select_from(model).where(*where)) or 0

    return {
        "paid": count(Order, Order.status == "paid"),
        "fulfilments": count(Fulfilment),
        "invoices": count(Invoice),
        "entitlements": count(Entitlement),
        "licenses": count(License),
        "events": count(PaymentEvent),
    }


def order_status(session, number: str) -> str:
    session.commit()  # ends the read snapshot (SQLite WAL)
    session.expire_all()
    return session.scalar(select(Order.status).where(Order.number == number))


def event_row(session, event_id: str) -> PaymentEvent:
    session.commit()  # ends the read snapshot (SQLite WAL)
    session.expire_all()
    return session.scalar(select(PaymentEvent).where(PaymentEvent.event_id == event_id))
