"""A refund that takes a subscription's license back cancels the subscription at the
provider, so nothing more is charged.

The rule (docs/subscriptions.md, "Refunds"): the money of the order that bought the
subscription, or of the order of its latest paid period, going back in full ends the
subscription at the provider at once (the card provider: ``DELETE
/v1/subscriptions/{id}``; the wallet provider: PayPal's cancel). A partial refund does
not, nor the refund of an earlier period (a later one was paid for since). A refund asked
in the console may opt out (``cancelSubscription: false``, kept on its row as
``keep_subscription``): the subscription then goes on billing.

When:

* a refund asked in the console (``end_after_refund``), right after the provider took
  the refund (pending or done): the provider is asked to cancel with no transaction
  open, and its answer is applied as a customer's cancellation is
  (``lifecycle.apply_answer``: the status, then the license following it);
* a refund or a lost dispute made at the provider: its event moves the order to
  ``refunded`` and notes the subscription (``note_refunded``, in the event's
  transaction); once that transaction has committed, the provider is asked the same way
  (``after_commit``): no provider call is made while the event's locks are held;
* the reconciliation (``reconcile``, and the console's Resync) finds any subscription
  still live while its first or latest order is refunded in full (``cancel_owed``) and
  cancels it the same way.

An order whose first payment is held for review has no subscription row (nothing was
delivered), yet the provider bills its subscription: its full refund makes that row
from the subscription kept on the order (``lifecycle.held_subscription``), live, and
then ends it as above, so the reconciliation finishes what a provider that could not be
reached left.

A provider that cannot be reached leaves the refund as it stands (it was taken) and the
subscription live; the console's answer and the refund's page say so, the log warns, and
the refund's event (when it arrives after), the reconciliation or the same refund request
sent again finishes it. Cancelling is
idempotent at both providers, and an ended subscription is never asked about again.
"""

from __future__ import annotations

import dataclasses
import logging

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cmsshop.db import own_transaction
from cmsshop.models import Order, Refund, Subscription, SubscriptionPeriod
from cmsshop.services.payments import base as pb
from cmsshop.services.payments import fulfilment
from cmsshop.services.payments.settings import provider_config
from cmsshop.services.subscriptions import lifecycle

log = logging.getLogger(__name__)

# Refunds that hold money of the order (services/payments/refunds.COUNTED).
_COUNTED = ("requested", "pending", "succeeded")


@dataclasses.dataclass(frozen=True)
class AfterRefund:
    """What a full refund of an order did to the subscription it ends."""

    subscription_id: int
    provider_subscription_id: str
    status: str  # ours, once this step is done
    kept: bool  # the refund asked to keep it running
    error: str | None = None  # why the provider could not cancel it now

    @property
    def cancelled(self) -> bool:
        return self.status == "ended"


def subscription_ended_by(session: Session, order: Order) -> Subscription | None:
    """The subscription whose first order or latest paid period's order is ``order``
    (None: the order's refund ends no subscription)."""
    found = session.scalar(select(Subscription).where(Subscription.order_id == order.id))
    if found is not None:
        return found
    period = session.scalar(
        select(SubscriptionPeriod).where(SubscriptionPeriod.order_id == order.id)
    )
    if period is None:
        return None
    latest = session.scalar(
        select(func.max(SubscriptionPeriod.period_end)).where(
            SubscriptionPeriod.subscription_id == period.subscription_id
        )
    )
    if period.period_end != latest:
        return None
    return session.get(Subscription, period.subscription_id)


def _kept(session: Session, order_id: int) -> bool:
    return (
        session.scalar(
            select(Refund.id).where(
                Refund.order_id == order_id,
                Refund.keep_subscription.is_(True),
                Refund.status.in_(_COUNTED),
            )
        )
        is not None
    )


def _refunded_in_full(session: Session, order: Order) -> bool:
    """The order's money is going back in full: refunded (the provider's event came),
    or what the refunds asked add up to its total."""
    if order.status == "refunded":
        return True
    asked = session.scalar(
        select(func.coalesce(func.sum(Refund.amount), 0)).where(
            Refund.order_id == order.id, Refund.status.in_(_COUNTED)
        )
    )
    return order.total > 0 and asked >= order.total


def cancel_owed(session: Session, subscription: Subscription) -> str | None:
    """Why ``subscription`` must still be cancelled at the provider (None: it need not):
    it is live, and the order that bought it or its latest paid period's order is
    refunded in full (or lost a dispute) without asking to keep it."""
    if subscription.status == "ended":
        return None
    orders = [subscription.order_id]
    latest = session.scalar(
        select(SubscriptionPeriod.order_id)
        .where(SubscriptionPeriod.subscription_id == subscription.id)
        .order_by(SubscriptionPeriod.period_end.desc(), SubscriptionPeriod.id.desc())
        .limit(1)
    )
    if latest is not None and latest != subscription.order_id:
        orders.append(latest)
    for order_id in orders:
        order = session.get(Order, order_id)
        if _refunded_in_full(session, order) and not _kept(session, order_id):
            return f"order {order.number} is refunded in full"
    return None


# session.info key: the subscriptions an event's refund ended, to cancel after its commit.
OWED = "cmsshop.subscriptions_to_cancel"


