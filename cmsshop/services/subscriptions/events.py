"""A subscription event from a payment provider: fetch the provider's own account of
the invoice and the subscription (before this transaction's first write, so no lock is
held while waiting on the network), then apply it (``lifecycle``) under the lock of the
order that bought the subscription."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from cmsshop.services.payments import base as pb
from cmsshop.services.payments import fulfilment
from cmsshop.services.payments.events.errors import ConfirmFailed, OrderNotFound, PaymentNotFinal
from cmsshop.services.subscriptions import lifecycle


@dataclasses.dataclass(frozen=True)
class Facts:
    """The provider's account: the paid invoice (PERIOD_PAID) and the subscription."""

    invoice: pb.ProviderInvoice | None
    state: pb.ProviderSubscription


def fetch_facts(provider, action: pb.EventAction, config: Mapping[str, Any]) -> Facts:
    """Ask the provider; raise ProviderUnavailable/NotConfigured, ConfirmFailed or
    PaymentNotFinal (an invoice the provider does not hold as paid)."""
    if action.action == pb.PERIOD_PAID:
        if not action.invoice_ref:
            raise ConfirmFailed("the event names no invoice")
        invoice = provider.fetch_invoice(action.invoice_ref, config)
        if not invoice.paid:
            raise PaymentNotFinal(f"invoice {invoice.invoice_id} is not paid")
        return Facts(invoice, provider.fetch_subscription(invoice.subscription_ref, config))
    if not action.subscription_ref:
        raise ConfirmFailed("the event names no subscription")
    return Facts(None, provider.fetch_subscription(action.subscription_ref, config))


def apply_facts(
    session: Session,
    settings: Mapping[str, Any],
    provider: str,
    action: pb.EventAction,
    facts: Facts,
    payment_event_id: int | None,
) -> lifecycle.Outcome:
    """Apply ``facts`` in ``session`` (the event row already claimed)."""
    state = facts.state
    number = (
        (facts.invoice.order_number if facts.invoice else None)
        or state.order_number
        or action.order_number
    )
    order_id = lifecycle.first_order_id(session, provider, state.subscription_ref, number)
    if order_id is None:
        raise OrderNotFound(f"no order bought subscription {state.subscription_ref!r} yet")
    first = fulfilment.lock_order(session, order_id)
    opened = None
    if state.trial is not None:
        # A free trial with no invoice of its own (PayPal) is the first period: recorded
        # (once: the same gate as any invoice) before what the event says, whatever it is.
        opened = lifecycle.record_paid_invoice(
            session,
            settings,
            provider,
            first,
            state.trial,
            state,
            event_created=action.event_created,
            payment_event_id=payment_event_id,
        )
        if opened.status not in ("processed", "duplicate"):
            return _checked(opened)
    if facts.invoice is not None:
        outcome = lifecycle.record_paid_invoice(
            session,
            settings,
            provider,
            first,
            facts.invoice,
            state,
            event_created=action.event_created,
            payment_event_id=payment_event_id,
        )
    else:
        outcome = lifecycle.sync_state(
            session, settings, provider, first, state, event_created=action.event_created
        )
    if opened is not None and opened.status == "processed":
        status = "needs_review" if outcome.status == "needs_review" else "processed"
        notes = "; ".join(n for n in (opened.note, outcome.note) if n)
        outcome = lifecycle.Outcome(status, outcome.order_number or opened.order_number, notes)
    return _checked(outcome)


def _checked(outcome: lifecycle.Outcome) -> lifecycle.Outcome:
    if outcome.status == "pending":
        raise OrderNotFound(outcome.note)
    return outcome
