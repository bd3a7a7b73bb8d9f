"""The customer's subscriptions: what each costs next and when, cancelling at the period
end (a paid period is never shortened), resuming before it, and the hand-off to the
provider's own page to replace the card.

A change is asked of the provider first (nothing is written while waiting on the
network), then the provider's answer is applied as its events are (``lifecycle``), under
the lock of the order that bought the subscription; the provider's own event about the
same change arrives later and changes nothing more."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from cmsshop.errors import Conflict, NotFound, ValidationFailed
from cmsshop.models import (
    Fulfilment,
    License,
    Product,
    Subscription,
    SubscriptionPeriod,
    SubscriptionPlan,
)
from cmsshop.models.meta import MAX_ID
from cmsshop.models.subscriptions import RENEWING_STATUSES
from cmsshop.services.payments import base as pb
from cmsshop.services.payments import license_changes
from cmsshop.services.payments.registry import PaymentProviders
from cmsshop.services.payments.settings import provider_config
from cmsshop.services.subscriptions import lifecycle, plans


class ProviderRefused(Exception):
    """The provider could not make the change now; nothing changed here."""


@dataclasses.dataclass(frozen=True)
class SubscriptionCard:
    """One subscription as the customer's account shows it."""

    id: int
    provider: str
    product: str
    license_key: str | None
    status: str
    paid_through: dt.datetime | None
    # The next charge: when and how much (the last period's amount; the full price after
    # a first period a coupon discounted), while it renews.
    next_charge_at: dt.datetime | None
    next_charge_amount: int | None
    currency: str | None
    # When access ends, once it will not renew.
    ends_at: dt.datetime | None
    can_cancel: bool
    can_resume: bool
    can_update_payment: bool
    plan_choices: list = dataclasses.field(default_factory=list)  # PlanChoice


def _card(
    subscription: Subscription,
    product: str,
    key,
    last: SubscriptionPeriod | None,
    next_amount: int | None,
):
    renewing = subscription.status in RENEWING_STATUSES
    return SubscriptionCard(
        id=subscription.id,
        provider=subscription.provider,
        product=product,
        license_key=key,
        status=subscription.status,
        paid_through=subscription.paid_through,
        next_charge_at=subscription.current_period_end if renewing else None,
        # After a free trial (its period is of 0) the first charge is not recorded yet.
        next_charge_amount=next_amount if renewing and next_amount else None,
        currency=last.currency if last is not None else None,
        ends_at=None if renewing else subscription.paid_through,
        can_cancel=renewing,
        can_resume=subscription.status == "cancel_scheduled",
        can_update_payment=subscription.status != "ended"
        and subscription.provider_customer_id is not None,
    )


def customer_subscriptions(session: Session, user_id: int) -> list[SubscriptionCard]:
    """The customer's subscriptions, live ones first, newest first. Not one whose order
    was never delivered (held for review, then refunded: refund_cancel made its row to
    cancel it at the provider): the customer never had it."""
    delivered = exists().where(Fulfilment.order_id == Subscription.order_id)
    rows = session.execute(
        select(Subscription, Product.name, License.key)
        .join(License, License.id == Subscription.license_id, isouter=True)
        .join(Product, Product.id == License.product_id, isouter=True)
        .where(Subscription.user_id == user_id, delivered)
        .order_by((Subscription.status == "ended"), Subscription.id.desc())
    ).all()
    latest = _latest_periods(session, [row[0].id for row in rows])
    return [
        dataclasses.replace(
            _card(
                subscription,
                name or "",
                key,
                latest.get(subscription.id),
                _next_amount(session, subscription, latest.get(subscription.id)),
            ),
            plan_choices=plan_choices(session, subscription),
        )
        for subscription, name, key in rows
    ]


def _next_amount(session: Session, subscription: Subscription, last) -> int | None:
    return plans.next_charge_amount(session, subscription, last) if last is not None else None


