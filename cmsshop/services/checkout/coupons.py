"""Coupons: whether a code applies to an order, what it takes off each line, and the
count of its redemptions.

A coupon discounts purchase lines only (renewals and upgrades are priced from the
licence the buyer already has). Percent: the eligible subtotal (the purchase lines in
the coupon's product scope, or all of them) times the percentage, rounded half up once
for the whole order, then split over the eligible lines in proportion to their
subtotals by largest remainder, so the line shares always add up to the order's
discount exactly. Fixed: the amount off in the order's currency, at most the eligible
subtotal, split the same way. The minimum order is the whole cart's subtotal (every
line, before discount) in the order's currency; a currency the coupon names no
minimum for has none. A fixed coupon without an amount for the order's currency does
not apply to it.

Redemptions are counted race-free by ``coupons.reserved`` (reserved + redeemed ones).
``reserve_redemption`` runs in the transaction that inserts the order: one conditional
UPDATE takes a redemption only while the cap allows, and the row lock it leaves (on
PostgreSQL and SQLite alike, until the commit) serialises the per-customer count that
follows it. Paid orders' redemptions become ``redeemed`` (both fulfilment paths); an
order that expires or is cancelled or fails unpaid gives its redemption back
(``released``). A payment arriving after that still redeems it (the money came), even
when the cap was reached in between.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Iterable, Sequence

from sqlalchemy import false, func, or_, select, update
from sqlalchemy.orm import Session, selectinload

from cmsshop.models import Coupon, CouponRedemption
from cmsshop.services.store.currencies import amount_text

CODE_PATTERN = re.compile(r"^[A-Z0-9][A-Z0-9_-]{2,39}\Z")
# Redemptions that count against the caps (released ones were given back).
COUNTED_STATUSES = ("reserved", "redeemed")

MESSAGES = {
    "coupon_unknown": "There is no coupon with this code.",
    "coupon_not_started": "This coupon cannot be used yet.",
    "coupon_expired": "This coupon has expired.",
    "coupon_paused": "This coupon cannot be used at the moment.",
    "coupon_used_up": "This coupon has been used as often as it may be.",
    "coupon_limit_reached": "You have already used this coupon as often as it allows.",
    "coupon_not_applicable": "This coupon does not apply to anything in this order.",
    "coupon_minimum_not_met": "This coupon needs a larger order.",
}


class CouponRefused(Exception):
    """A coupon that cannot be used for this order: ``code`` (one of MESSAGES) and a
    sentence for the buyer."""

    def __init__(self, code: str, message: str | None = None):
        super().__init__(message or MESSAGES[code])
        self.code = code
        self.message = message or MESSAGES[code]


@dataclasses.dataclass(frozen=True)
class DiscountLine:
    """One order line as a coupon sees it: ``subtotal`` is unit price x quantity;
    ``kind`` purchase / renewal / upgrade (only purchases are discounted)."""

    product_id: int | None
    subtotal: int
    kind: str = "purchase"


def normalise_code(text) -> str:
    """What a buyer typed, as coupons are stored (upper-case, trimmed); anything that
    cannot be a code is refused as unknown."""
    if not isinstance(text, str):
        raise CouponRefused("coupon_unknown")
    code = text.strip().upper()
    if not CODE_PATTERN.match(code):
        raise CouponRefused("coupon_unknown")
    return code


def find_coupon(session: Session, code: str) -> Coupon:
    """The coupon of ``code`` (as typed) with its amounts and products; CouponRefused
    ``coupon_unknown`` when there is none."""
    coupon = session.scalar(
        select(Coupon)
        .where(Coupon.code == normalise_code(code))
        .options(selectinload(Coupon.amounts), selectinload(Coupon.products))
    )
    if coupon is None:
        raise CouponRefused("coupon_unknown")
    return coupon


def split_discount(total_discount: int, subtotals: Sequence[int]) -> list[int]:
    """``total_discount`` split over lines in proportion to their ``subtotals`` by
    largest remainder: the shares add up to ``total_discount`` exactly, none exceeds its
    line's subtotal, and ties go to the earlier line."""
    if total_discount < 0 or any(s < 0 for s in subtotals):
        raise ValueError("discounts and subtotals are never negative")
    whole = sum(subtotals)
    if total_discount > whole:
        raise ValueError(f"a discount of {total_discount} exceeds the subtotal {whole}")
    if total_discount == 0:
        return [0] * len(subtotals)
    shares = [total_discount * s // whole for s in subtotals]
    remainders = [total_discount * s % whole for s in subtotals]
    left = total_discount - sum(shares)
    for index in sorted(range(len(subtotals)), key=lambda i: (-remainders[i], i))[:left]:
        shares[index] += 1
    return shares


def percent_of(amount: int, percent: int) -> int:
    """``percent`` % of ``amount``, rounded half up (integers only)."""
    return (amount * percent * 2 + 100) // 200


def counted_redemptions(session: Session, coupon_id: int, user_id: int) -> int:
    """The customer's redemptions of the coupon that count against its per-customer cap."""
    return session.scalar(
        select(func.count()).where(
            CouponRedemption.coupon_id == coupon_id,
            CouponRedemption.user_id == user_id,
            CouponRedemption.status.in_(COUNTED_STATUSES),
        )
    )


def _aware(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def _when(value: dt.datetime) -> str:
    return _aware(value).astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def check_window(coupon: Coupon, now: dt.datetime) -> None:
    """CouponRefused unless the coupon is running at ``now`` (not paused, started, not
    expired)."""
    if coupon.paused:
        raise CouponRefused("coupon_paused")
    if coupon.valid_from is not None and now < _aware(coupon.valid_from):
        raise CouponRefused(
            "coupon_not_started",
            f"This coupon can be used from {_when(coupon.valid_from)}.",
        )
    if coupon.valid_until is not None and now >= _aware(coupon.valid_until):
        raise CouponRefused(
            "coupon_expired", f"This coupon expired on {_when(coupon.valid_until)}."
        )


def check_coupon(
    session: Session,
    coupon: Coupon,
    *,
    currency: str,
    lines: Sequence[DiscountLine],
    user_id: int | None,
    now: dt.datetime,
) -> list[int]:
    """The discount of each of ``lines`` (same order; 0 for a line the coupon does not
    cover) in ``currency``, or CouponRefused saying why the coupon cannot be used.
    ``user_id`` None (a guest whose account is not known yet) skips the per-customer
    cap, which ``reserve_redemption`` checks again in any case."""
    check_window(coupon, now)
    if coupon.max_redemptions is not None and coupon.reserved >= coupon.max_redemptions:
        raise CouponRefused("coupon_used_up")
    if (
        user_id is not None
        and coupon.max_per_customer is not None
        and counted_redemptions(session, coupon.id, user_id) >= coupon.max_per_customer
    ):
        raise CouponRefused("coupon_limit_reached")
    amount = next((a for a in coupon.amounts if a.currency == currency), None)
    if coupon.kind == "fixed" and (amount is None or amount.amount_off is None):
        raise CouponRefused(
            "coupon_not_applicable", f"This coupon cannot be used for orders in {currency}."
        )
    scope = {p.product_id for p in coupon.products}
    eligible = [
        line.kind == "purchase"
        and line.product_id is not None
        and (not scope or line.product_id in scope)
        for line in lines
    ]
    if not any(eligible):
        raise CouponRefused("coupon_not_applicable")
    minimum = amount.min_subtotal if amount is not None else None
    if minimum is not None and sum(line.subtotal for line in lines) < minimum:
        raise CouponRefused(
            "coupon_minimum_not_met",
            f"This coupon needs an order of at least {amount_text(session, minimum, currency)}.",
        )
    subtotals = [line.subtotal for line, ok in zip(lines, eligible, strict=True) if ok]
    base = sum(subtotals)
    if coupon.kind == "percent":
        total = percent_of(base, coupon.percent_off)
    else:
        total = min(amount.amount_off, base)
    shares = iter(split_discount(total, subtotals))
    return [next(shares) if ok else 0 for ok in eligible]


def reserve_redemption(
    session: Session, coupon: Coupon, *, order, discount: int, now: dt.datetime
) -> None:
    """Count ``order`` (inserted and flushed in this transaction) as a redemption of
    ``coupon``, or raise CouponRefused (the caller's transaction must then roll back, and
    the count with it). On SQLite the caller holds the write lock already
    (``take_write_lock`` before the order was inserted)."""
    taken = session.execute(
        update(Coupon)
        .where(
            Coupon.id == coupon.id,
            Coupon.paused == false(),
            or_(Coupon.max_redemptions.is_(None), Coupon.reserved < Coupon.max_redemptions),
        )
        .values(reserved=Coupon.reserved + 1, updated_at=now)
        .execution_options(synchronize_session=False)
    ).rowcount
    if coupon in session:
        session.expire(coupon, ["reserved", "paused", "updated_at"])
    if taken == 0:
        paused = session.scalar(select(Coupon.paused).where(Coupon.id == coupon.id))
        raise CouponRefused("coupon_paused" if paused else "coupon_used_up")
    # The coupon row is locked until this transaction ends, so two checkouts of one
    # customer cannot both count the other's redemption as not there yet.
    if (
        coupon.max_per_customer is not None
        and counted_redemptions(session, coupon.id, order.user_id) >= coupon.max_per_customer
    ):
        raise CouponRefused("coupon_limit_reached")
    session.add(
        CouponRedemption(
            coupon_id=coupon.id,
            order_id=order.id,
            user_id=order.user_id,
            status="reserved",
            discount=discount,
            currency=order.currency,
            created_at=now,
            updated_at=now,
        )
    )
    order.coupon_code = coupon.code
    session.flush()


def redeem_redemptions(session: Session, order_ids: Iterable[int], now: dt.datetime) -> None:
    """The redemptions of these (just paid) orders are redeemed. One released when its
    order expired is counted again: the money came, even past the cap."""
    ids = list(order_ids)
    if not ids:
        return
    again = session.scalars(
        update(CouponRedemption)
        .where(CouponRedemption.order_id.in_(ids), CouponRedemption.status == "released")
        .values(status="redeemed", updated_at=now)
        .returning(CouponRedemption.coupon_id)
        .execution_options(synchronize_session=False)
    ).all()
    counts: dict[int, int] = {}
    for coupon_id in again:
        counts[coupon_id] = counts.get(coupon_id, 0) + 1
    for coupon_id in sorted(counts):  # one order of locks for every transaction
        session.execute(
            update(Coupon)
            .where(Coupon.id == coupon_id)
            .values(reserved=Coupon.reserved + counts[coupon_id], updated_at=now)
            .execution_options(synchronize_session=False)
        )
    session.execute(
        update(CouponRedemption)
        .where(CouponRedemption.order_id.in_(ids), CouponRedemption.status == "reserved")
        .values(status="redeemed", updated_at=now)
        .execution_options(synchronize_session=False)
    )


def release_redemption(session: Session, order_id: int, now: dt.datetime) -> bool:
    """The order (closed unpaid) gives its reserved redemption back, once: True when
    there was one to give back."""
    coupon_id = session.scalar(
        update(CouponRedemption)
        .where(CouponRedemption.order_id == order_id, CouponRedemption.status == "reserved")
        .values(status="released", updated_at=now)
        .returning(CouponRedemption.coupon_id)
        .execution_options(synchronize_session=False)
    )
    if coupon_id is None:
        return False
    session.execute(
        update(Coupon)
        .where(Coupon.id == coupon_id)
        .values(reserved=Coupon.reserved - 1, updated_at=now)
        .execution_options(synchronize_session=False)
    )
    return True