def note_refunded(session: Session, order: Order) -> None:
    """``order`` (locked) had its money go back in full in this transaction (a refund's
    or a lost dispute's event): note the live subscription it ends, unless a refund of the
    order asked to keep it, for ``after_commit`` (an order held for review: its
    subscription made a row first)."""
    if _kept(session, order.id):
        return
    subscription = subscription_ended_by(session, order) or lifecycle.held_subscription(
        session, order
    )
    if subscription is not None and subscription.status != "ended":
        session.info.setdefault(OWED, set()).add(subscription.id)


def after_commit(registry, spec, session: Session):
    """The after-commit hook cancelling what ``note_refunded`` noted in ``session``'s
    transaction (None when nothing was). A failure is logged; the reconciliation
    finishes it."""
    noted = session.info.pop(OWED, None)
    if not noted:
        return None

    def hook(committed: bool) -> None:
        if not committed:
            return
        for subscription_id in sorted(noted):
            try:
                cancel_if_owed(registry, spec, subscription_id)
            except Exception:  # noqa: BLE001 - a hook must not raise; reconcile finishes it
                log.warning("subscription %s: cancel after refund failed", subscription_id,
                            exc_info=True)  # fmt: skip

    return hook


def cancel_if_owed(registry, spec, subscription_id: int) -> str:
    """Cancel ``subscription_id`` at ``spec``'s provider when ``cancel_owed`` says so; a
    note of what happened."""
    with own_transaction(registry) as session:
        subscription = session.get(Subscription, subscription_id)
        owed = cancel_owed(session, subscription)
        ref = subscription.provider_subscription_id
    if owed is None:
        return "nothing owed"
    try:
        state = cancel_at_provider(spec, registry, ref)
    except (pb.ProviderUnavailable, pb.NotConfigured) as exc:
        log.warning(
            "subscription %s (%s) not cancelled after %s: %s; the reconciliation cancels it",
            subscription_id, ref, owed, exc,
        )  # fmt: skip
        return f"not cancelled: {exc}"
    apply_cancel(registry, subscription_id, state)
    log.info("subscription %s (%s) cancelled at the provider: %s", subscription_id, ref, owed)
    return "cancelled"


def cancel_at_provider(spec, registry, subscription_ref: str) -> pb.ProviderSubscription:
    """Ask the provider to end ``subscription_ref`` now (ProviderUnavailable or
    NotConfigured when it cannot)."""
    if spec is None or not hasattr(spec.provider, "cancel_subscription_now"):
        raise pb.NotConfigured("its payment provider is not enabled here")
    return spec.provider.cancel_subscription_now(subscription_ref, provider_config(registry, spec))


def end_after_refund(registry, providers, order_number: str) -> AfterRefund | None:
    """After the provider took a refund of ``order_number`` asked in the console: when
    the refunds asked add up to the order's total and the order bought a live
    subscription or paid its latest period, cancel that subscription at the provider now
    (unless a refund of the order asked to keep it). None when the refund ends no
    subscription. Never raises for the provider: a failure is the answer's ``error``."""
    with own_transaction(registry) as session:
        order = session.scalar(select(Order).where(Order.number == order_number))
        if order is None or not _refunded_in_full(session, order):
            return None
        subscription = subscription_ended_by(session, order)
        if subscription is None and not _kept(session, order.id):
            # Held for review: the subscription it bought is made a row, under the
            # order's lock (a second refund's answer finds that row).
            order = fulfilment.lock_order(session, order.id)
            subscription = lifecycle.held_subscription(session, order)
        if subscription is None:
            return None
        base = AfterRefund(
            subscription.id,
            subscription.provider_subscription_id,
            subscription.status,
            kept=_kept(session, order.id),
        )
        provider = subscription.provider
    if base.kept or base.cancelled:
        return base
    try:
        state = cancel_at_provider(
            providers.get(provider) if providers is not None else None,
            registry,
            base.provider_subscription_id,
        )
    except (pb.ProviderUnavailable, pb.NotConfigured) as exc:
        log.warning(
            "subscription %s (%s %s) not cancelled after the full refund of %s: %s; the "
            "reconciliation cancels it",
            base.subscription_id, provider, base.provider_subscription_id, order_number, exc,
        )  # fmt: skip
        return dataclasses.replace(base, error=f"{provider} could not cancel it: {exc}")
    status = apply_cancel(registry, base.subscription_id, state)
    log.info(
        "subscription %s cancelled at %s after the full refund of %s",
        base.subscription_id, provider, order_number,
    )  # fmt: skip
    return dataclasses.replace(base, status=status)


def apply_cancel(registry, subscription_id: int, state: pb.ProviderSubscription) -> str:
    """The provider's answer to the cancel, applied as a customer's change is; our
    status after it."""
    with own_transaction(registry) as session:
        subscription = session.get(Subscription, subscription_id)
        return lifecycle.apply_answer(session, registry.settings, subscription, state).status


def after_refund_of(session: Session, order: Order) -> AfterRefund | None:
    """What the refunds of ``order`` did to the subscription they end, as it stands (the
    refund's page): None when they end none (not in full, or not such an order)."""
    subscription = subscription_ended_by(session, order)
    if subscription is None or not _refunded_in_full(session, order):
        return None
    kept = _kept(session, order.id)
    error = None
    if not kept and subscription.status != "ended":
        error = "not cancelled at the provider yet"
    return AfterRefund(
        subscription.id, subscription.provider_subscription_id, subscription.status, kept, error
    )