def _latest_periods(session: Session, ids: list[int]) -> dict[int, SubscriptionPeriod]:
    if not ids:
        return {}
    latest: dict[int, SubscriptionPeriod] = {}
    for period in session.scalars(
        select(SubscriptionPeriod)
        .where(SubscriptionPeriod.subscription_id.in_(ids))
        .order_by(SubscriptionPeriod.period_end)
    ):
        latest[period.subscription_id] = period
    return latest


def customer_subscription(session: Session, user_id: int, subscription_id) -> Subscription:
    """The customer's own subscription ``subscription_id``; another customer's answers
    as one that does not exist."""
    found = None
    if isinstance(subscription_id, int) and 1 <= subscription_id <= MAX_ID:
        found = session.scalar(
            select(Subscription).where(
                Subscription.id == subscription_id, Subscription.user_id == user_id
            )
        )
    if found is None:
        raise NotFound("You have no such subscription.", code="subscription_not_found")
    return found


def set_cancellation(
    providers: PaymentProviders,
    registry,
    session: Session,
    settings: Mapping[str, Any],
    subscription: Subscription,
    *,
    cancel: bool,
) -> Subscription:
    """Cancel at the period end (``cancel``) or resume a scheduled cancellation. With a
    provider that cancels at once (``cancels_at_once``), cancelling ends the subscription
    there now and the period paid for is kept here; nothing can be resumed."""
    spec = providers.get(subscription.provider)
    at_once = spec is not None and getattr(spec.provider, "cancels_at_once", False)
    if not cancel and at_once and subscription.status == "ended":
        until = subscription.paid_through
        raise Conflict(
            "This subscription has ended: its payment provider ends a subscription as soon "
            "as it is cancelled and cannot take a cancellation back. What you paid for "
            "stays yours"
            + (f" until {until:%Y-%m-%d}" if until is not None else "")
            + "; subscribe again to renew after that.",
            code="subscription_not_cancelling",
        )
    if cancel and subscription.status not in RENEWING_STATUSES:
        raise Conflict(
            f"This subscription is {subscription.status.replace('_', ' ')}; it does not renew.",
            code="subscription_not_renewing",
        )
    if not cancel and subscription.status != "cancel_scheduled":
        raise Conflict("No cancellation is scheduled.", code="subscription_not_cancelling")
    if spec is None or not hasattr(spec.provider, "set_cancel_at_period_end"):
        raise Conflict(
            "This subscription cannot be changed here now.", code="subscription_provider_off"
        )
    try:
        state = spec.provider.set_cancel_at_period_end(
            subscription.provider_subscription_id, cancel, provider_config(registry, spec)
        )
    except (pb.ProviderUnavailable, pb.NotConfigured) as exc:
        raise ProviderRefused(str(exc)) from None
    return lifecycle.apply_answer(session, settings, subscription, state)


def payment_method_url(
    providers: PaymentProviders, registry, subscription: Subscription, return_url: str
) -> str:
    """Where the customer replaces the card: the provider's own page."""
    spec = providers.get(subscription.provider)
    if (
        spec is None
        or not hasattr(spec.provider, "payment_method_url")
        or subscription.status == "ended"
        or not subscription.provider_customer_id
    ):
        raise Conflict(
            "The payment method of this subscription cannot be changed here.",
            code="subscription_payment_method_unavailable",
        )
    try:
        return spec.provider.payment_method_url(
            subscription.provider_customer_id, return_url, provider_config(registry, spec)
        )
    except (pb.ProviderUnavailable, pb.NotConfigured) as exc:
        raise ProviderRefused(str(exc)) from None


# --- changing the plan ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PlanChoice:
    product: Product
    amount: int  # each cycle, for the seats the license was bought with
    currency: str


