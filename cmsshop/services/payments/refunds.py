"""Refunds asked for in the console (or the admin API), and the provider's refund events
matched to them.

Asking (``request_refund``), like checkout places an order:

1. In a transaction of its own, the order row locked: a refund with the same
   idempotency key is answered as it stands (a double click, a retried request: the
   provider is never called twice); otherwise the refund is checked (the order paid or
   held for review, with a provider payment; an amount above zero and at most what is
   left: the total less every refund requested, pending or succeeded; a refund by line
   at most each line's amount less what was refunded of it) and recorded ``requested``,
   committed.
2. The provider's refund API is called with the idempotency key (Stripe
   ``Idempotency-Key``, PayPal ``PayPal-Request-Id``), no lock held.
3. Its answer is stored in another transaction: ``pending`` (or ``succeeded`` when the
   provider says so at once) with the provider's refund id, or ``failed`` with the
   precise error. Nothing else changes: a failed refund leaves the order as it was, and
   another request (a new key) may try again.

Downloads and licences change only when the provider's refund event arrives, through
``fulfilment.refund`` exactly as for a refund made at the provider's dashboard (a full
refund revokes, a partial one holds the licences for review). That event also marks the
refund row ``succeeded`` (``record_provider_refund``, in the event's transaction, the
order locked): matched on the provider's refund id when the event names it, else on the
cumulative refunded amount the event states; a refund made at the provider has no row
yet and gets one (``requested_by`` NULL).

A full refund of the order that bought a subscription, or of its latest paid period's
order, then cancels that subscription at the provider unless the refund asked to keep it
(``cancel_subscription=False``, stored as ``keep_subscription``):
services/subscriptions/refund_cancel.py, whose outcome the view carries
(``RefundView.subscription``). A provider that cannot cancel leaves the refund standing.

Which orders: ``paid`` (a partly refunded order stays ``paid``) and ``needs_review``
(the money was taken but not delivered: refunding it is how an admin resolves it). A
``disputed`` order is refused: its money is with the dispute (Stripe refuses a refund of
a disputed charge too); ``pending``, ``failed``, ``cancelled`` have no payment to give
back, ``refunded`` nothing left.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cmsshop.db import own_transaction, take_write_lock
from cmsshop.models import FREE_PROVIDER, Order, Refund, SubscriptionPeriod
from cmsshop.services.payments import base as pb
from cmsshop.services.payments import fulfilment
from cmsshop.services.payments.refund_api import RefundCall, RefundRefused
from cmsshop.services.payments.settings import provider_config
from cmsshop.services.subscriptions import refund_cancel
from cmsshop.util import utcnow

log = logging.getLogger(__name__)

REFUNDABLE_STATUSES = ("paid", "needs_review")
# Refunds that hold money of the order: counted against what is left.
COUNTED = ("requested", "pending", "succeeded")
MAX_REASON = 2000


class RefundInvalid(Exception):
    """A refund refused before anything was written: ``code`` (order_not_refundable,
    refund_exceeds_remaining, validation_failed), ``errors`` by field."""

    def __init__(self, code: str, message: str, errors: Mapping[str, str] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.errors = dict(errors or {"form": message})


class OrderMissing(Exception):
    pass


class RefundFailed(Exception):
    """The provider refused (``kind`` refused) or could not be reached (unavailable); the
    refund row is ``failed`` with the error, nothing else changed."""

    def __init__(self, kind: str, message: str, refund: RefundView):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.refund = refund


@dataclasses.dataclass(frozen=True)
class RefundView:
    """A refund row as committed (read in its own transaction: the request's snapshot
    may be older)."""

    id: int
    order_number: str
    amount: int
    currency: str
    lines: list[dict[str, int]] | None
    reason: str
    status: str
    provider: str
    provider_refund_id: str | None
    requested_by: int | None
    created_at: Any
    confirmed_at: Any
    error: str | None
    full: bool  # refunds what was left of the order: downloads and licences are revoked
    # What it did to the subscription a full refund ends (refund_cancel.AfterRefund), when
    # it ends one; None otherwise.
    subscription: Any = None


@dataclasses.dataclass(frozen=True)
class RefundPlan:
    """What a refund would do, checked (no writes): the confirmation page shows it."""

    order_number: str
    currency: str
    amount: int
    lines: list[dict[str, int]] | None
    remaining: int  # what was left to refund before this one
    full: bool  # this refund brings the refunded total to the order total


@dataclasses.dataclass(frozen=True)
class Refundable:
    """An order's refund situation for the console and the API."""

    order: Order
    refundable: bool
    why_not: str
    remaining: int
    # Per order item id: what is left of its amount (its lines' earlier refunds taken).
    line_remaining: dict[int, int]
    refunds: list[Refund]


