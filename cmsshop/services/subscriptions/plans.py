"""Which products are sold as subscriptions, and what a checkout of one may hold."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import Product, SubscriptionPlan
from cmsshop.services.payments.base import Recurring


class SubscriptionRefused(Exception):
    """A checkout that cannot be sold as a subscription; ``field`` names what to change."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field, self.message = field, message


def plans_of(session: Session, product_ids: Sequence[int]) -> dict[int, SubscriptionPlan]:
    """The active plans of ``product_ids``, by product id."""
    if not product_ids:
        return {}
    rows = session.scalars(
        select(SubscriptionPlan).where(
            SubscriptionPlan.product_id.in_(set(product_ids)),
            SubscriptionPlan.active.is_(True),
        )
    )
    return {plan.product_id: plan for plan in rows}


def recurring_of(
    session: Session,
    lines: Sequence[dict],
    *,
    coupon: bool,
    sells_subscriptions: bool,
    cycle_limits: Mapping[str, int] | None = None,
) -> Recurring | None:
    """The billing cycle of priced checkout ``lines`` when they buy a subscription (None
    for a one-off purchase). A subscription is bought on its own: the provider charges
    every line of it again each cycle, so a one-off line in the same checkout would be
    billed again, and a coupon would discount every renewal. ``cycle_limits``: the
    provider's largest count per interval, when narrower than ours (PayPal bills at
    most every 12 months)."""
    purchases = [line for line in lines if line.get("kind", "purchase") == "purchase"]
    plans = plans_of(session, [line["product_id"] for line in purchases])
    if not plans:
        return None
    if len(lines) != 1:
        raise SubscriptionRefused(
            "items", "a subscription is bought on its own: check out the other items separately"
        )
    if coupon:
        raise SubscriptionRefused("coupon", "coupons apply to one-off purchases, not subscriptions")
    if not sells_subscriptions:
        raise SubscriptionRefused(
            "provider", "this payment provider does not sell subscriptions; choose another"
        )
    if lines[0]["amount"] <= 0:
        raise SubscriptionRefused("items", "a subscription must cost something each period")
    plan = plans[lines[0]["product_id"]]
    limit = (cycle_limits or {}).get(plan.interval)
    if limit is not None and plan.interval_count > limit:
        raise SubscriptionRefused(
            "provider",
            f"this payment provider bills at most every {limit} {plan.interval}(s); choose another",
        )
    return Recurring(plan.interval, plan.interval_count, plan_id=plan.id)


# --- the admin's side --------------------------------------------------------------------

# Stripe bills at most every three years.
MAX_COUNT = {"day": 52, "week": 52, "month": 36, "year": 3}


def plan_of(session: Session, product_id: int) -> SubscriptionPlan | None:
    return session.scalar(select(SubscriptionPlan).where(SubscriptionPlan.product_id == product_id))


def set_plan(
    session: Session, product: Product, *, interval: str, count: int, active: bool
) -> tuple[SubscriptionPlan, bool]:
    """Sell ``product`` as a subscription billed every ``count`` ``interval`` (or stop
    selling it so, ``active`` False: the subscriptions already sold go on). (the plan,
    created). SubscriptionRefused names the field a rule refuses."""
    if not product.licensed:
        raise SubscriptionRefused(
            "product",
            "only a licensed product is sold as a subscription: each period extends its license",
        )
    if count > MAX_COUNT[interval]:
        raise SubscriptionRefused(
            "intervalCount", f"at most {MAX_COUNT[interval]} for {interval} (three years at most)"
        )
    plan = plan_of(session, product.id)
    created = plan is None
    if plan is None:
        plan = SubscriptionPlan(product_id=product.id)
        session.add(plan)
    plan.interval, plan.interval_count, plan.active = interval, count, active
    session.flush()
    return plan, created


def cycle_text(plan: SubscriptionPlan) -> str:
    """ "month", "3 months": what "every ..." says to the buyer."""
    if plan.interval_count == 1:
        return plan.interval
    return f"{plan.interval_count} {plan.interval}s"


def billing_cycle(session: Session, product_ids: Sequence[int]) -> str | None:
    """The cycle of the subscription among ``product_ids`` (a cart's), said before the buyer
    pays ("every month"): None when none is sold as a subscription."""
    plans = plans_of(session, product_ids)
    return cycle_text(next(iter(plans.values()))) if plans else None
