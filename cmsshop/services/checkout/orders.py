"""Checkout: price an order from the database, commit it as pending, then ask the
provider for a checkout session.

The order is committed (a transaction of its own) BEFORE the provider is asked, so a
webhook arriving faster than our response always finds it. Without API credentials
outside production, the redirect URL is our own sandbox route instead and the order stays
pending until a (simulated) webhook arrives.

A customer may hold at most ``cmsshop.max_pending_orders`` pending orders created within
the last hour (``PENDING_WINDOW``): each checkout commits an order before calling the
provider, so unlimited checkouts would let one account fill the orders table and the
provider's session list. The count and the insert run in one transaction that first
locks the customer's row (PostgreSQL) or takes the write lock (SQLite), so parallel
checkouts of one customer queue there and cannot exceed the limit. Older pending orders
are abandoned checkouts and do not count.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload

from cmsshop.db import own_transaction, take_write_lock
from cmsshop.models import Currency, Order, OrderItem, Product, User
from cmsshop.services.payments import license_changes as changes
from cmsshop.services.payments.base import (
    CheckoutRequest,
    NotConfigured,
    ProviderUnavailable,
)
from cmsshop.services.payments.registry import ProviderSpec
from cmsshop.services.payments.settings import provider_config
from cmsshop.services.store.currencies import default_currency
from cmsshop.util import readable_token, utcnow

log = logging.getLogger(__name__)

MAX_ITEMS = 20
PENDING_WINDOW = dt.timedelta(hours=1)


class CheckoutInvalid(Exception):
    def __init__(self, errors: dict[str, str]):
        super().__init__("checkout is invalid")
        self.errors = errors


class CheckoutUnavailable(Exception):
    """The provider could not create a checkout; the order was cancelled."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


class TooManyPendingOrders(Exception):
    """The customer already has the allowed number of recent pending orders."""

    def __init__(self, limit: int, retry_after: int):
        super().__init__(f"{limit} unpaid orders are waiting already")
        self.limit = limit
        self.retry_after = retry_after


@dataclasses.dataclass(frozen=True)
class PlacedOrder:
    order: Order  # committed; its items loaded
    redirect_url: str
    sandbox: bool


def new_order_number() -> str:
    """``ORD-XXXXX-XXXXX``: 50 random bits, so numbers reveal nothing about volume."""
    return readable_token(2, 5, prefix="ORD")


def price_items(session: Session, slugs: list[str], currency: str) -> list[dict]:
    """``[{"product_id", "slug", "name", "amount"}]`` from the database; raise
    CheckoutInvalid naming each bad item."""
    errors: dict[str, str] = {}
    row = session.get(Currency, currency)
    if row is None or not row.enabled:
        errors["currency"] = f"{currency} is not a currency this shop sells in"
    seen: set[str] = set()
    for index, slug in enumerate(slugs):
        if slug in seen:
            errors[f"items.{index}.product"] = "listed twice; each product once per order"
        seen.add(slug)
    if errors:
        raise CheckoutInvalid(errors)
    products = {
        p.slug: p
        for p in session.scalars(
            select(Product).where(Product.slug.in_(slugs)).options(selectinload(Product.prices))
        )
    }
    lines = []
    for index, slug in enumerate(slugs):
        product = products.get(slug)
        if product is None or not product.published or product.archived:
            errors[f"items.{index}.product"] = "no such product for sale"
            continue
        price = next((p for p in product.prices if p.currency == currency), None)
        if price is None:
            errors[f"items.{index}.product"] = f"not sold in {currency}"
            continue
        lines.append(
            {"product_id": product.id, "slug": slug, "name": product.name, "amount": price.amount}
        )
    if errors:
        raise CheckoutInvalid(errors)
    return lines


