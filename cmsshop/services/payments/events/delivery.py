"""One webhook delivery, steps 1-5 of the package docstring, and the state machine's
answer to an interpreted event."""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.db import own_transaction
from cmsshop.models import Fulfilment, Order
from cmsshop.services.payments import base as pb
from cmsshop.services.payments import fulfilment, refund_mail, refunds
from cmsshop.services.payments.events.errors import (
    CaptureFailed,
    ConfirmFailed,
    DeliveryError,
    DeliveryRejected,
    DeliveryResult,
    OrderNotFound,
    OrderRef,
    PaymentNotFinal,
    UnprocessableEvent,
    VerificationUnavailable,
    WebhookNotConfigured,
)
from cmsshop.services.payments.events.log import (
    FINAL_STATUSES,
    FailureRecorder,
    claim,
    is_storable,
    log_event,
    record_unprocessable,
    set_outcome,
)
from cmsshop.services.payments.registry import ProviderSpec
from cmsshop.services.payments.settings import provider_config
from cmsshop.services.subscriptions import events as subscription_events
from cmsshop.services.subscriptions import parked as parked_payments
from cmsshop.services.subscriptions import refund_cancel
from cmsshop.services.tax import credit_notes

log = logging.getLogger(__name__)


def receive_delivery(
    registry, session: Session, tm, spec: ProviderSpec, headers: Mapping[str, str], raw: bytes
) -> DeliveryResult:
    """Handle one webhook delivery (see the package docstring); raise a DeliveryError.

    A DeliveryRejected is not logged here: the caller rate-limits rejected deliveries
    per address first and then logs the bounded summary (``log.record_rejected``)."""
    config = provider_config(registry, spec)
    try:
        event = spec.provider.verify(headers, raw, config)
    except pb.NotConfigured as exc:
        log.warning("%s webhook refused: %s", spec.name, exc)
        raise WebhookNotConfigured(str(exc)) from None
    except pb.ProviderUnavailable as exc:
        raise VerificationUnavailable(str(exc)) from None
    except pb.SignatureInvalid as exc:
        log.warning("%s webhook rejected: %s", spec.name, exc)
        raise DeliveryRejected(str(exc)) from None
    try:
        action = spec.provider.interpret(event)  # no I/O; a failure is retried below
    except Exception:  # noqa: BLE001 - process_event interprets again and records it
        action = None
    problem = unstorable_field(event, action)
    if problem is not None:
        log.warning("%s event unprocessable: %s", spec.name, problem)
        record_unprocessable(registry, event, headers, problem)
        raise UnprocessableEvent(problem)
    if is_queued(registry):
        # Logged (committed) before the answer; the worker confirms and acts (queue.py).
        logged, _ = log_event(registry, event, headers, queue=True)
        if logged.status in FINAL_STATUSES:
            return DeliveryResult("duplicate", logged.id, note=f"event already {logged.status}")
        return DeliveryResult("queued", logged.id)
    lookup = None
    if action is not None and action.action != pb.IGNORE:
        lookup = functools.partial(find_order, registry, spec.name, action)
    logged, ref = log_event(registry, event, headers, lookup)
    if logged.status in FINAL_STATUSES:
        return DeliveryResult("duplicate", logged.id, note=f"event already {logged.status}")
    return process_event(
        registry,
        session,
        tm,
        spec,
        event,
        logged.id,
        config,
        action=action,
        ref=ref,
        looked_up=lookup is not None,
    )


def unstorable_field(event: pb.VerifiedEvent, action: pb.EventAction | None) -> str | None:
    """Which stored or acted-on text of a verified event no database can hold, if any.
    Other fields of the payload do not matter: the body is stored as (valid) text."""
    fields = {"event id": event.event_id, "event type": event.event_type}
    if action is not None:
        fields.update(
            {
                "order number": action.order_number,
                "payment reference": action.payment_reference,
                "provider object id": action.provider_object_id,
                "currency": action.currency,
                "reason": action.reason,
            }
        )
    for name, value in fields.items():
        if isinstance(value, str) and not is_storable(value):
            return f"the {name} contains NUL or a lone surrogate"
    return None


