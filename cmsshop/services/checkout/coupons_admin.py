"""Coupons as an admin manages them (the console and the JSON API): create, change,
pause and resume, list them with their use, and list a coupon's redemptions.

Fields arrive validated by the edge's schema (types, ranges, lengths) in the service's
names; the rules that need the database or several fields are checked here and refused
with ValidationFailed naming the JSON field, before anything is written. ``code`` and
``kind`` are fixed once a coupon exists: redemptions and orders refer to the code, and a
percent coupon becoming a fixed one would change what its reservations meant.

Writes change only the columns an admin sets, never ``reserved``: a checkout reserving
at the same moment keeps its count (on PostgreSQL the admin's update waits for that
checkout's row lock; on SQLite the write lock queues them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session, selectinload

from cmsshop.db import take_write_lock
from cmsshop.errors import Conflict, NotFound, ValidationFailed
from cmsshop.models import (
    REDEMPTION_STATUSES,
    Coupon,
    CouponAmount,
    CouponProduct,
    CouponRedemption,
    Currency,
    Order,
    Product,
    User,
)
from cmsshop.services.checkout.coupons import CODE_PATTERN, CouponRefused, normalise_code
from cmsshop.services.paging import Page, PageRequest, fetch_page
from cmsshop.util import utcnow

COUPON_STATES = ("active", "paused", "scheduled", "expired", "used_up")


@dataclasses.dataclass(frozen=True)
class CouponCard:
    """A coupon with what an admin sees of it: its products' slugs, its redemptions by
    status (``reserved`` ones are orders placed but not paid yet) and its state now (one
    of COUPON_STATES)."""

    coupon: Coupon
    product_slugs: list[str]
    redemptions: dict[str, int]
    state: str


def coupon_state(coupon: Coupon, now) -> str:
    """Whether a checkout could use the coupon now, and if not, the first reason why."""
    if coupon.paused:
        return "paused"
    if coupon.valid_from is not None and now < coupon.valid_from:
        return "scheduled"
    if coupon.valid_until is not None and now >= coupon.valid_until:
        return "expired"
    if coupon.max_redemptions is not None and coupon.reserved >= coupon.max_redemptions:
        return "used_up"
    return "active"


def coupon_not_found(code: str) -> NotFound:
    return NotFound(f"There is no coupon {code!r}.", code="coupon_not_found")


def _query():
    return select(Coupon).options(selectinload(Coupon.amounts), selectinload(Coupon.products))


def find_coupon(session: Session, code: str, *, for_update: bool = False) -> Coupon:
    """The coupon of ``code`` (any case), or 404 ``coupon_not_found``."""
    try:
        normalised = normalise_code(code)
    except CouponRefused:
        raise coupon_not_found(code[:50]) from None
    query = _query().where(Coupon.code == normalised)
    if for_update:
        query = query.with_for_update(of=Coupon).execution_options(populate_existing=True)
    coupon = session.scalar(query)
    if coupon is None:
        raise coupon_not_found(normalised)
    return coupon


def cards(session: Session, coupons: Sequence[Coupon]) -> list[CouponCard]:
    """The cards of ``coupons`` in two queries, whatever their number."""
    ids = [coupon.id for coupon in coupons]
    slugs: dict[int, list[str]] = {coupon_id: [] for coupon_id in ids}
    counts: dict[int, dict[str, int]] = {
        coupon_id: dict.fromkeys(REDEMPTION_STATUSES, 0) for coupon_id in ids
    }
    if ids:
        for coupon_id, slug in session.execute(
            select(CouponProduct.coupon_id, Product.slug)
            .join(Product, Product.id == CouponProduct.product_id)
            .where(CouponProduct.coupon_id.in_(ids))
            .order_by(Product.slug)
        ):
            slugs[coupon_id].append(slug)
        for coupon_id, status, count in session.execute(
            select(CouponRedemption.coupon_id, CouponRedemption.status, func.count())
            .where(CouponRedemption.coupon_id.in_(ids))
            .group_by(CouponRedemption.coupon_id, CouponRedemption.status)
        ):
            counts[coupon_id][status] = count
    now = utcnow()
    return [
        CouponCard(coupon, slugs[coupon.id], counts[coupon.id], coupon_state(coupon, now))
        for coupon in coupons
    ]


def card(session: Session, coupon: Coupon) -> CouponCard:
    (found,) = cards(session, [coupon])
    return found


def list_coupons(session: Session, page_request: PageRequest) -> Page:
    """Every coupon, newest first, as cards."""
    query = _query().order_by(Coupon.created_at.desc(), Coupon.id.desc())
    page = fetch_page(session, query, page_request)
    return Page(cards(session, page.items), page.page, page.per_page, page.total)


def list_redemptions(session: Session, coupon: Coupon, page_request: PageRequest) -> Page:
    """The coupon's redemptions, newest first: rows of (redemption, order number,
    customer email)."""
    query = (
        select(CouponRedemption, Order.number, User.email)
        .join(Order, Order.id == CouponRedemption.order_id)
        .join(User, User.id == CouponRedemption.user_id)
        .where(CouponRedemption.coupon_id == coupon.id)
        .order_by(CouponRedemption.created_at.desc(), CouponRedemption.id.desc())
    )
    count = select(func.count()).where(CouponRedemption.coupon_id == coupon.id)
    return fetch_page(session, query, page_request, count_query=count, scalars=False)


# --- writing -------------------------------------------------------------------------------


def _check_amounts(session: Session, kind: str, amounts: dict[str, dict]) -> None:
    known = set(session.scalars(select(Currency.code).where(Currency.code.in_(list(amounts)))))
    errors = {}
    for currency, values in amounts.items():
        if currency not in known:
            errors[f"amounts.{currency}"] = f"{currency} is not a currency of this shop"
        elif kind == "percent" and values.get("amount_off") is not None:
            errors[f"amounts.{currency}.amountOff"] = "a percent coupon takes no amount off"
    if kind == "fixed" and not any(v.get("amount_off") is not None for v in amounts.values()):
        errors.setdefault("amounts", "a fixed coupon needs an amountOff in at least one currency")
    if errors:
        raise ValidationFailed(errors)


def _product_ids(session: Session, slugs: list[str]) -> list[int]:
    found = dict(
        session.execute(select(Product.slug, Product.id).where(Product.slug.in_(slugs))).all()
    )
    errors = {
        f"products.{index}": f"there is no product {slug!r}"
        for index, slug in enumerate(slugs)
        if slug not in found
    }
    if errors:
        raise ValidationFailed(errors)
    return sorted({found[slug] for slug in slugs})


def _check_window(valid_from, valid_until) -> None:
    if valid_from is not None and valid_until is not None and valid_until <= valid_from:
        raise ValidationFailed({"validUntil": "must be after validFrom"})


def _set_amounts(coupon: Coupon, amounts: dict[str, dict]) -> None:
    current = {amount.currency: amount for amount in coupon.amounts}
    kept = []
    for currency, values in sorted(amounts.items()):
        amount = current.get(currency) or CouponAmount(currency=currency)
        amount.amount_off = values.get("amount_off")
        amount.min_subtotal = values.get("min_subtotal")
        kept.append(amount)
    coupon.amounts = kept


def _set_products(coupon: Coupon, product_ids: list[int]) -> None:
    current = {link.product_id: link for link in coupon.products}
    coupon.products = [current.get(pid) or CouponProduct(product_id=pid) for pid in product_ids]


def create_coupon(session: Session, data: dict) -> Coupon:
    """A new coupon from validated fields; 409 ``coupon_exists`` for a code in use, 422
    for a rule the fields break (nothing written either way)."""
    take_write_lock(session)
    code = data["code"].strip().upper()
    if not CODE_PATTERN.match(code):
        raise ValidationFailed({"code": "3-40 of A-Z, 0-9, _ and -, starting with A-Z or 0-9"})
    if session.scalar(select(Coupon.id).where(Coupon.code == code)) is not None:
        raise Conflict(f"A coupon {code!r} exists already.", code="coupon_exists")
    kind = data["kind"]
    errors = {}
    if kind == "percent" and data.get("percent_off") is None:
        errors["percentOff"] = "a percent coupon needs percentOff (1-100)"
    if kind == "fixed" and data.get("percent_off") is not None:
        errors["percentOff"] = "a fixed coupon takes its amounts off per currency (amounts)"
    if errors:
        raise ValidationFailed(errors)
    _check_amounts(session, kind, data.get("amounts") or {})
    _check_window(data.get("valid_from"), data.get("valid_until"))
    product_ids = _product_ids(session, data.get("products") or [])
    now = utcnow()
    coupon = Coupon(
        code=code,
        description=data.get("description") or "",
        kind=kind,
        percent_off=data.get("percent_off"),
        valid_from=data.get("valid_from"),
        valid_until=data.get("valid_until"),
        max_redemptions=data.get("max_redemptions"),
        max_per_customer=data.get("max_per_customer"),
        paused=bool(data.get("paused")),
        reserved=0,
        created_at=now,
        updated_at=now,
    )
    _set_amounts(coupon, data.get("amounts") or {})
    _set_products(coupon, product_ids)
    session.add(coupon)
    session.flush()
    return coupon


FIXED_FIELDS = {"code": "code", "kind": "kind"}


def update_coupon(session: Session, code: str, changes: dict) -> tuple[Coupon, list[str]]:
    """Apply validated changes (any of description, percent_off, amounts, valid_from,
    valid_until, max_redemptions, max_per_customer, products, paused; ``code`` and
    ``kind`` only as they are). Returns the coupon and notes for the admin (a cap set
    below the redemptions already counted)."""
    take_write_lock(session)
    coupon = find_coupon(session, code, for_update=True)
    errors = {}
    for name, field in FIXED_FIELDS.items():
        if name in changes and str(changes[name]).strip().upper() != getattr(coupon, name).upper():
            errors[field] = f"a coupon's {field} is fixed once created"
    if "percent_off" in changes:
        if coupon.kind == "fixed" and changes["percent_off"] is not None:
            errors["percentOff"] = "a fixed coupon takes its amounts off per currency (amounts)"
        if coupon.kind == "percent" and changes["percent_off"] is None:
            errors["percentOff"] = "a percent coupon needs percentOff (1-100)"
    if errors:
        raise ValidationFailed(errors)
    if "amounts" in changes:
        _check_amounts(session, coupon.kind, changes["amounts"])
    _check_window(
        changes.get("valid_from", coupon.valid_from), changes.get("valid_until", coupon.valid_until)
    )
    product_ids = _product_ids(session, changes["products"]) if "products" in changes else None
    for name in (
        "description",
        "percent_off",
        "valid_from",
        "valid_until",
        "max_redemptions",
        "max_per_customer",
        "paused",
    ):
        if name in changes:
            setattr(coupon, name, changes[name])
    if "amounts" in changes:
        _set_amounts(coupon, changes["amounts"])
    if product_ids is not None:
        _set_products(coupon, product_ids)
    coupon.updated_at = utcnow()
    session.flush()
    notes = []
    if coupon.max_redemptions is not None and coupon.max_redemptions < coupon.reserved:
        notes.append(
            f"maxRedemptions {coupon.max_redemptions} is below the {coupon.reserved} "
            "redemptions already counted: no new ones until some are released; "
            "none is taken back."
        )
    return coupon, notes


def set_paused(session: Session, code: str, paused: bool) -> Coupon:
    """Pause (checkouts refuse it) or resume a coupon."""
    coupon, _ = update_coupon(session, code, {"paused": paused})
    return coupon


def product_choices(session: Session) -> list[tuple[str, str]]:
    """(slug, name) of the products a new coupon may name, by name (archived ones are
    no longer sold)."""
    return [
        (slug, name)
        for slug, name in session.execute(
            select(Product.slug, Product.name)
            .where(Product.archived.is_(False))
            .order_by(Product.name, Product.slug)
        )
    ]
