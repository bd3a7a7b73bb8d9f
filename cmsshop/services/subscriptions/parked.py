"""Subscription payments whose event names no subscription: matched to one here, or
parked until the reconciliation can match them. Never dropped.

PayPal sends some renewal sales (``PAYMENT.SALE.COMPLETED``) without their
``billing_agreement_id``. Such a payment is matched, before anything is written, to
the subscriptions it may belong to:

1. the subscription bought by the order its custom or invoice field names (the
   order's own provider checkout, when its first payment is the one to match);
2. else each live subscription of the provider already paid this amount in this
   currency (at most ``MAX_CANDIDATES``; more is too many to ask about).

A candidate is the payment's subscription only when the provider lists the payment
among that subscription's own (``find_invoice``), so an amount alone never decides. A
payment that matches none is parked (``parked_payments``), in the same transaction as
its event's outcome: the event answers 200 ``ignored`` only once the payment is stored.
The reconciliation records it when it finds its subscription (each live subscription's
paid payments are listed there anyway) and reports what is still parked."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from cmsshop.db import own_transaction
from cmsshop.models import Order, ParkedPayment, PaymentEvent, Subscription, SubscriptionPeriod
from cmsshop.services.payments import base as pb
from cmsshop.services.payments.events.errors import PaymentNotFinal
from cmsshop.services.subscriptions.events import Facts

MAX_CANDIDATES = 10


def names_no_subscription(provider, action: pb.EventAction) -> bool:
    """A paid period whose event names no subscription, of a provider that can say
    whether a payment is a given subscription's."""
    return (
        action.action == pb.PERIOD_PAID
        and not action.subscription_ref
        and hasattr(provider, "find_invoice")
    )


def candidates(session: Session, provider: str, action: pb.EventAction) -> list[str]:
    """The provider ids of the subscriptions the payment may belong to, likeliest first."""
    refs: list[str] = []
    if action.order_number:
        found = session.execute(
            select(Subscription.provider_subscription_id, Order.provider_checkout_id)
            .outerjoin(Subscription, Subscription.order_id == Order.id)
            .where(Order.provider == provider, Order.number == action.order_number[:64])
        ).first()
        ref = (found[0] or found[1]) if found is not None else None
        if ref is not None:
            refs.append(ref)
    if action.amount is not None and action.currency:
        same_amount = list(
            session.scalars(
                select(Subscription.provider_subscription_id)
                .join(SubscriptionPeriod, SubscriptionPeriod.subscription_id == Subscription.id)
                .where(
                    Subscription.provider == provider,
                    Subscription.status != "ended",
                    SubscriptionPeriod.amount == action.amount,
                    SubscriptionPeriod.currency == action.currency,
                )
                .distinct()
                .order_by(Subscription.provider_subscription_id)
                .limit(MAX_CANDIDATES + 1)
            )
        )
        if len(same_amount) <= MAX_CANDIDATES:
            refs += [ref for ref in same_amount if ref not in refs]
    return refs


def match_payment(
    registry, provider, action: pb.EventAction, config: Mapping[str, Any]
) -> Facts | None:
    """The provider's account of the payment and of the subscription it belongs to, or
    None when no candidate is it. Reads in a short transaction of its own, then asks the
    provider with none open; raises ProviderUnavailable/NotConfigured, PaymentNotFinal."""
    with own_transaction(registry) as session:
        refs = candidates(session, provider.name, action)
    for ref in refs:
        invoice = provider.find_invoice(action.invoice_ref, ref, config)
        if invoice is None:
            continue
        if not invoice.paid:
            raise PaymentNotFinal(f"payment {invoice.invoice_id} is not paid")
        return Facts(invoice, provider.fetch_subscription(ref, config))
    return None


def park(session: Session, provider: str, action: pb.EventAction, payment_event_id: int) -> str:
    """Keep the unmatched payment (once per provider payment) in ``session``'s
    transaction; the note for the event log."""
    event = session.get(PaymentEvent, payment_event_id)
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    session.execute(
        insert(ParkedPayment)
        .values(
            provider=provider,
            event_id=event.event_id if event is not None else "",
            payment_id=(action.invoice_ref or "")[:255],
            amount=action.amount,
            currency=action.currency,
            payment_event_id=payment_event_id,
        )
        .on_conflict_do_nothing(index_elements=["provider", "payment_id"])
    )
    return (
        f"parked: payment {action.invoice_ref} names no subscription and matches none yet; "
        "the reconciliation tries it again"
    )


def unresolved(session: Session) -> list[ParkedPayment]:
    return list(
        session.scalars(
            select(ParkedPayment)
            .where(ParkedPayment.resolved_at.is_(None))
            .order_by(ParkedPayment.id)
        )
    )


def recorded_subscription(session: Session, provider: str, payment_id: str) -> int | None:
    """The subscription a period of this payment was recorded for, if any."""
    return session.scalar(
        select(SubscriptionPeriod.subscription_id).where(
            SubscriptionPeriod.provider == provider,
            SubscriptionPeriod.provider_invoice_id == payment_id,
        )
    )
