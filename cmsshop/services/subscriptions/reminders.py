"""Reminders before a long subscription renews itself: one pass (``cmsshop-admin <ini>
remind-renewals``) queues ``subscription_renewing`` for every subscription that renews
within the next days and is billed every three months or less often: when and how
much, how to cancel before, and, when the card on file expires before that day, that it
must be replaced (the provider is asked for the card's expiry, outside any transaction).

A monthly subscription gets none: a notice every month is noise, and the laws that ask
for one (automatic renewal laws) ask it for longer terms. Idempotent per subscription
and renewal date (the dedupe key names both): a second pass queues nothing more, and
the next renewal gets its own reminder.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select

from cmsshop.db import own_transaction
from cmsshop.models import (
    Currency,
    License,
    Product,
    Subscription,
    SubscriptionPeriod,
    SubscriptionPlan,
    User,
)
from cmsshop.services.mail.outbox import enqueue
from cmsshop.services.payments import base as pb
from cmsshop.services.payments.registry import PaymentProviders
from cmsshop.services.payments.settings import provider_config
from cmsshop.services.store.currencies import format_amount
from cmsshop.services.subscriptions import plans
from cmsshop.util import utcnow

REMINDER_DAYS_SETTING = "cmsshop.subscription_reminder_days"
DEFAULT_REMINDER_DAYS = 14
MAIL = "subscription_renewing"
# Billed this many days apart or more: a reminder before each renewal.
LONG_CYCLE_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
LONG_CYCLE = 89


def reminder_days(settings: Mapping[str, Any]) -> int:
    return int(str(settings.get(REMINDER_DAYS_SETTING, DEFAULT_REMINDER_DAYS)).strip())


def is_long(plan: SubscriptionPlan | None) -> bool:
    return plan is not None and LONG_CYCLE_DAYS[plan.interval] * plan.interval_count >= LONG_CYCLE


@dataclasses.dataclass(frozen=True)
class Due:
    subscription_id: int
    provider: str
    provider_ref: str
    renews_at: dt.datetime


def due_reminders(registry, days: int, now: dt.datetime) -> list[Due]:
    """Live, renewing subscriptions of a long cycle whose next charge is within ``days``."""
    with own_transaction(registry) as session:
        rows = session.execute(
            select(Subscription, SubscriptionPlan)
            .join(SubscriptionPlan, SubscriptionPlan.id == Subscription.plan_id)
            .where(
                Subscription.status.in_(("active", "trialing")),
                Subscription.current_period_end > now,
                Subscription.current_period_end <= now + dt.timedelta(days=days),
            )
            .order_by(Subscription.current_period_end, Subscription.id)
        ).all()
        return [
            Due(s.id, s.provider, s.provider_subscription_id, s.current_period_end)
            for s, plan in rows
            if is_long(plan)
        ]


def card_expiry(registry, providers: PaymentProviders, due: Due) -> tuple[int, int] | None:
    spec = providers.get(due.provider)
    if spec is None or not hasattr(spec.provider, "card_expiry"):
        return None
    try:
        return spec.provider.card_expiry(due.provider_ref, provider_config(registry, spec))
    except (pb.ProviderUnavailable, pb.NotConfigured):
        return None  # the reminder still goes; the card is not mentioned


def expires_before(expiry: tuple[int, int] | None, day: dt.datetime) -> bool:
    """A card is good through the last day of its expiry month."""
    if expiry is None:
        return False
    month, year = expiry
    return (year, month) < (day.year, day.month)


def queue_renewal_reminders(
    registry, providers: PaymentProviders, *, days: int, now: dt.datetime | None = None
) -> int:
    """One pass; how many reminders were new."""
    if days < 1:
        raise ValueError("days must be at least 1")
    now = now or utcnow()
    settings = registry.settings
    queued = 0
    for due in due_reminders(registry, days, now):
        expiry = card_expiry(registry, providers, due)
        with own_transaction(registry) as session:
            queued += queue_one(session, settings, due, expiry)
    return queued


def _money(session, subscription: Subscription, period: SubscriptionPeriod) -> str:
    """What the renewal charges (plans.next_charge_amount), as the buyer reads it."""
    amount = plans.next_charge_amount(session, subscription, period)
    currency = session.get(Currency, period.currency)
    if currency is None:
        return f"{amount} {period.currency}"
    return format_amount(amount, currency.symbol, currency.decimals)


def queue_one(session, settings: Mapping[str, Any], due: Due, expiry) -> bool:
    subscription = session.get(Subscription, due.subscription_id)
    user = session.get(User, subscription.user_id)
    license = session.get(License, subscription.license_id) if subscription.license_id else None
    product = session.get(Product, license.product_id) if license is not None else None
    last = session.scalar(
        select(SubscriptionPeriod)
        .where(SubscriptionPeriod.subscription_id == subscription.id)
        .order_by(SubscriptionPeriod.period_end.desc())
        .limit(1)
    )
    name = product.name if product is not None else "your"
    base_url = settings["cmsshop.base_url"].rstrip("/")
    return enqueue(
        session,
        settings,
        kind=MAIL,
        to=user.email,
        subject=f"Your {name} subscription renews on {due.renews_at:%Y-%m-%d}",
        template=MAIL,
        context={
            "customer_name": user.name,
            "product": name,
            "renews_on": f"{due.renews_at:%Y-%m-%d}",
            # Not said at the end of a free trial (its period is of 0): nothing was
            # charged yet to say it again.
            "charge": _money(session, subscription, last)
            if last is not None and last.amount
            else None,
            "card_expires": f"{expiry[0]:02d}/{expiry[1]}"
            if expires_before(expiry, due.renews_at)
            else None,
            "subscriptions_url": f"{base_url}/account/subscriptions",
        },
        dedupe_key=f"{MAIL}:{subscription.id}:{due.renews_at:%Y-%m-%d}",
        user_id=user.id,
    )