def price_order(
    session: Session, user_id: int, items: list[dict], currency: str, grace
) -> list[dict]:
    """Order lines of checkout ``items``: ``{"product": slug}`` (a purchase), ``{"renew":
    key}`` or ``{"upgrade": key, "to": slug}`` (services/payments/license_changes.py), in
    the order given; CheckoutInvalid naming each bad item."""
    errors: dict[str, str] = {}
    purchases = [(i, item["product"]) for i, item in enumerate(items) if item.get("product")]
    lines: dict[int, dict] = {}
    if purchases:
        try:
            priced = price_items(session, [slug for _, slug in purchases], currency)
        except CheckoutInvalid as exc:
            # price_items numbers its errors among the purchases: name the real items.
            for key, message in exc.errors.items():
                parts = key.split(".")
                if parts[0] == "items" and len(parts) == 3:
                    key = f"items.{purchases[int(parts[1])][0]}.{parts[2]}"
                errors[key] = message
            priced = []
        lines.update({index: line for (index, _), line in zip(purchases, priced, strict=False)})
    now = utcnow()
    targets: set[str] = set()
    for index, item in enumerate(items):
        key = item.get("renew") or item.get("upgrade")
        if not key:
            continue
        if key.strip().upper() in targets:
            errors[f"items.{index}"] = "the same license twice in one order"
            continue
        targets.add(key.strip().upper())
        try:
            if item.get("renew"):
                line = changes.price_renewal(session, user_id, key, currency, now, grace)
            else:
                line = changes.price_upgrade(session, user_id, key, item["to"], currency, now)
        except changes.ItemRefused as exc:
            errors[f"items.{index}.{exc.field}"] = exc.message
            continue
        lines[index] = line
    if errors:
        raise CheckoutInvalid(errors)
    return [lines[index] for index in sorted(lines)]


def insert_order(session: Session, user_id: int, currency: str, provider: str, lines) -> Order:
    order = Order(
        number=new_order_number(),
        user_id=user_id,
        currency=currency,
        total=sum(line["amount"] for line in lines),
        status="pending",
        provider=provider,
        created_at=utcnow(),
    )
    order.items = [
        OrderItem(
            product_id=line["product_id"],
            product_slug=line["slug"],
            name=line["name"],
            amount=line["amount"],
            kind=line.get("kind", "purchase"),
            target_license_id=line.get("target_license_id"),
        )
        for line in lines
    ]
    session.add(order)
    session.flush()
    return order


def check_pending_limit(session: Session, user_id: int, limit: int) -> None:
    """Raise TooManyPendingOrders when ``user_id`` holds ``limit`` recent pending orders.
    Call it after locking the customer (see the module docstring)."""
    since = utcnow() - PENDING_WINDOW
    count, oldest = session.execute(
        select(func.count(), func.min(Order.created_at)).where(
            Order.user_id == user_id, Order.status == "pending", Order.created_at > since
        )
    ).one()
    if count >= limit:
        frees_at = oldest + PENDING_WINDOW if oldest is not None else utcnow()
        if frees_at.tzinfo is None:
            frees_at = frees_at.replace(tzinfo=dt.UTC)
        wait = int((frees_at - utcnow()).total_seconds()) + 1
        raise TooManyPendingOrders(limit, max(1, wait))


def lock_customer(session: Session, user_id: int) -> None:
    """Queue this customer's checkouts: their row on PostgreSQL, the write lock on SQLite."""
    take_write_lock(session)
    session.execute(select(User.id).where(User.id == user_id).with_for_update())


def _loaded(session: Session, order: Order) -> Order:
    """``order`` with its items loaded, usable after its session closed."""
    session.flush()
    session.refresh(order, attribute_names=["items"])
    return order


def _commit_new_order(
    registry, user_id: int, currency: str, provider: str, lines, max_pending: int
) -> Order:
    for _attempt in range(3):
        try:
            with own_transaction(registry) as session:
                lock_customer(session, user_id)
                check_pending_limit(session, user_id, max_pending)
                return _loaded(session, insert_order(session, user_id, currency, provider, lines))
        except IntegrityError:  # an order number collided (50 random bits): draw again
            continue
    raise CheckoutUnavailable("could not allocate an order number", code="checkout_failed")