def idempotency_key(order_number: str, token: str) -> str:
    """The key sent to the provider and stored (unique): SHA-256 of the order and the
    form's one-time token (or the API client's Idempotency-Key)."""
    return hashlib.sha256(f"cmsshop-refund:{order_number}:{token}".encode()).hexdigest()


def _view(row: Refund, order: Order) -> RefundView:
    return RefundView(
        id=row.id,
        order_number=order.number,
        amount=row.amount,
        currency=row.currency,
        lines=row.lines,
        reason=row.reason,
        status=row.status,
        provider=row.provider,
        provider_refund_id=row.provider_refund_id,
        requested_by=row.requested_by,
        created_at=row.created_at,
        confirmed_at=row.confirmed_at,
        error=row.error,
        full=_counted_total(row, order),
    )


def _counted_total(row: Refund, order: Order) -> bool:
    """Whether ``row`` takes the refunded total to the order total (a full refund)."""
    return row.status != "failed" and row.amount >= order.total - _others(order, row)


def _others(order: Order, row: Refund) -> int:
    session = Session.object_session(row)
    if session is None:
        return 0
    earlier = session.scalars(
        select(Refund.amount).where(
            Refund.order_id == order.id,
            Refund.id < row.id,
            Refund.status.in_(COUNTED),
        )
    )
    return sum(earlier)


def refunds_of(session: Session, order_id: int) -> list[Refund]:
    return list(
        session.scalars(select(Refund).where(Refund.order_id == order_id).order_by(Refund.id))
    )


def _line_remaining(order: Order, refunds: Sequence[Refund]) -> dict[int, int]:
    left = {item.id: item.gross for item in order.items}  # tax included
    for row in refunds:
        if row.status in COUNTED:
            for line in row.lines or []:
                if line.get("item") in left:
                    left[line["item"]] -= int(line.get("amount") or 0)
    return left


def why_not_refundable(order: Order, providers) -> str:
    """Why ``order`` cannot be refunded through its provider ("" when it can)."""
    if order.status not in REFUNDABLE_STATUSES:
        return (
            f"Order {order.number} is {order.status}: only a paid order (or one held for "
            "review) can be refunded."
        )
    if order.provider == FREE_PROVIDER or order.total <= 0:
        return f"Order {order.number} cost nothing: there is no payment to refund."
    spec = providers.get(order.provider) if providers is not None else None
    if spec is None or getattr(spec.provider, "refund", None) is None:
        return (
            f"Order {order.number} was paid with {order.provider}, which is not enabled on "
            "this site: refund it at the provider."
        )
    reference = order.payment_reference or ""
    if not reference or reference.startswith("manual-"):
        return (
            f"Order {order.number} has no provider payment on record (it was fulfilled by "
            "hand): refund it at the provider."
        )
    return ""


def refund_situation(session: Session, number: str, providers) -> Refundable:
    order = session.scalar(select(Order).where(Order.number == number))
    if order is None:
        raise OrderMissing(number)
    return _situation(session, order, providers)


def _situation(session: Session, order: Order, providers) -> Refundable:
    rows = refunds_of(session, order.id)
    remaining = order.total - sum(r.amount for r in rows if r.status in COUNTED)
    why = why_not_refundable(order, providers)
    if not why and remaining <= 0:
        why = f"Order {order.number} is refunded in full already (or refunds are under way)."
    return Refundable(
        order=order,
        refundable=not why,
        why_not=why,
        remaining=max(remaining, 0),
        line_remaining=_line_remaining(order, rows),
        refunds=rows,
    )


