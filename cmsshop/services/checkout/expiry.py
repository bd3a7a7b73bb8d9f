"""Unpaid orders expire: a pending order older than ``cmsshop.checkout.order_ttl``
seconds is cancelled by the worker and gives its coupon redemption back.

The lifetime (25 hours by default) is longer than any provider's checkout session (a
day at most), so a buyer still at the provider's page finds the order pending. A payment
that arrives for an expired order anyway holds it for review (the state machine's
cancelled -> needs_review), and fulfilling it by hand redeems its coupon again.

Orders are taken in batches, each in a transaction of its own with its rows locked
FOR UPDATE SKIP LOCKED on PostgreSQL (an order a webhook is fulfilling right now is
left for the next pass, and several workers share the work) or under the write lock on
SQLite.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.db import own_transaction, take_write_lock
from cmsshop.models import Order
from cmsshop.services.payments.fulfilment import close_order
from cmsshop.util import utcnow

log = logging.getLogger(__name__)

ORDER_TTL = "cmsshop.checkout.order_ttl"
DEFAULT_ORDER_TTL = 90_000
# Shorter than a provider's checkout session would cancel orders buyers are still paying.
MIN_ORDER_TTL = 3600
# Orders cancelled per transaction: short transactions, locks held briefly.
EXPIRY_BATCH = 200


def as_order_ttl(value) -> int:
    """The ``cmsshop.checkout.order_ttl`` setting: whole seconds, at least an hour."""
    seconds = int(str(value).strip())
    if seconds < MIN_ORDER_TTL:
        raise ValueError(
            f"at least {MIN_ORDER_TTL} seconds: a buyer still paying at the provider"
            " must find the order pending"
        )
    return seconds


def expire_pending_orders(
    session: Session, now: dt.datetime, ttl_seconds: int, *, limit: int = EXPIRY_BATCH
) -> int:
    """Cancel up to ``limit`` pending orders created before ``now - ttl_seconds`` in
    ``session``'s transaction (the caller commits), releasing their coupon redemptions;
    the number cancelled."""
    take_write_lock(session)
    cutoff = now - dt.timedelta(seconds=ttl_seconds)
    orders = session.scalars(
        select(Order)
        .where(Order.status == "pending", Order.created_at < cutoff)
        .order_by(Order.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .execution_options(populate_existing=True)
    ).all()
    for order in orders:
        close_order(session, order, "cancelled")
    if orders:
        log.info(
            "expired %s unpaid orders: %s",
            len(orders),
            ", ".join(order.number for order in orders),
        )
    return len(orders)


def expire_due_orders(registry, ttl_seconds: int, *, stop: Callable[[], bool] | None = None) -> int:
    """Every order due to expire, batch after batch (each committed); the number
    cancelled. ``stop`` is asked between batches."""
    total = 0
    while stop is None or not stop():
        with own_transaction(registry) as session:
            count = expire_pending_orders(session, utcnow(), ttl_seconds)
        total += count
        if count < EXPIRY_BATCH:
            break
    return total
