"""Exactly-once fulfilment and the order state machine.

Order states and the only moves allowed (see docs/payments.md):

    pending      -> paid (fulfilled) | needs_review | failed | cancelled
    paid         -> refunded | disputed
    needs_review -> paid (manual fulfilment) | refunded | disputed
    disputed     -> paid (dispute won) | refunded (dispute lost)
                    | needs_review (dispute won on an order that was never delivered)
    failed       -> needs_review (a confirmed payment arrived after all)
    cancelled    -> needs_review (idem)
    refunded     -> (final)

Everything here runs in the caller's transaction (the request's, via pyramid_tm) with the
order row locked (``lock_order``), so two deliveries for the same payment are serialised
on that lock and the second sees the first one's committed result. The unique constraints
on fulfilments (order_id; provider + payment_reference), invoices (order_id), entitlements
and licenses (order_item_id) back this up: a race that slips past the lock fails with
IntegrityError, which is retried (cmsshop.db) and then finds the winner's rows.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, selectinload

from cmsshop.models import (
    Entitlement,
    Fulfilment,
    Invoice,
    InvoiceCounter,
    License,
    Order,
    OrderItem,
    PaymentEvent,
)
from cmsshop.services.checkout.coupons import redeem_redemptions, release_redemption
from cmsshop.services.licensing.issuing import issue_license
from cmsshop.services.payments import license_changes
from cmsshop.services.payments.base import Confirmation
from cmsshop.services.payments.lines import invoice_lines
from cmsshop.services.payments.receipts import prepare_receipt, queue_receipt
from cmsshop.services.tax import checkout as tax_checkout
from cmsshop.services.tax import invoice_pdf
from cmsshop.services.webhooks import payloads
from cmsshop.services.webhooks.events import emit_event
from cmsshop.util import utcnow

TRANSITIONS: dict[str, frozenset[str]] = {
    "pending": frozenset({"paid", "needs_review", "failed", "cancelled"}),
    "paid": frozenset({"refunded", "disputed"}),
    "needs_review": frozenset({"paid", "refunded", "disputed"}),
    "disputed": frozenset({"paid", "refunded", "needs_review"}),
    "failed": frozenset({"needs_review"}),
    "cancelled": frozenset({"needs_review"}),
    "refunded": frozenset(),
}
# Orders a provider-confirmed payment is acted on: a pending one is fulfilled, a failed or
# cancelled one held for review (the money arrived after all). Any other state has had
# its payment already, or is with a human.
PAYABLE_STATUSES = frozenset({"pending", "failed", "cancelled"})
# Orders a manual fulfilment may deliver (an admin has seen the money arrive).
MANUALLY_FULFILLABLE = ("pending", "needs_review", "failed", "cancelled")


class TransitionRefused(Exception):
    """A move the state machine does not allow (states only move forward)."""


@dataclasses.dataclass(frozen=True)
class Result:
    """What an action did: ``status`` is processed / duplicate / ignored / needs_review."""

    status: str
    note: str = ""
    fulfilment: Fulfilment | None = None


def move(order: Order, new_status: str) -> None:
    if new_status not in TRANSITIONS[order.status]:
        raise TransitionRefused(
            f"order {order.number} cannot go from {order.status} to {new_status}"
        )
    order.status = new_status
    order.updated_at = utcnow()


def lock_order(session: Session, order_id: int) -> Order:
    """The order, re-read and locked FOR UPDATE (PostgreSQL; SQLite has one writer anyway).

    populate_existing: an earlier unlocked read left a stale copy in the identity map.
    """
    return session.scalars(
        select(Order)
        .where(Order.id == order_id)
        .options(selectinload(Order.items).selectinload(OrderItem.product))
        .with_for_update(of=Order)
        .execution_options(populate_existing=True)
    ).one()


def fulfilment_of(session: Session, order_id: int) -> Fulfilment | None:
    return session.scalar(select(Fulfilment).where(Fulfilment.order_id == order_id))


def invoice_number_of(session: Session, order_id: int) -> str | None:
    return session.scalar(select(Invoice.number).where(Invoice.order_id == order_id))


def fulfilment_by_payment(session: Session, provider: str, reference: str) -> Fulfilment | None:
    return session.scalar(
        select(Fulfilment).where(
            Fulfilment.provider == provider, Fulfilment.payment_reference == reference
        )
    )


def confirmation_problems(order: Order, confirmation: Confirmation) -> list[str]:
    """Why a confirmed payment does not match the order (empty: it matches)."""
    problems = []
    if confirmation.amount != order.total:
        problems.append(f"amount {confirmation.amount} != order total {order.total}")
    if (confirmation.currency or "").upper() != order.currency:
        problems.append(f"currency {confirmation.currency} != order currency {order.currency}")
    if confirmation.order_number != order.number:
        problems.append(f"order reference {confirmation.order_number!r} != {order.number!r}")
    return problems


def payment_problems(
    order: Order, provider: str, confirmation: Confirmation, *, paid_elsewhere: bool
) -> list[str]:
    """Why a confirmed payment cannot simply fulfil ``order``, in one of the
    PAYABLE_STATUSES (empty: it fulfils it). ``paid_elsewhere``: the payment already
    fulfilled another order. Renewals and upgrades have more to check, under their
    licenses' locks (license_changes.change_problems)."""
    problems = confirmation_problems(order, confirmation)
    if order.provider != provider:
        problems.append(f"order was placed with {order.provider}")
    if order.status != "pending":
        problems.append(f"order was {order.status} when the payment arrived")
    if paid_elsewhere:
        problems.append(f"payment {confirmation.payment_reference} already fulfilled another order")
    return problems


