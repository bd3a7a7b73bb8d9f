"""What an order costs, computed from the database only: the unit prices of today, the
quantities asked for, the coupon's discount. Nothing a client sends about money is ever
read (a price or total in a form is not even looked at).

An order line is a dict (the shape ``orders.insert_order`` writes)::

    {"product_id", "slug", "name", "kind", "target_license_id",
     "quantity", "unit_amount", "discount", "amount"}

with ``amount = unit_amount * quantity - discount``. Quantity rules (docs/checkout.md):
a licensed product's quantity is the number of seat packs (one license with quantity x
the product's seats); an unlicensed product is bought once per order unless the seller
set ``Product.max_quantity``; renewals and upgrades are one per license.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from cmsshop.models import Coupon, Currency, Product
from cmsshop.services.checkout import coupons

# The product's own limit (services.store.products, where the public body is built too).
from cmsshop.services.store.products import (  # noqa: F401 - re-exported for checkout
    DEFAULT_MAX_QUANTITY,
    UNLICENSED_MAX_QUANTITY,
    max_quantity,
)

# A quantity beyond any product's limit is refused before a query (and kept out of
# integers the database would overflow on).
QUANTITY_CEILING = 10_000


class CheckoutInvalid(Exception):
    """Items that cannot be ordered; ``errors``: field path -> message (a 422)."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("checkout is invalid")
        self.errors = errors


class PricesChanged(Exception):
    """A price differs from the one the buyer was shown (a 409: show the cart again)."""

    def __init__(self, changes: dict[str, str]):
        super().__init__("prices changed")
        self.changes = changes


def quantity_problem(product: Product, quantity: int) -> str | None:
    """Why ``quantity`` of ``product`` cannot be ordered (None: it can)."""
    if quantity < 1:
        return "must be at least 1"
    limit = max_quantity(product)
    if quantity > limit:
        return f"at most {limit} per order" if limit > 1 else "one per order"
    return None


def sale_problem(product: Product | None, currency: str) -> str | None:
    """Why ``product`` cannot be bought in ``currency`` now (None: it can)."""
    if product is None or not product.published or product.archived:
        return "no longer for sale"
    if unit_price(product, currency) is None:
        return f"not sold in {currency}"
    return None


def unit_price(product: Product, currency: str) -> int | None:
    return next((p.amount for p in product.prices if p.currency == currency), None)


def currency_problem(session: Session, currency: str) -> str | None:
    row = session.get(Currency, currency)
    if row is None or not row.enabled:
        return f"{currency} is not a currency this shop sells in"
    return None


def load_products(session: Session, slugs: Sequence[str]) -> dict[str, Product]:
    return {
        p.slug: p
        for p in session.scalars(
            select(Product)
            .where(Product.slug.in_(set(slugs)))
            .options(selectinload(Product.prices))
        )
    }


def purchase_line(product: Product, quantity: int, unit_amount: int) -> dict:
    return {
        "product_id": product.id,
        "slug": product.slug,
        "name": product.name,
        "kind": "purchase",
        "target_license_id": None,
        "quantity": quantity,
        "unit_amount": unit_amount,
        "discount": 0,
        "amount": unit_amount * quantity,
    }


def price_purchases(session: Session, wanted: Sequence[dict], currency: str) -> dict[int, dict]:
    """Order lines of purchases ``wanted``: ``{"index", "product", "quantity", "seen"}``
    (``seen``: the unit price the buyer was shown, or None). Returns index -> line;
    raises CheckoutInvalid naming each bad item by its index, or PricesChanged when only
    prices moved since the buyer saw them."""
    errors: dict[str, str] = {}
    seen_slugs: set[str] = set()
    for item in wanted:
        if item["product"] in seen_slugs:
            errors[f"items.{item['index']}.product"] = "listed twice; each product once per order"
        seen_slugs.add(item["product"])
    if errors:
        raise CheckoutInvalid(errors)
    products = load_products(session, [item["product"] for item in wanted])
    lines: dict[int, dict] = {}
    changed: dict[str, str] = {}
    for item in wanted:
        index, quantity = item["index"], item["quantity"]
        product = products.get(item["product"])
        problem = sale_problem(product, currency)
        if problem:
            errors[f"items.{index}.product"] = problem
            continue
        problem = quantity_problem(product, quantity)
        if problem:
            errors[f"items.{index}.quantity"] = problem
            continue
        unit = unit_price(product, currency)
        if item.get("seen") is not None and item["seen"] != unit:
            changed[f"items.{index}.product"] = f"the price of {product.name} changed"
        lines[index] = purchase_line(product, quantity, unit)
    if errors:
        raise CheckoutInvalid(errors)
    if changed:
        raise PricesChanged(changed)
    return lines


def apply_coupon(
    session: Session,
    lines: list[dict],
    code: str,
    *,
    currency: str,
    user_id: int | None,
    now: dt.datetime,
) -> Coupon:
    """Discount ``lines`` in place with coupon ``code`` (coupons.CouponRefused when it
    cannot be used); returns the coupon."""
    coupon = coupons.find_coupon(session, code)
    shares = coupons.check_coupon(
        session,
        coupon,
        currency=currency,
        lines=[
            coupons.DiscountLine(
                product_id=line["product_id"],
                subtotal=line["unit_amount"] * line["quantity"],
                kind=line["kind"],
            )
            for line in lines
        ],
        user_id=user_id,
        now=now,
    )
    for line, share in zip(lines, shares, strict=True):
        line["discount"] = share
        line["amount"] = line["unit_amount"] * line["quantity"] - share
    return coupon


@dataclasses.dataclass(frozen=True)
class Totals:
    subtotal: int
    discount: int
    total: int


def totals(lines: Sequence[dict]) -> Totals:
    subtotal = sum(line["unit_amount"] * line["quantity"] for line in lines)
    discount = sum(line["discount"] for line in lines)
    return Totals(subtotal=subtotal, discount=discount, total=subtotal - discount)