def process_event(
    registry,
    session: Session,
    tm,
    spec: ProviderSpec,
    event: pb.VerifiedEvent,
    row_id: int,
    config: Mapping[str, Any],
    *,
    action: pb.EventAction | None = None,
    ref: OrderRef | None = None,
    looked_up: bool = False,
) -> DeliveryResult:
    """Steps 3-5 for a logged, verified event, in ``session`` joined to ``tm``
    (``action``/``ref``: already interpreted / the order already looked up)."""
    recorder = FailureRecorder(registry, row_id)
    recorder.attach(tm.get())
    try:
        if action is None:
            action = spec.provider.interpret(event)
            looked_up = False
        target = _Target(registry, spec, row_id, config)
        result = _act(target, session, action, ref, looked_up)
        # A refund that ended a subscription: cancelled at the provider once committed.
        hook = refund_cancel.after_commit(registry, spec, session)
        if hook is not None:
            tm.get().addAfterCommitHook(hook)
        return result
    except DeliveryError as exc:
        recorder.fail(exc.event_status, str(exc), action.order_number if action else None)
        raise
    except Exception as exc:
        recorder.fail(
            "error", f"{type(exc).__name__}: {exc}", action.order_number if action else None
        )
        raise


def find_order(
    registry, provider: str, action: pb.EventAction, session: Session | None = None
) -> OrderRef | None:
    """The order an event is about: by our number, else the provider's checkout object,
    else the payment reference (refunds and disputes). A read in ``session`` or, without
    one, in a short transaction of its own."""
    if session is None:
        with own_transaction(registry) as own:
            return find_order(registry, provider, action, own)
    order = None
    if action.order_number:
        order = session.scalar(select(Order).where(Order.number == action.order_number[:64]))
    if order is None and action.provider_object_id:
        order = session.scalar(
            select(Order).where(
                Order.provider == provider,
                Order.provider_checkout_id == action.provider_object_id,
            )
        )
    if order is None and action.payment_reference:
        order = session.scalar(
            select(Order)
            .join(Fulfilment, Fulfilment.order_id == Order.id)
            .where(
                Fulfilment.provider == provider,
                Fulfilment.payment_reference == action.payment_reference,
            )
        ) or session.scalar(
            select(Order).where(
                Order.provider == provider,
                Order.payment_reference == action.payment_reference,
            )
        )
    if order is None:
        return None
    fulfilled = fulfilment.fulfilment_of(session, order.id) is not None
    return OrderRef(
        order.id, order.number, order.status, fulfilled, order.provider, order.provider_checkout_id
    )


def is_queued(registry) -> bool:
    """Deliveries are logged and answered at once; the worker acts on them."""
    return registry.settings.get("cmsshop.payments.webhook_processing") == "queued"


def trusts_verified_events(registry) -> bool:
    return bool(registry.settings.get("cmsshop.payments.trust_verified_events"))


def confirm_payment(
    registry, spec: ProviderSpec, action: pb.EventAction, config: Mapping[str, Any]
) -> pb.Confirmation:
    """The provider API's account of the payment, or the verified event's own when the
    operator trusts verified events (development; production refuses that setting)."""
    if trusts_verified_events(registry):
        return pb.Confirmation(
            final=True,
            amount=action.amount if action.amount is not None else -1,
            currency=action.currency or "",
            order_number=action.order_number,
            payment_reference=action.payment_reference or action.provider_object_id or "",
        )
    try:
        confirmation = spec.provider.confirm(action, config)
    except (pb.ProviderUnavailable, pb.NotConfigured) as exc:
        raise ConfirmFailed(f"could not confirm with {spec.name}: {exc}") from None
    if not confirmation.final:
        raise PaymentNotFinal(f"{spec.name} does not report the payment as complete")
    if not confirmation.payment_reference:
        raise ConfirmFailed(f"{spec.name} reported no payment reference")
    return confirmation


EVENT_STATUS_OF_RESULT = {
    "processed": "processed",
    "needs_review": "processed",
    "duplicate": "duplicate",
    "ignored": "ignored",
}


