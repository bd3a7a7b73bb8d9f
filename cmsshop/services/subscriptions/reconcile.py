"""Comparing what is stored with what the provider holds, and repairing the drift: a
paid invoice whose events never arrived (or were given up) is recorded as its event
would have recorded it, and the subscription's status is the provider's again. A live
subscription whose first or latest paid order was refunded in full (refund_cancel) is
cancelled at the provider first, and that answer is the status taken.

Used by ``cmsshop-admin <ini> reconcile-subscriptions`` (every live subscription, or
all, then every parked payment: ``reconcile_parked``) and by the console's "Resync"
button (one). The provider is asked first, with no
transaction open; each subscription is then repaired in a short transaction of its own,
under the lock of the order that bought it, exactly as its events are applied, so a
repair racing a late event still counts every invoice once."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

from sqlalchemy import or_, select

from cmsshop.db import own_transaction, take_write_lock
from cmsshop.models import ParkedPayment, PaymentEvent, Subscription, SubscriptionPeriod
from cmsshop.services.payments import base as pb
from cmsshop.services.payments import fulfilment
from cmsshop.services.payments.events.errors import OrderNotFound, PaymentNotFinal
from cmsshop.services.payments.registry import PaymentProviders
from cmsshop.services.payments.settings import provider_config
from cmsshop.services.subscriptions import events as subscription_events
from cmsshop.services.subscriptions import lifecycle, parked, refund_cancel
from cmsshop.util import utcnow


@dataclasses.dataclass(frozen=True)
class Report:
    """What one reconciliation did: each change in a line, or why it could not run."""

    subscription_id: int
    provider_ref: str
    changes: list[str]
    error: str | None = None


def reconcile(registry, providers: PaymentProviders, subscription_id: int) -> Report:
    """Repair one subscription from the provider's account of it."""
    with own_transaction(registry) as session:
        subscription = session.get(Subscription, subscription_id)
        provider, ref = subscription.provider, subscription.provider_subscription_id
        order_id = subscription.order_id
        owed = refund_cancel.cancel_owed(session, subscription)
    spec = providers.get(provider)
    if spec is None or not hasattr(spec.provider, "list_paid_invoices"):
        return Report(subscription_id, ref, [], f"{provider} is not enabled here")
    config = provider_config(registry, spec)
    cancelled = []
    try:
        if owed:
            state = refund_cancel.cancel_at_provider(spec, registry, ref)
            cancelled = [f"cancelled at {provider}: {owed}"]
        else:
            state = spec.provider.fetch_subscription(ref, config)
        invoices = spec.provider.list_paid_invoices(ref, config)
    except (pb.ProviderUnavailable, pb.NotConfigured) as exc:
        if owed and not cancelled:
            why = f"{provider} could not cancel it ({owed}): {exc}"
            return Report(subscription_id, ref, [], why)
        return Report(subscription_id, ref, [], f"{provider} could not be asked: {exc}")
    settings = registry.settings
    with own_transaction(registry) as session:
        take_write_lock(session)
        first = fulfilment.lock_order(session, order_id)
        recorded = set(
            session.scalars(
                select(SubscriptionPeriod.provider_invoice_id).where(
                    SubscriptionPeriod.subscription_id == subscription_id
                )
            )
        )
        changes = list(cancelled)
        if first.status == "refunded" and fulfilment.fulfilment_of(session, order_id) is None:
            # Refunded while held for review, never delivered: its invoices are the
            # refunded money, not periods to record (refund_cancel ended the rest).
            invoices = []
        # Oldest first: the first period fulfils the order that bought it, and each
        # renewal then counts from the periods before it.
        for invoice in sorted(invoices, key=lambda i: (not i.first, i.period_end)):
            if invoice.invoice_id in recorded:
                continue
            outcome = lifecycle.record_paid_invoice(
                session,
                settings,
                provider,
                first,
                invoice,
                state,
                event_created=None,
                payment_event_id=None,
            )
            changes.append(
                f"invoice {invoice.invoice_id} recorded: {outcome.status} {outcome.note}"
            )
        stored = lifecycle.find_subscription(session, provider, ref, for_update=True)
        if stored is not None:
            now = utcnow()
            note = lifecycle.apply_state(stored, state, None, now)
            expiry = lifecycle.follow_license(session, stored, settings, now)
            changes.extend(n for n in (note, expiry) if n)
    return Report(subscription_id, ref, changes)