def plan_refund(
    session: Session,
    number: str,
    providers,
    *,
    full: bool = False,
    amount: int | None = None,
    lines: Mapping[int, int | None] | None = None,
) -> RefundPlan:
    """Check a refund (no writes): RefundInvalid says why not. Exactly one of ``full``,
    ``amount`` (minor units) or ``lines`` ({order item id: amount, or None for what is
    left of the line})."""
    order = session.scalar(select(Order).where(Order.number == number))
    if order is None:
        raise OrderMissing(number)
    return _plan(_situation(session, order, providers), full=full, amount=amount, lines=lines)


def _plan(
    situation: Refundable,
    *,
    full: bool,
    amount: int | None,
    lines: Mapping[int, int | None] | None,
) -> RefundPlan:
    order = situation.order
    if not situation.refundable:
        raise RefundInvalid("order_not_refundable", situation.why_not)
    if sum(1 for chosen in (full, amount is not None, lines is not None) if chosen) != 1:
        raise RefundInvalid(
            "validation_failed",
            "Choose a full refund, an amount, or the lines to refund.",
            {"kind": "choose a full refund, an amount, or lines"},
        )
    remaining = situation.remaining
    planned_lines = None
    if full:
        amount = remaining
    elif lines is not None:
        if not lines:
            raise RefundInvalid(
                "validation_failed", "Choose at least one line.", {"lines": "choose a line"}
            )
        planned_lines = []
        for item_id, wanted in lines.items():
            if item_id not in situation.line_remaining:
                raise RefundInvalid(
                    "validation_failed",
                    f"Item {item_id} is not a line of this order.",
                    {"lines": f"item {item_id} is not a line of this order"},
                )
            left = situation.line_remaining[item_id]
            value = left if wanted is None else wanted
            if value <= 0:
                message = (
                    "Nothing is left to refund of this line."
                    if wanted is None
                    else "An amount above zero."
                )
                raise RefundInvalid("validation_failed", message, {f"line_{item_id}": message})
            if value > left:
                message = f"At most {left} (minor units) is left of this line."
                raise RefundInvalid(
                    "refund_exceeds_remaining", message, {f"line_{item_id}": message}
                )
            planned_lines.append({"item": item_id, "amount": value})
        amount = sum(line["amount"] for line in planned_lines)
    assert amount is not None
    if amount <= 0:
        raise RefundInvalid(
            "validation_failed", "A refund is an amount above zero.", {"amount": "above zero"}
        )
    if amount > remaining:
        message = (
            f"The refund ({amount}) is more than what is left of the order ({remaining}, "
            f"in minor units of {order.currency})."
        )
        raise RefundInvalid("refund_exceeds_remaining", message, {"amount": message})
    return RefundPlan(
        order_number=order.number,
        currency=order.currency,
        amount=amount,
        lines=planned_lines,
        remaining=remaining,
        full=amount == remaining,  # what is left, all of it: the refunded total is the total
    )


def _record(
    registry,
    providers,
    number: str,
    key: str,
    *,
    full: bool,
    amount: int | None,
    lines: Mapping[int, int | None] | None,
    reason: str,
    admin_id: int | None,
    keep_subscription: bool = False,
) -> tuple[RefundView, bool, RefundCall | None]:
    """Step 1 (module doc): (the refund, whether it is new, the provider call to make)."""
    for _attempt in range(3):
        try:
            with own_transaction(registry) as session:
                take_write_lock(session)
                order_id = session.scalar(select(Order.id).where(Order.number == number))
                if order_id is None:
                    raise OrderMissing(number)
                order = fulfilment.lock_order(session, order_id)
                existing = session.scalar(select(Refund).where(Refund.idempotency_key == key))
                if existing is not None:
                    if existing.order_id != order.id:
                        raise RefundInvalid(
                            "validation_failed",
                            "This idempotency key was used for another order.",
                            {"idempotencyKey": "used for another order"},
                        )
                    return _view(existing, order), False, None
                plan = _plan(
                    _situation(session, order, providers), full=full, amount=amount, lines=lines
                )
                row = Refund(
                    order_id=order.id,
                    amount=plan.amount,
                    currency=order.currency,
                    lines=plan.lines,
                    reason=reason,
                    status="requested",
                    provider=order.provider,
                    idempotency_key=key,
                    requested_by=admin_id,
                    created_at=utcnow(),
                    keep_subscription=keep_subscription,
                )
                session.add(row)
                session.flush()
                call = RefundCall(
                    order_number=order.number,
                    payment_reference=order.payment_reference or "",
                    amount=plan.amount,
                    currency=order.currency,
                    idempotency_key=key,
                    reason=reason,
                    subscription_payment=_pays_a_period(session, order),
                )
                return _view(row, order), True, call
        except IntegrityError:  # the same key committed by a concurrent request: read it
            continue
    raise RefundInvalid("validation_failed", "The refund could not be recorded; try again.")