def _set_order(registry, number: str, **values) -> Order:
    with own_transaction(registry) as session:
        # A read then a write: on SQLite take the write lock first, or a checkout that
        # committed in between makes the upgrade fail and the whole request retry.
        take_write_lock(session)
        order = session.scalar(select(Order).where(Order.number == number))
        for name, value in values.items():
            setattr(order, name, value)
        order.updated_at = utcnow()
        return _loaded(session, order)


def checkout_urls(settings, number: str) -> tuple[str, str]:
    base = settings["cmsshop.base_url"].rstrip("/")
    success = (
        settings.get("cmsshop.payments.success_url") or f"{base}/checkout/success?order={{order}}"
    )
    cancel = (
        settings.get("cmsshop.payments.cancel_url") or f"{base}/checkout/cancel?order={{order}}"
    )
    return success.replace("{order}", number), cancel.replace("{order}", number)


def sandbox_url(settings, number: str) -> str:
    return f"{settings['cmsshop.base_url'].rstrip('/')}/api/store/checkout/sandbox/{number}"


def place_order(
    registry,
    session: Session,
    *,
    user: User,
    items: list[dict],
    currency: str | None,
    spec: ProviderSpec,
) -> PlacedOrder:
    """Price, commit as pending, then create the provider checkout (see module doc).

    ``session`` (the request's) is only read; the order is written in transactions of
    its own, so it is committed before the provider is called.
    """
    settings = registry.settings
    if not items or len(items) > MAX_ITEMS:
        raise CheckoutInvalid({"items": f"between 1 and {MAX_ITEMS} items"})
    if currency is None:
        currency = default_currency(session)
        if currency is None:
            raise CheckoutInvalid({"currency": "this shop has no default currency; name one"})
    lines = price_order(session, user.id, items, currency, changes.grace_of(settings))
    order = _commit_new_order(
        registry, user.id, currency, spec.name, lines, settings["cmsshop.max_pending_orders"]
    )
    number = order.number
    success_url, cancel_url = checkout_urls(settings, number)
    request = CheckoutRequest(
        order_number=number,
        currency=currency,
        total=order.total,
        items=[
            {"product": i.product_slug, "name": i.name, "amount": i.amount} for i in order.items
        ],
        customer_email=user.email,
        success_url=success_url,
        cancel_url=cancel_url,
    )
    try:
        checkout = spec.provider.create_checkout(request, provider_config(registry, spec))
    except NotConfigured as exc:
        if settings["cmsshop.environment"] == "production":
            _set_order(registry, number, status="cancelled")
            log.error("checkout with %s refused: %s", spec.name, exc)
            raise CheckoutUnavailable(
                f"Payments with {spec.name} are not configured on this site.",
                code="payments_not_configured",
            ) from None
        # Development without a provider account: pay with simulate-payment.
        return PlacedOrder(order, sandbox_url(settings, number), sandbox=True)
    except ProviderUnavailable as exc:
        _set_order(registry, number, status="cancelled")
        log.warning("checkout with %s failed for %s: %s", spec.name, number, exc)
        raise CheckoutUnavailable(
            f"{spec.name} could not start the payment; nothing was charged. Try again shortly.",
            code="provider_unavailable",
        ) from None
    order = _set_order(registry, number, provider_checkout_id=checkout.provider_checkout_id[:255])
    return PlacedOrder(order, checkout.redirect_url, sandbox=False)


def find_customer_order(session: Session, user_id: int, number: str) -> Order | None:
    return session.scalar(
        select(Order)
        .where(Order.number == number, Order.user_id == user_id)
        .options(selectinload(Order.items))
    )


def create_demo_order(session: Session, user: User, product: Product, currency: str) -> Order:
    """A pending order for the demo customer, so ``simulate-payment`` can be tried at once."""
    price = next(p for p in product.prices if p.currency == currency)
    lines = [
        {
            "product_id": product.id,
            "slug": product.slug,
            "name": product.name,
            "amount": price.amount,
        }
    ]
    return insert_order(session, user.id, currency, "cardprovider", lines)