# An ended subscription is still compared this long after it ended: a payment charged
# just before its end (a PayPal renewal moments before a cancellation) may have lost
# its event, and is recorded then.
RECENTLY_ENDED = dt.timedelta(days=31)


def reconcile_all(
    registry, providers: PaymentProviders, *, include_ended: bool = False
) -> list[Report]:
    """Every live subscription and those ended within ``RECENTLY_ENDED`` (every ended
    one with ``include_ended``), one by one."""
    with own_transaction(registry) as session:
        query = select(Subscription.id).order_by(Subscription.id)
        if not include_ended:
            query = query.where(
                or_(
                    Subscription.status != "ended",
                    Subscription.ended_at >= utcnow() - RECENTLY_ENDED,
                )
            )
        ids = list(session.scalars(query))
    return [reconcile(registry, providers, subscription_id) for subscription_id in ids]


# --- parked payments ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ParkedReport:
    """What the reconciliation did with one parked payment."""

    provider: str
    payment_id: str
    resolved: bool
    note: str


def reconcile_parked(registry, providers: PaymentProviders) -> list[ParkedReport]:
    """Every payment still parked, tried again: one recorded meanwhile (the pass over its
    subscription lists it) is marked resolved; one the provider now places in a
    subscription is recorded as its event would have been; the rest stay parked and
    are reported, each time, until a human or a later pass resolves them."""
    with own_transaction(registry) as session:
        ids = [row.id for row in parked.unresolved(session)]
    return [_retry_parked(registry, providers, parked_id) for parked_id in ids]


def _resolve(session, parked_id: int, note: str) -> None:
    row = session.get(ParkedPayment, parked_id)
    row.resolved_at, row.resolution = utcnow(), note[:500]


def _parked_action(row: ParkedPayment, event: PaymentEvent | None, spec) -> pb.EventAction:
    """The parked payment's event, interpreted again from its stored payload."""
    if event is not None:
        try:
            payload = json.loads(event.payload)
            raw = event.payload.encode()
            verified = pb.VerifiedEvent(
                event.provider, event.event_id, event.event_type, payload, raw
            )
            action = spec.provider.interpret(verified)
            if action.action == pb.PERIOD_PAID and action.invoice_ref == row.payment_id:
                return action
        except (ValueError, TypeError):
            pass
    return pb.EventAction(
        pb.PERIOD_PAID,
        invoice_ref=row.payment_id,
        payment_reference=row.payment_id,
        amount=row.amount,
        currency=row.currency,
    )


def _retry_parked(registry, providers: PaymentProviders, parked_id: int) -> ParkedReport:
    with own_transaction(registry) as session:
        row = session.get(ParkedPayment, parked_id)
        provider, payment_id = row.provider, row.payment_id
        event_id = row.payment_event_id
        recorded = parked.recorded_subscription(session, provider, payment_id)
        if recorded is not None:
            note = f"recorded as a period of subscription {recorded}"
            _resolve(session, parked_id, note)
            return ParkedReport(provider, payment_id, True, note)
        spec = providers.get(provider)
        if spec is None or not hasattr(spec.provider, "find_invoice"):
            return ParkedReport(provider, payment_id, False, f"{provider} is not enabled here")
        event = session.get(PaymentEvent, event_id) if event_id else None
        action = _parked_action(row, event, spec)
    config = provider_config(registry, spec)
    try:
        facts = parked.match_payment(registry, spec.provider, action, config)
    except (pb.ProviderUnavailable, pb.NotConfigured, PaymentNotFinal) as exc:
        return ParkedReport(provider, payment_id, False, f"still parked: {exc}")
    if facts is None:
        return ParkedReport(provider, payment_id, False, "still parked: matches no subscription")
    try:
        with own_transaction(registry) as session:
            take_write_lock(session)
            outcome = subscription_events.apply_facts(
                session, registry.settings, provider, action, facts, event_id
            )
            note = (
                f"recorded for subscription {facts.state.subscription_ref}: "
                f"{outcome.status} {outcome.note}"
            )
            _resolve(session, parked_id, note)
    except OrderNotFound as exc:
        return ParkedReport(provider, payment_id, False, f"still parked: {exc}")
    return ParkedReport(provider, payment_id, True, note)