def _pays_a_period(session: Session, order: Order) -> bool:
    """Whether ``order`` paid for a subscription (its first period or a renewal, or a
    first payment held for review, which recorded no period): the provider refunds such
    a payment through its own API (PayPal: a sale)."""
    if order.provider_subscription_id is not None:
        return True
    return (
        session.scalar(select(SubscriptionPeriod.id).where(SubscriptionPeriod.order_id == order.id))
        is not None
    )


def _settle(
    registry, refund_id: int, *, status: str, provider_refund_id=None, error=None
) -> RefundView:
    """Step 3: the provider's answer on the row. A row its event already confirmed (the
    event can be faster than our answer) keeps ``succeeded``."""
    with own_transaction(registry) as session:
        take_write_lock(session)
        row = session.get(Refund, refund_id)
        order = fulfilment.lock_order(session, row.order_id)
        row = session.get(Refund, refund_id, populate_existing=True)
        if provider_refund_id and not row.provider_refund_id:
            row.provider_refund_id = provider_refund_id[:255]
        if row.status != "succeeded":
            row.status = status  # confirmed_at stays for the provider's event to set
        if error is not None and row.status == "failed":
            row.error = error
        session.flush()
        return _view(row, order)


def request_refund(
    registry,
    providers,
    number: str,
    *,
    token: str,
    reason: str,
    admin_id: int | None,
    full: bool = False,
    amount: int | None = None,
    lines: Mapping[int, int | None] | None = None,
    cancel_subscription: bool = True,
) -> tuple[RefundView, bool]:
    """Ask the order's provider for a refund (module doc): (the refund, whether this call
    made it). RefundInvalid before anything is written; RefundFailed when the provider
    refused or could not be reached (the row is then ``failed``); OrderMissing. Once the
    provider took it (this call or the first with the same key), a full refund cancels
    the subscription it ends (``cancel_subscription`` False: asks to keep it)."""
    key = idempotency_key(number, token)
    view, created, call = _record(
        registry,
        providers,
        number,
        key,
        full=full,
        amount=amount,
        lines=lines,
        reason=reason.strip()[:MAX_REASON],
        admin_id=admin_id,
        keep_subscription=not cancel_subscription,
    )
    if not created:
        # Sent again: a cancel the provider could not make then is tried again.
        return _with_subscription(registry, providers, view), False
    assert call is not None
    spec = providers.get(view.provider)
    try:
        answer = spec.provider.refund(call, provider_config(registry, spec))
    except RefundRefused as exc:
        failed = _settle(registry, view.id, status="failed", error=f"refused: {exc}")
        log.warning("refund of %s refused by %s: %s", number, view.provider, exc)
        raise RefundFailed("refused", str(exc), failed) from None
    except pb.NotConfigured as exc:
        failed = _settle(registry, view.id, status="failed", error=f"not configured: {exc}")
        raise RefundFailed("unavailable", str(exc), failed) from None
    except pb.ProviderUnavailable as exc:
        failed = _settle(registry, view.id, status="failed", error=f"unavailable: {exc}")
        log.warning("refund of %s: %s unavailable: %s", number, view.provider, exc)
        raise RefundFailed("unavailable", str(exc), failed) from None
    settled = _settle(registry, view.id, status=answer.status, provider_refund_id=answer.refund_id)
    log.info("refund %s of %s: %s %s", settled.id, number, answer.status, answer.refund_id)
    return _with_subscription(registry, providers, settled), True


