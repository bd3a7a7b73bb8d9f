"""The plans made at a provider that bills against plans created in advance (PayPal):
one per product plan, currency, amount, billing cycle, free trial and discounted first
cycle (a plan that opens with a trial, or with a first cycle a coupon discounted, is
another plan than one billing the full price from the start), made at the first
checkout that needs it and reused by every later one. ``amount`` is what every regular
cycle charges: the order's total, or after a coupon the full price (the total plus
``Recurring.first_period_discount``), the total then being ``first_amount``.

The provider is asked with no transaction open. Two first checkouts at once may both
ask: the provider's idempotency key (derived from the same key) makes that one plan,
and the row's unique key keeps one answer here either way."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite

from cmsshop.db import own_transaction
from cmsshop.models import SubscriptionProviderPlan
from cmsshop.services.payments.base import CheckoutRequest
from cmsshop.services.payments.registry import ProviderSpec
from cmsshop.services.payments.settings import provider_config


def _key(provider: str, checkout: CheckoutRequest) -> dict:
    recurring = checkout.recurring
    discounted = recurring.first_period_discount > 0
    return {
        "plan_id": recurring.plan_id,
        "provider": provider,
        "currency": checkout.currency.upper(),
        "amount": checkout.total + recurring.first_period_discount,
        "interval": recurring.interval,
        "interval_count": recurring.count,
        "trial_days": recurring.trial_days,
        "first_amount": checkout.total if discounted else 0,
    }


def _stored(session, key: dict) -> str | None:
    return session.scalar(
        select(SubscriptionProviderPlan.provider_plan_id).where(
            *(getattr(SubscriptionProviderPlan, name) == value for name, value in key.items())
        )
    )


def provider_plan_for(registry, spec: ProviderSpec, checkout: CheckoutRequest) -> str:
    """The provider's plan for ``checkout`` (a subscription's), made if there is none
    yet. Raises the provider's ProviderUnavailable / NotConfigured."""
    key = _key(spec.name, checkout)
    with own_transaction(registry) as session:
        found = _stored(session, key)
        sibling = session.scalar(
            select(SubscriptionProviderPlan.provider_plan_id)
            .where(
                SubscriptionProviderPlan.plan_id == key["plan_id"],
                SubscriptionProviderPlan.provider == spec.name,
            )
            .order_by(SubscriptionProviderPlan.id)
            .limit(1)
        )
    if found is not None:
        return found
    made = spec.provider.create_plan(checkout, provider_config(registry, spec), sibling)
    with own_transaction(registry) as session:
        dialect = session.get_bind().dialect.name
        insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
        session.execute(
            insert(SubscriptionProviderPlan)
            .values(**key, provider_plan_id=made[:255])
            .on_conflict_do_nothing()
        )
        # Another checkout may have stored its answer first: every later one uses that.
        return _stored(session, key) or made