@dataclasses.dataclass(frozen=True)
class _Target:
    """The logged event being acted on: its provider, its row and the provider config."""

    registry: Any
    spec: ProviderSpec
    row_id: int
    config: Mapping[str, Any]


def _settle(
    session: Session, row_id: int, status: str, number: str | None, note: str
) -> DeliveryResult:
    """Claim the event row (the business transaction's first write, unless the order
    lock came after an earlier claim) and write its outcome with the business rows."""
    claim(session, row_id)
    set_outcome(session, row_id, EVENT_STATUS_OF_RESULT[status], number, note)
    session.flush()
    return DeliveryResult(status, row_id, number, note)


def _act(
    target: _Target,
    session: Session,
    action: pb.EventAction,
    ref: OrderRef | None = None,
    looked_up: bool = False,
) -> DeliveryResult:
    registry, spec, row_id, config = target.registry, target.spec, target.row_id, target.config
    if action.action == pb.IGNORE:
        return _settle(session, row_id, "ignored", action.order_number, action.reason)
    if action.action in (pb.PERIOD_PAID, pb.SUBSCRIPTION_SYNC):
        return _subscription_event(target, session, action)
    if not looked_up:
        ref = find_order(registry, spec.name, action)
    if ref is None:
        named = action.order_number or action.payment_reference or action.provider_object_id
        raise OrderNotFound(f"no order matches {named!r} yet")
    if action.action == pb.CAPTURE:
        return _capture(target, session, action, ref)
    confirmation = None
    if (
        action.action == pb.FULFIL
        and not ref.fulfilled
        and ref.status
        in (
            "pending",
            "failed",
            "cancelled",
        )
    ):
        confirmation = confirm_payment(registry, spec, action, config)
    claim(session, row_id)
    order = fulfilment.lock_order(session, ref.id)
    result = apply_action(
        session, spec.name, order, action, confirmation, row_id, settings=registry.settings
    )
    note = result.note
    if result.status == "needs_review":
        note = f"needs review: {note}"
        log.warning("order %s needs review: %s", order.number, result.note)
    return _settle(session, row_id, result.status, order.number, note)


def _subscription_event(
    target: _Target, session: Session, action: pb.EventAction
) -> DeliveryResult:
    """PERIOD_PAID / SUBSCRIPTION_SYNC: the provider is asked first (no claim, no lock
    held while waiting on the network), then services/subscriptions applies its account."""
    spec = target.spec
    if not getattr(spec.provider, "sells_subscriptions", False):
        note = f"{spec.name} sells no subscriptions"
        return _settle(session, target.row_id, "ignored", action.order_number, note)
    try:
        if parked_payments.names_no_subscription(spec.provider, action):
            facts = parked_payments.match_payment(
                target.registry, spec.provider, action, target.config
            )
        else:
            facts = subscription_events.fetch_facts(spec.provider, action, target.config)
    except (pb.ProviderUnavailable, pb.NotConfigured) as exc:
        raise ConfirmFailed(f"could not fetch the subscription from {spec.name}: {exc}") from None
    claim(session, target.row_id)
    if facts is None:
        # Stored with the event's outcome, in one transaction: "ignored" is answered
        # only once the payment is kept for the reconciliation.
        note = parked_payments.park(session, spec.name, action, target.row_id)
        log.warning("%s payment %s parked: no subscription matches", spec.name, action.invoice_ref)
        return _settle(session, target.row_id, "ignored", action.order_number, note)
    outcome = subscription_events.apply_facts(
        session, target.registry.settings, spec.name, action, facts, target.row_id
    )
    note = outcome.note
    if outcome.status == "needs_review":
        note = f"needs review: {note}"
        log.warning("subscription order %s needs review: %s", outcome.order_number, outcome.note)
    return _settle(session, target.row_id, outcome.status, outcome.order_number, note)