def _with_subscription(registry, providers, view: RefundView) -> RefundView:
    """``view`` with what it did to the subscription it ends (refund_cancel), once the
    provider has taken it (a ``requested`` one is still being asked: nothing yet)."""
    if view.status not in ("pending", "succeeded"):
        return view
    after = refund_cancel.end_after_refund(registry, providers, view.order_number)
    return dataclasses.replace(view, subscription=after)


def refund_view(session: Session, number: str, refund_id: int) -> RefundView | None:
    order = session.scalar(select(Order).where(Order.number == number))
    if order is None:
        raise OrderMissing(number)
    row = session.get(Refund, refund_id)
    if row is None or row.order_id != order.id:
        return None
    return dataclasses.replace(
        _view(row, order),
        subscription=refund_cancel.after_refund_of(session, order)
        if row.status != "failed"
        else None,
    )


# --- the provider's refund event ---------------------------------------------------------


def _event_key(provider: str, what: str) -> str:
    return hashlib.sha256(f"cmsshop-provider-refund:{provider}:{what}".encode()).hexdigest()


def record_provider_refund(
    session: Session,
    provider: str,
    order: Order,
    action: pb.EventAction,
    *,
    event_id: str | None = None,
) -> list[Refund]:
    """A refund event for the locked ``order``, in the event's transaction: the matching
    refund rows marked ``succeeded`` with ``confirmed_at`` (once: a confirmed row is left
    alone), a refund made at the provider recorded. Returns the rows this event
    confirmed."""
    if action.currency and action.currency.upper() != order.currency:
        return []
    now = utcnow()
    rows = refunds_of(session, order.id)
    confirmed: list[Refund] = []
    refund_id = getattr(action, "refund_id", None)
    refund_amount = getattr(action, "refund_amount", None)

    def succeed(row: Refund) -> None:
        # Confirmed once: the provider may have said "succeeded" when asked, but only
        # its event sets confirmed_at (and the grants change with that event).
        if row.confirmed_at is None:
            row.status = "succeeded"
            row.confirmed_at = now
            row.error = None
            confirmed.append(row)

    if refund_id:
        row = next(
            (r for r in rows if r.provider == provider and r.provider_refund_id == refund_id),
            None,
        )
        if row is None:
            # Our call may not have stored the id yet (the event was faster): the oldest
            # open refund of this amount without an id is it.
            row = next(
                (
                    r
                    for r in rows
                    if r.status in COUNTED
                    and r.confirmed_at is None
                    and r.provider_refund_id is None
                    and refund_amount in (None, r.amount)
                ),
                None,
            )
            if row is not None:
                row.provider_refund_id = refund_id[:255]
        if row is not None:
            succeed(row)
        elif refund_amount and refund_amount > 0:
            row = Refund(
                order_id=order.id,
                amount=refund_amount,
                currency=order.currency,
                reason="made at the provider",
                status="requested",
                provider=provider,
                provider_refund_id=refund_id[:255],
                idempotency_key=_event_key(provider, refund_id),
                requested_by=None,
                created_at=now,
            )
            session.add(row)
            succeed(row)
        session.flush()
        return confirmed
    # No refund id: the event's cumulative refunded amount (none stated: the whole order).
    cumulative = order.total if action.amount is None else action.amount
    done = sum(r.amount for r in rows if r.confirmed_at is not None)
    for row in rows:
        if row.status in COUNTED and row.confirmed_at is None and done + row.amount <= cumulative:
            succeed(row)
            done += row.amount
    if cumulative > done:
        row = Refund(
            order_id=order.id,
            amount=cumulative - done,
            currency=order.currency,
            reason="made at the provider",
            status="requested",
            provider=provider,
            idempotency_key=_event_key(provider, f"event:{event_id or cumulative}"),
            requested_by=None,
            created_at=now,
        )
        session.add(row)
        succeed(row)
    session.flush()
    return confirmed
