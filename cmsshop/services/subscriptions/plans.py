"""Which products are sold as subscriptions, and what a checkout of one may hold."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import (
    Order,
    OrderItem,
    Product,
    Subscription,
    SubscriptionPeriod,
    SubscriptionPlan,
)
from cmsshop.models.subscriptions import MAX_TRIAL_DAYS
from cmsshop.services.payments.base import Recurring
from cmsshop.services.payments.lines import subtotal_of
from cmsshop.services.tax.rounding import net_of_gross, tax_of_nets


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
    discounts_first_period: bool = False,
) -> Recurring | None:
    """The billing cycle of priced checkout ``lines`` when they buy a subscription (None
    for a one-off purchase). A subscription is bought on its own: the provider charges
    every line of it again each cycle, so a one-off line in the same checkout would be
    billed again. A coupon (``lines`` discounted by it) takes its discount off the first
    period only, through a provider that can say so (``discounts_first_period``: both
    the card and the wallet provider); it may not make that period free.
    ``cycle_limits``: the provider's largest count per interval, when narrower than ours
    (PayPal bills at most every 12 months)."""
    purchases = [line for line in lines if line.get("kind", "purchase") == "purchase"]
    plans = plans_of(session, [line["product_id"] for line in purchases])
    if not plans:
        return None
    if len(lines) != 1:
        raise SubscriptionRefused(
            "items", "a subscription is bought on its own: check out the other items separately"
        )
    if not sells_subscriptions:
        raise SubscriptionRefused(
            "provider", "this payment provider does not sell subscriptions; choose another"
        )
    if coupon and not discounts_first_period:
        raise SubscriptionRefused(
            "coupon",
            "this payment provider does not discount subscriptions: choose another to take "
            "the coupon off the first period, or remove the coupon",
        )
    if coupon and lines[0]["amount"] <= 0:
        raise SubscriptionRefused(
            "coupon",
            "this coupon would make the first period free, and a subscription's first "
            "period must cost something: remove the coupon or use a smaller one",
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


def _rate(tax_details: Any) -> tuple[Decimal, bool]:
    """(the rate in percent, whether prices include it) of an order's ``tax_details``;
    (0, False) for an order that kept none (placed before taxes)."""
    details = tax_details if isinstance(tax_details, Mapping) else {}
    try:
        rate = Decimal(str(details.get("rate") or "0"))
    except InvalidOperation:
        rate = Decimal(0)
    return rate, bool(details.get("pricesIncludeTax"))


def full_price(subtotal: int, tax_details: Any) -> tuple[int, int]:
    """(what a period costs, the tax added on top of ``subtotal``) for lines whose full
    price before any coupon is ``subtotal``, under an order's tax rule (``tax_details``:
    its rate, and whether prices include tax). The tax on top is the subtotal times the
    rate, rounded half up once, as the tax of the order's lines is (services.tax.engine);
    with prices that include tax there is none on top."""
    rate, inclusive = _rate(tax_details)
    if rate <= 0 or inclusive:
        return subtotal, 0
    added = tax_of_nets([subtotal], rate)
    return subtotal + added, added


def tax_of_period(amount: int, tax_details: Any) -> int:
    """The tax in ``amount``, a period paid under an order's tax rule (``tax_details``):
    the net is the amount over one plus the rate, rounded half up, the tax the rest,
    so net + tax is what was paid. For prices without tax this gives back the tax the
    provider added on top of the net (the one net whose tax makes the amount)."""
    rate, _ = _rate(tax_details)
    if rate <= 0:
        return 0
    return net_of_gross(amount, rate)[1]


def discount_first_period(
    recurring: Recurring | None, lines: Sequence[dict], tax
) -> Recurring | None:
    """``recurring`` with what a coupon takes off the first period (tax included) and
    the tax on top of the full price each later period, when ``lines`` (priced, taxed
    by ``tax``: services.tax.checkout.OrderTax) are discounted; as it was otherwise."""
    if recurring is None or not any(line["discount"] for line in lines):
        return recurring
    subtotal = sum(line["unit_amount"] * line["quantity"] for line in lines)
    gross, added = full_price(subtotal, tax.details)
    return dataclasses.replace(recurring, first_period_discount=gross - tax.gross, full_tax=added)


def next_charge_amount(
    session: Session, subscription: Subscription, last: SubscriptionPeriod
) -> int:
    """What the next period charges: the last period's amount, except after a first
    period a coupon discounted, when it is the full price of the order that bought the
    subscription (its lines before the discount, under its tax rule)."""
    if last.order_id != subscription.order_id:
        return last.amount
    first = session.get(Order, subscription.order_id)
    if first is None or not first.discount:
        return last.amount
    return full_price(sum(subtotal_of(item) for item in first.items), first.tax_details)[0]


# --- free trials ---------------------------------------------------------------------------

# Orders that never came to anything: they do not use up a buyer's trial.
_NEVER_BOUGHT = ("cancelled", "failed")


def had_product(session: Session, user_id: int, product_id: int) -> bool:
    """Whether the buyer has had ``product_id`` before: an order of theirs with a line of
    it (bought, renewed or upgraded to, a subscription's first order included), paid or
    still pending; a cancelled or failed checkout does not count."""
    return (
        session.scalar(
            select(OrderItem.id)
            .join(Order, Order.id == OrderItem.order_id)
            .where(
                Order.user_id == user_id,
                OrderItem.product_id == product_id,
                Order.status.not_in(_NEVER_BOUGHT),
            )
            .limit(1)
        )
        is not None
    )


def with_trial(
    session: Session, recurring: Recurring, product_id: int, user_id: int | None
) -> Recurring:
    """``recurring`` with the plan's free trial when this buyer may have it
    (``trial_offered``). ``user_id`` None: a buyer with no account yet."""
    days = trial_offered(session, [product_id], user_id)
    return dataclasses.replace(recurring, trial_days=days) if days else recurring


def trial_line(line: dict, days: int) -> dict:
    """The priced checkout ``line`` of a subscription as its trial order's line: the same
    product and seats, free for ``days`` days (the provider charges the line's price
    every period after)."""
    return {
        **line,
        "name": f"{line['name']}: free trial, {days} days"[:200],
        "unit_amount": 0,
        "discount": 0,
        "amount": 0,
    }


# --- the admin's side --------------------------------------------------------------------

# Stripe bills at most every three years.
MAX_COUNT = {"day": 52, "week": 52, "month": 36, "year": 3}


def plan_of(session: Session, product_id: int) -> SubscriptionPlan | None:
    return session.scalar(select(SubscriptionPlan).where(SubscriptionPlan.product_id == product_id))


def set_plan(
    session: Session,
    product: Product,
    *,
    interval: str,
    count: int,
    active: bool,
    trial_days: int = 0,
) -> tuple[SubscriptionPlan, bool]:
    """Sell ``product`` as a subscription billed every ``count`` ``interval`` (or stop
    selling it so, ``active`` False: the subscriptions already sold go on), free for the
    first ``trial_days`` (0: none; at most MAX_TRIAL_DAYS). (the plan, created).
    SubscriptionRefused names the field a rule refuses."""
    if not product.licensed:
        raise SubscriptionRefused(
            "product",
            "only a licensed product is sold as a subscription: each period extends its license",
        )
    if count > MAX_COUNT[interval]:
        raise SubscriptionRefused(
            "intervalCount", f"at most {MAX_COUNT[interval]} for {interval} (three years at most)"
        )
    if not 0 <= trial_days <= MAX_TRIAL_DAYS:
        raise SubscriptionRefused("trialDays", f"0 (no trial) to {MAX_TRIAL_DAYS} days")
    plan = plan_of(session, product.id)
    created = plan is None
    if plan is None:
        plan = SubscriptionPlan(product_id=product.id)
        session.add(plan)
    plan.interval, plan.interval_count, plan.active = interval, count, active
    plan.trial_days = trial_days
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


def trial_offered(session: Session, product_ids: Sequence[int], user_id: int | None = None) -> int:
    """The free days the subscription among ``product_ids`` (a cart's) starts with, said
    before the buyer pays ("Free for 14 days, then ..."): 0 when there is none, or when
    the buyer ``user_id`` has had the product before (one trial per customer and
    product: ``had_product``)."""
    plans = plans_of(session, product_ids)
    plan = next(iter(plans.values()), None)
    if plan is None or not plan.trial_days:
        return 0
    if user_id is not None and had_product(session, user_id, plan.product_id):
        return 0
    return plan.trial_days