def _capture(
    target: _Target, session: Session, action: pb.EventAction, ref: OrderRef
) -> DeliveryResult:
    """CAPTURE: ask the provider to take the money for a pending order. The provider
    call happens before this transaction's first statement (no event claim, no order
    lock, no SQLite write lock held while waiting on the network); it must be idempotent,
    because two concurrent deliveries of the same approval can both get here. The order
    is not touched: the provider's "payment completed" event fulfils it."""
    registry, spec, config = target.registry, target.spec, target.config
    status, note = "processed", ""
    capture = getattr(spec.provider, "capture", None)
    problem = None
    if ref.status != "pending" or ref.fulfilled:
        problem = f"order is {ref.status}; not captured"
    elif ref.provider != spec.name:
        problem = f"order was placed with {ref.provider}; not captured"
    elif ref.checkout_id and action.provider_object_id != ref.checkout_id:
        problem = f"{action.provider_object_id} is not the order's checkout {ref.checkout_id}"
    elif capture is None:
        problem = f"{spec.name} has no capture step"
    if problem is not None:
        status, note = "ignored", problem
    else:
        try:
            capture(action, config)
            note = f"capture of {action.provider_object_id} requested"
        except pb.NotConfigured as exc:
            if not trusts_verified_events(registry):
                raise CaptureFailed(f"could not capture with {spec.name}: {exc}") from None
            # Development without API credentials: the simulated payment stands in.
            status, note = "ignored", f"not captured: {exc}"
        except pb.ProviderUnavailable as exc:
            raise CaptureFailed(f"could not capture with {spec.name}: {exc}") from None
    log.info("%s %s for order %s: %s", spec.name, status, ref.number, note)
    return _settle(session, target.row_id, status, ref.number, note)


def apply_action(
    session: Session,
    provider: str,
    order,
    action: pb.EventAction,
    confirmation: pb.Confirmation | None,
    row_id: int | None,
    *,
    settings: Mapping[str, Any],
) -> fulfilment.Result:
    """The state machine's answer to ``action`` for a locked ``order``."""
    kind = action.action
    if kind == pb.FULFIL:
        if confirmation is None:
            # The order was already past pending when we looked: nothing to confirm.
            existing = fulfilment.fulfilment_of(session, order.id)
            same = existing is not None and existing.payment_event_id == row_id
            return fulfilment.Result(
                "processed" if same else "duplicate", f"order is {order.status}"
            )
        return fulfilment.fulfil_confirmed_payment(
            session,
            order,
            settings=settings,
            provider=provider,
            confirmation=confirmation,
            payment_event_id=row_id,
        )
    if kind == pb.FAIL:
        return fulfilment.close_order(session, order, "failed")
    if kind == pb.CANCEL:
        return fulfilment.close_order(session, order, "cancelled")
    if kind == pb.REFUND:
        before = order.status
        result = fulfilment.refund(
            session, order, settings=settings, amount=action.amount, currency=action.currency
        )
        if result.status == "processed" and order.status == "refunded":
            refund_cancel.note_refunded(session, order)
        # The console's refund rows (services/payments/refunds.py): matched and marked
        # succeeded, once; a refund made at the provider gets its row.
        confirmed = refunds.record_provider_refund(
            session, provider, order, action, event_id=None if row_id is None else str(row_id)
        )
        # Each confirmed refund corrects the invoice with a credit note, once.
        credit_notes.issue_for_refunds(session, order, confirmed)
        # The buyer is told, in this transaction, once per refund (refund_mail).
        refund_mail.queue_refund_mail(
            session, settings, order, action, provider=provider, status_before=before,
            result_status=result.status, event_row_id=row_id,
        )  # fmt: skip
        return result
    if kind == pb.DISPUTE_OPENED:
        return fulfilment.open_dispute(session, order)
    if kind in (pb.DISPUTE_WON, pb.DISPUTE_LOST):
        result = fulfilment.close_dispute(
            session, order, settings=settings, won=kind == pb.DISPUTE_WON
        )
        if kind == pb.DISPUTE_LOST and result.status == "processed":
            credit_notes.issue_for_chargeback(session, order)
            refund_cancel.note_refunded(session, order)
        return result
    return fulfilment.Result("ignored", f"unknown action {kind!r}")