# --- what a fulfilment creates ---------------------------------------------------------------
# One definition for both paths: fulfil_order (one order, through the ORM) and the queue
# worker's batch (services/payments/fulfil_batch.py, many orders in executemany statements).


def fulfilment_values(
    order: Order,
    *,
    provider: str,
    payment_reference: str,
    now: dt.datetime,
    payment_event_id: int | None = None,
    confirmed_amount: int | None = None,
    confirmed_currency: str | None = None,
    manual: bool = False,
    admin_id: int | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """The columns of the fulfilment gate row (unique per order and per payment)."""
    return {
        "order_id": order.id,
        "provider": provider,
        "payment_reference": payment_reference,
        "payment_event_id": payment_event_id,
        "manual": manual,
        "admin_id": admin_id,
        "reason": reason,
        "confirmed_amount": confirmed_amount,
        "confirmed_currency": confirmed_currency,
        "created_at": now,
    }


def mark_paid(order: Order, payment_reference: str, now: dt.datetime) -> None:
    move(order, "paid")
    order.paid_at = now
    order.payment_reference = payment_reference


def granted_items(order: Order) -> list[OrderItem]:
    """The items that get an entitlement: all but renewals (a renewal gives the license
    more time, nothing new)."""
    return [item for item in order.items if item.kind != "renewal"]


def issues_license(item: OrderItem) -> bool:
    """A purchase of a licensed product issues a license (an upgrade moves one:
    license_changes)."""
    return item.kind == "purchase" and item.product.licensed


def entitlement_values(order: Order, item: OrderItem) -> dict[str, Any]:
    return {
        "order_item_id": item.id,
        "user_id": order.user_id,
        "product_id": item.product_id,
        "status": "active",
    }


def _rate(order: Order) -> str | None:
    details = order.tax_details
    return details.get("rate") if isinstance(details, dict) else None


def invoice_values(
    order: Order, sequence: int, now: dt.datetime, seller: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The columns of the order's invoice, number ``sequence`` of this year; ``seller``:
    the seller's identity as it is now (invoice_pdf.freeze_seller), kept on the invoice
    so a later change in the console changes no issued invoice."""
    return {
        "number": invoice_number(now.year, sequence),
        "year": now.year,
        "sequence": sequence,
        "order_id": order.id,
        "user_id": order.user_id,
        "issued_at": now,
        "currency": order.currency,
        "total": order.total,
        "lines": invoice_lines(order.items, _rate(order)),
        "seller": seller,
        "tax": tax_checkout.invoice_tax(order),
    }


# --- fulfilment ----------------------------------------------------------------------------


def take_invoice_numbers(
    session: Session, year: int, count: int = 1, counter: type = InvoiceCounter
) -> int:
    """The first of ``count`` consecutive gap-free sequences of ``year``, taken in one
    statement: the counter row is created or incremented (and so locked until this
    transaction ends: a rollback gives the numbers back). ``counter``: the series'
    counter table (invoices; credit notes have their own)."""
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    last = session.execute(
        insert(counter)
        .values(year=year, last_sequence=count)
        .on_conflict_do_update(
            index_elements=[counter.year],
            set_={"last_sequence": counter.last_sequence + count},
        )
        .returning(counter.last_sequence)
    ).scalar_one()
    return last - count + 1


def invoice_number(year: int, sequence: int) -> str:
    return f"INV-{year}-{sequence:06d}"


def next_invoice_number(session: Session, year: int) -> tuple[int, str]:
    """The next gap-free number of ``year`` (see take_invoice_numbers)."""
    sequence = take_invoice_numbers(session, year)
    return sequence, invoice_number(year, sequence)


def write_invoice(session: Session, order: Order, settings: Mapping[str, Any]) -> Invoice:
    """The order's invoice (called once, right after the fulfilment gate row was
    inserted: none can exist yet, and invoices.order_id is unique should one)."""
    now = utcnow()
    seller = invoice_pdf.freeze_seller(session, settings)  # read before the counter locks
    sequence = take_invoice_numbers(session, now.year)
    invoice = Invoice(**invoice_values(order, sequence, now, seller))
    session.add(invoice)
    return invoice


def grant_items(session: Session, order: Order) -> None:
    """One active entitlement per item, one license per purchased item of a licensed
    product (right after the gate row, like the invoice; both tables are unique per
    item). A renewal grants nothing new (the license gets more time); an upgrade grants
    the new product's downloads and moves its license (license_changes)."""
    for item in granted_items(order):
        session.add(Entitlement(**entitlement_values(order, item)))
        if issues_license(item):
            issue_license(session, item, order.user_id)


def fulfil_order(
    session: Session,
    order: Order,
    *,
    settings: Mapping[str, Any],
    provider: str,
    payment_reference: str,
    payment_event_id: int | None = None,
    confirmed_amount: int | None = None,
    confirmed_currency: str | None = None,
    manual: bool = False,
    admin_id: int | None = None,
    reason: str | None = None,
    renews_until: dt.datetime | None = None,
) -> Fulfilment:
    """Mark a locked order paid and deliver it: the fulfilment gate row first (its unique
    constraints stop a second delivery), then entitlements, licenses, the invoice and the
    buyer's receipt (queued in this transaction: it exists exactly when the fulfilment
    commits; ``settings`` give its links and the shop's name).

    The invoice comes last on purpose: numbering locks the year's counter row until the
    transaction ends, and every fulfilment in the shop queues on that lock, so it is
    taken as close to the commit as possible. The receipt shows the invoice number, so
    it can only be written after it: everything it says is read before the number is
    taken, leaving rendering two small templates (~50 µs) and one insert inside the lock.

    ``renews_until``: the expiry a subscription's renewal order gives its license (the
    provider's period, services/subscriptions) instead of one product duration more."""
    now = utcnow()
    fulfilment = Fulfilment(
        **fulfilment_values(
            order,
            provider=provider,
            payment_reference=payment_reference,
            now=now,
            payment_event_id=payment_event_id,
            confirmed_amount=confirmed_amount,
            confirmed_currency=confirmed_currency,
            manual=manual,
            admin_id=admin_id,
            reason=reason,
        )
    )
    session.add(fulfilment)
    session.flush()
    mark_paid(order, payment_reference, now)
    if order.coupon_code:
        redeem_redemptions(session, [order.id], now)
    grant_items(session, order)
    license_changes.apply_license_changes(session, order, settings, renews_until=renews_until)
    session.flush()
    subject, data = payloads.order_event(session, order)
    emit_event(session, "order.paid", subject=subject, data=data)
    receipt = prepare_receipt(session, order)
    invoice = write_invoice(session, order, settings)
    queue_receipt(session, settings, receipt, invoice.number)
    return fulfilment


def fulfil_confirmed_payment(
    session: Session,
    order: Order,
    *,
    settings: Mapping[str, Any],
    provider: str,
    confirmation: Confirmation,
    payment_event_id: int | None,
) -> Result:
    """A provider-confirmed, final payment for a locked ``order``."""
    reference = confirmation.payment_reference
    existing = fulfilment_of(session, order.id)
    if existing is not None:
        same = (
            existing.payment_event_id is not None and existing.payment_event_id == payment_event_id
        )
        return Result("processed" if same else "duplicate", "already fulfilled", existing)
    if order.status not in PAYABLE_STATUSES:
        # paid/refunded/disputed/needs_review: a late "paid" event never moves an order back.
        return Result("duplicate", f"order is {order.status}")
    other = fulfilment_by_payment(session, provider, reference)
    problems = payment_problems(order, provider, confirmation, paid_elsewhere=other is not None)
    # Renewals and upgrades: the license must still allow it (this locks those licenses).
    problems.extend(license_changes.change_problems(session, order, utcnow()))
    if problems:
        # The money is there but something does not add up: hold the order for a human
        # (nothing is delivered); an admin resolves it with a refund or manual fulfilment.
        move(order, "needs_review")
        if other is None:
            order.payment_reference = reference
        return Result("needs_review", "; ".join(problems))
    tax_checkout.record_payment_country(order, confirmation.country)
    fulfilment = fulfil_order(
        session,
        order,
        settings=settings,
        provider=provider,
        payment_reference=reference,
        payment_event_id=payment_event_id,
        confirmed_amount=confirmation.amount,
        confirmed_currency=confirmation.currency,
    )
    return Result("processed", "", fulfilment)


# --- the other events ------------------------------------------------------------------------


def _set_grants(session: Session, order: Order, entitlement: str, license: str | None) -> None:
    """Entitlements of ``order`` to ``entitlement``; licenses to ``license`` (revoked ones
    stay revoked, expired ones stay expired)."""
    item_ids = [item.id for item in order.items]
    now = utcnow()
    session.execute(
        update(Entitlement)
        .where(Entitlement.order_item_id.in_(item_ids), Entitlement.status != "revoked")
        .values(status=entitlement, updated_at=now)
    )
    if license is not None:
        changed = session.scalars(
            update(License)
            .where(
                License.order_item_id.in_(item_ids),
                License.status.in_(("active", "suspended")),
            )
            .values(status=license, updated_at=now)
            .returning(License)
            .execution_options(synchronize_session="fetch")
        ).all()
        if license == "revoked":
            for row in changed:
                subject, data = payloads.license_event(session, row, orderNumber=order.number)
                emit_event(session, "license.revoked", subject=subject, data=data)


def close_order(session: Session, order: Order, status: str) -> Result:
    """pending -> failed / cancelled."""
    if order.status == status:
        return Result("duplicate", f"order is already {status}")
    if order.status != "pending":
        return Result("ignored", f"order is {order.status}")
    move(order, status)
    if order.coupon_code:  # closed unpaid: the coupon's redemption is given back
        release_redemption(session, order.id, utcnow())
    return Result("processed")


def _money_back(
    session: Session, order: Order, settings: Mapping[str, Any], reversal: str
) -> Result:
    """The order's money went back in full: refunded, its grants revoked, and what its
    renewals and upgrades did to licenses taken back (license_changes)."""
    move(order, "refunded")
    _set_grants(session, order, "revoked", "revoked")
    subject, data = payloads.order_event(session, order)
    emit_event(session, "order.refunded", subject=subject, data={**data, "reason": reversal})
    if order.coupon_code:
        # Refunded while held for review, never delivered: its coupon was never used.
        # (A delivered order's redemption is redeemed and stays so.)
        release_redemption(session, order.id, utcnow())
    held = license_changes.reverse_license_changes(session, order, settings, reversal=reversal)
    return Result("processed", "; ".join(held))


def refund(
    session: Session,
    order: Order,
    *,
    settings: Mapping[str, Any],
    amount: int | None = None,
    currency: str | None = None,
) -> Result:
    """A refund revokes only when it is full: ``amount`` (the cumulative refunded amount,
    when the provider states one) at least the order total, in the order's currency. A
    partial refund revokes nothing: the licenses the order issued or changed go to the
    admin's review list (``processed``), or, for an order without any or one already
    noted with as much, the event is ``ignored`` with the amounts."""
    if order.status == "refunded":
        return Result("duplicate", "order is already refunded")
    if amount is not None:
        if currency and currency.upper() != order.currency:
            return Result(
                "ignored", f"refund in {currency} for an order in {order.currency}; not revoked"
            )
        if amount < order.total:
            partial = f"partial refund: {amount} of {order.total}"
            if order.status in ("paid", "disputed", "needs_review") and (
                license_changes.review_partial_refund(session, order, amount)
            ):
                return Result("processed", f"{partial}; licenses held for review")
            return Result("ignored", partial)
    if "refunded" not in TRANSITIONS[order.status]:
        return Result("ignored", f"order is {order.status}")
    return _money_back(session, order, settings, "refund")


def open_dispute(session: Session, order: Order) -> Result:
    if order.status == "disputed":
        return Result("duplicate", "order is already disputed")
    if "disputed" not in TRANSITIONS[order.status]:
        return Result("ignored", f"order is {order.status}")
    move(order, "disputed")
    _set_grants(session, order, "on_hold", "suspended")
    return Result("processed")


def close_dispute(
    session: Session, order: Order, *, settings: Mapping[str, Any], won: bool
) -> Result:
    if order.status != "disputed":
        wanted = "paid" if won else "refunded"
        if order.status == wanted:
            return Result("duplicate", f"order is already {wanted}")
        return Result("ignored", f"order is {order.status}")
    if won and fulfilment_of(session, order.id) is None:
        # Disputed while held in review: it goes back there, nothing is delivered.
        move(order, "needs_review")
    elif won:
        move(order, "paid")
        _set_grants(session, order, "active", "active")
    else:
        return _money_back(session, order, settings, "chargeback")
    return Result("processed")


# --- manual fulfilment (admin) ---------------------------------------------------------------


class OrderMissing(Exception):
    pass


class AlreadyFulfilled(Exception):
    def __init__(self, existing: Fulfilment, event: PaymentEvent | None):
        super().__init__("already fulfilled")
        self.fulfilment = existing
        self.event = event


class NotFulfillable(Exception):
    pass


def manual_fulfil(
    session: Session,
    number: str,
    *,
    settings: Mapping[str, Any],
    admin_id: int,
    reason: str,
    payment_reference: str | None,
) -> tuple[Order, Fulfilment]:
    """Deliver an order an admin has seen paid. First checks whether the payment was
    already processed (AlreadyFulfilled names the fulfilment and its event), then
    fulfils exactly as a confirmed payment would, recorded with the admin and reason."""
    order_id = session.scalar(select(Order.id).where(Order.number == number))
    if order_id is None:
        raise OrderMissing(number)
    order = lock_order(session, order_id)
    existing = fulfilment_of(session, order.id)
    if existing is None and payment_reference:
        existing = fulfilment_by_payment(session, order.provider, payment_reference)
    if existing is not None:
        event = (
            session.get(PaymentEvent, existing.payment_event_id)
            if existing.payment_event_id
            else None
        )
        raise AlreadyFulfilled(existing, event)
    if order.status not in MANUALLY_FULFILLABLE:
        raise NotFulfillable(f"order {number} is {order.status}")
    refused = license_changes.change_problems(session, order, utcnow())
    if refused:
        raise NotFulfillable("; ".join(refused))
    reference = payment_reference or order.payment_reference or f"manual-{order.number}"
    if fulfilment_by_payment(session, order.provider, reference) is not None:
        reference = f"manual-{order.number}"
    if order.status in ("failed", "cancelled"):
        move(order, "needs_review")  # the only way forward from a closed order
    return order, fulfil_order(
        session,
        order,
        settings=settings,
        provider=order.provider,
        payment_reference=reference,
        manual=True,
        admin_id=admin_id,
        reason=reason,
    )