def plan_choices(session: Session, subscription: Subscription) -> list[PlanChoice]:
    """What the subscription may change to: a higher tier of its product (more seats, as
    an upgrade bought by hand), sold as a subscription on the same cycle, priced in the
    subscription's currency. A lower tier would take seats away mid-period: bought as a
    new subscription instead, once this one ends. None during a free trial: nothing was
    paid yet to prorate (``_ask_plan_change`` says so)."""
    if subscription.status != "active" or subscription.license_id is None:
        return []
    license = session.get(License, subscription.license_id)
    current = session.get(Product, license.product_id)
    plan = session.get(SubscriptionPlan, subscription.plan_id) if subscription.plan_id else None
    last = _latest_periods(session, [subscription.id]).get(subscription.id)
    if current.upgrade_group is None or plan is None or last is None:
        return []
    quantity = license_changes.purchased_quantities(session, [license])[license.id]
    found = session.execute(
        select(Product, SubscriptionPlan)
        .join(SubscriptionPlan, SubscriptionPlan.product_id == Product.id)
        .where(
            Product.upgrade_group == current.upgrade_group,
            Product.published.is_(True),
            Product.archived.is_(False),
            Product.licensed.is_(True),
            SubscriptionPlan.active.is_(True),
            SubscriptionPlan.interval == plan.interval,
            SubscriptionPlan.interval_count == plan.interval_count,
        )
        .order_by(Product.tier, Product.name)
    ).all()
    choices = []
    for product, _plan in found:
        price = next((p.amount for p in product.prices if p.currency == last.currency), None)
        if price is None or license_changes.upgrade_problem(license, current, product, quantity):
            continue
        choices.append(PlanChoice(product, price * quantity, last.currency))
    return choices


def _choice(session: Session, subscription: Subscription, slug) -> PlanChoice:
    for choice in plan_choices(session, subscription):
        if choice.product.slug == slug:
            return choice
    raise ValidationFailed({"product": "this subscription cannot change to that product"})


def _plan_price(session: Session, subscription: Subscription, choice: PlanChoice):
    plan = session.get(SubscriptionPlan, subscription.plan_id)
    return pb.PlanPrice(
        slug=choice.product.slug,
        name=choice.product.name,
        amount=choice.amount,
        currency=choice.currency,
        recurring=pb.Recurring(plan.interval, plan.interval_count),
    )


def _plan_changer(providers: PaymentProviders, subscription: Subscription):
    spec = providers.get(subscription.provider)
    if spec is None or not hasattr(spec.provider, "change_plan"):
        raise Conflict(
            "This payment provider cannot change a subscription's plan: cancel it at the "
            "end of its period and subscribe to the other plan.",
            code="subscription_plan_change_unsupported",
        )
    return spec


def _ask_plan_change(
    providers: PaymentProviders, registry, session, subscription: Subscription, slug, ask: str
):
    """(the choice, the provider's answer to ``ask``: preview_plan_change/change_plan)."""
    if subscription.status == "trialing":
        raise Conflict(
            "This subscription is in its free trial: its plan can be changed once the "
            "first period is paid, or cancel it and subscribe to the other plan.",
            code="subscription_in_trial",
        )
    choice = _choice(session, subscription, slug)
    spec = _plan_changer(providers, subscription)
    try:
        answer = getattr(spec.provider, ask)(
            subscription.provider_subscription_id,
            _plan_price(session, subscription, choice),
            provider_config(registry, spec),
        )
    except (pb.ProviderUnavailable, pb.NotConfigured) as exc:
        raise ProviderRefused(str(exc)) from None
    return choice, answer


def preview_plan_change(
    providers: PaymentProviders, registry, session: Session, subscription: Subscription, slug
) -> tuple[PlanChoice, pb.PlanPreview]:
    """What changing to ``slug`` costs now and then, as the provider reckons it."""
    return _ask_plan_change(providers, registry, session, subscription, slug, "preview_plan_change")


def change_plan(
    providers: PaymentProviders,
    registry,
    session: Session,
    settings: Mapping[str, Any],
    subscription: Subscription,
    slug,
) -> Subscription:
    """Ask the provider to move the subscription to ``slug`` now. The license moves when
    the provider's invoice for the rest of the period is paid (its event, once)."""
    _, state = _ask_plan_change(providers, registry, session, subscription, slug, "change_plan")
    return lifecycle.apply_answer(session, settings, subscription, state)
