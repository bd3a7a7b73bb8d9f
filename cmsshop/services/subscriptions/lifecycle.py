"""What the provider's account of a subscription does here, in one transaction.

Everything is keyed on the order that bought the subscription: every step locks that
order's row first, so the events of one subscription are applied one at a time, in
whichever process they arrive. Then:

* a paid invoice is a period. The first one fulfils the order that bought the
  subscription (through the same checks as any payment) and creates the subscription
  row; each later one is a renewal order of the license, fulfilled at once. A
  ``subscription_periods`` row per provider invoice makes each of them happen once:
  ``checkout.session.completed`` and the first ``invoice.paid`` are the same invoice.
* ``paid_through`` is the latest end of a period paid for, the provider's own date;
  nothing is computed by adding durations.
* the status is the provider's, refetched; ``ended`` is final (a late "active" never
  revives a cancelled subscription), and an event older than the newest applied
  changes nothing.
* the license expires at ``paid_through`` plus the grace (``cmsshop.subscription_grace_days``)
  while the subscription renews itself (trialing, active, past due: the provider is
  still retrying the card), at ``paid_through`` once it will not renew (cancellation
  scheduled, paused, ended). Leases and update checks already stop at the license's
  expiry, so a renewal reaches the product at its next check-in.
* a free trial is the first period, of 0: its order costs nothing and its license
  ends with the trial. There is no grace until a period was paid for, so a card that
  fails when the trial ends gets no free weeks. The first charged period is a renewal
  order, taxed as the checkout would have taxed it (``renewal_order``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cmsshop.db import take_write_lock
from cmsshop.models import (
    License,
    LicenseAuditEntry,
    Order,
    OrderItem,
    Product,
    Subscription,
    SubscriptionPeriod,
    SubscriptionPlan,
    User,
)
from cmsshop.models.subscriptions import RENEWING_STATUSES
from cmsshop.services.checkout import pricing
from cmsshop.services.checkout.orders import new_order_number
from cmsshop.services.mail.outbox import enqueue
from cmsshop.services.payments import base as pb
from cmsshop.services.payments import fulfilment, license_changes
from cmsshop.services.payments.lines import display_name
from cmsshop.services.subscriptions.plans import tax_of_period
from cmsshop.services.tax import checkout as tax_checkout
from cmsshop.services.tax.billing import BillingDetails
from cmsshop.services.tax.seller import shop_profile
from cmsshop.util import utcnow

log = logging.getLogger(__name__)

GRACE_SETTING = "cmsshop.subscription_grace_days"
DEFAULT_GRACE_DAYS = 21


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What a subscription event did: the event log's status, order number and note."""

    status: str  # processed / duplicate / ignored / needs_review
    order_number: str | None
    note: str


def grace_of(settings: Mapping[str, Any]) -> dt.timedelta:
    return dt.timedelta(days=int(settings.get(GRACE_SETTING, DEFAULT_GRACE_DAYS)))


def ever_paid(session: Session, subscription: Subscription) -> bool:
    """Whether a period of the subscription was paid for (and not refunded): a free
    trial alone was not."""
    paid = session.scalar(
        select(SubscriptionPeriod.id)
        .where(
            SubscriptionPeriod.subscription_id == subscription.id,
            SubscriptionPeriod.amount > 0,
            SubscriptionPeriod.refunded_at.is_(None),
        )
        .limit(1)
    )
    return paid is not None


def grace_for(session: Session, subscription: Subscription, settings) -> dt.timedelta:
    """The grace the subscription's license gets past ``paid_through`` while the card is
    retried: none while no period was paid for (``ever_paid``), so a trial whose first
    charge fails ends with the trial."""
    return grace_of(settings) if ever_paid(session, subscription) else dt.timedelta(0)


def license_expiry(subscription: Subscription, grace: dt.timedelta) -> dt.datetime | None:
    """The expiry the subscription gives its license (None: no period paid yet)."""
    if subscription.paid_through is None:
        return None
    if subscription.status in RENEWING_STATUSES:
        return subscription.paid_through + grace
    return subscription.paid_through


def find_subscription(
    session: Session, provider: str, subscription_ref: str, *, for_update: bool = False
) -> Subscription | None:
    query = select(Subscription).where(
        Subscription.provider == provider,
        Subscription.provider_subscription_id == subscription_ref[:255],
    )
    if for_update:
        query = query.with_for_update().execution_options(populate_existing=True)
    return session.scalar(query)


def first_order_id(
    session: Session, provider: str, subscription_ref: str, order_number: str | None
) -> int | None:
    """The order that bought the subscription: the subscription row's, else the one the
    provider's metadata names."""
    found = session.scalar(
        select(Subscription.order_id).where(
            Subscription.provider == provider,
            Subscription.provider_subscription_id == subscription_ref[:255],
        )
    )
    if found is None and order_number:
        found = session.scalar(
            select(Order.id).where(Order.number == order_number[:64], Order.provider == provider)
        )
    return found


def apply_state(
    subscription: Subscription,
    state: pb.ProviderSubscription,
    event_created: dt.datetime | None,
    now: dt.datetime,
) -> str:
    """Take the provider's refetched ``state``; a note of what changed ('' for nothing)."""
    if subscription.status == "ended":
        return ""
    before = subscription.status
    subscription.status = state.status
    subscription.current_period_end = state.current_period_end
    subscription.cancel_at_period_end = state.cancel_at_period_end
    subscription.provider_customer_id = state.customer_ref or subscription.provider_customer_id
    if state.status == "ended":
        subscription.ended_at = state.ended_at or now
    if event_created is not None and (
        subscription.last_event_at is None or event_created > subscription.last_event_at
    ):
        subscription.last_event_at = event_created
    subscription.synced_at = now
    subscription.updated_at = now
    return f"status {before} -> {state.status}" if before != state.status else ""


def follow_license(
    session: Session, subscription: Subscription, settings, now, *, first: bool = False
) -> str:
    """Set the license's expiry to what the subscription gives; a note of the change.
    While it renews itself that never shortens the license (an admin may have given
    more); once it will not renew, the license ends with what was paid for. The first
    period replaces the expiry the purchase gave (one product duration)."""
    license = (
        license_changes.lock_license(session, subscription.license_id)
        if subscription.license_id is not None
        else None
    )
    expiry = license_expiry(subscription, grace_for(session, subscription, settings))
    if license is None or expiry is None or license.status in ("revoked", "suspended"):
        return ""
    if not first and subscription.status in RENEWING_STATUSES and license.expires_at:
        expiry = max(expiry, license.expires_at)
    if license.expires_at == expiry:
        return ""
    old = license.expires_at
    license.expires_at = expiry
    if license.status == "expired" and expiry > now:
        license.status = "active"
    license.updated_at = now
    detail = f"subscription {subscription.status}: expiry {_day(old)} -> {_day(expiry)}"
    session.add(
        LicenseAuditEntry(
            created_at=now,
            action="subscription",
            outcome="ok",
            status=200,
            license_id=license.id,
            ip="-",
            detail=detail[:500],
        )
    )
    return f"license expires {_day(expiry)}"


def _renewed_expiry(session: Session, subscription: Subscription, settings) -> dt.datetime:
    """A paid period's expiry: the later of the license's and what the subscription
    gives (a renewal never shortens what the license already has)."""
    license = session.get(License, subscription.license_id)
    expiry = license_expiry(subscription, grace_for(session, subscription, settings))
    return max(expiry, license.expires_at) if license.expires_at is not None else expiry


def _day(value: dt.datetime | None) -> str:
    return "never" if value is None else f"{value:%Y-%m-%d}"


def _paid_through(session: Session, subscription_id: int) -> dt.datetime | None:
    return session.scalar(
        select(func.max(SubscriptionPeriod.period_end)).where(
            SubscriptionPeriod.subscription_id == subscription_id,
            SubscriptionPeriod.refunded_at.is_(None),
        )
    )


def _license_of_order(session: Session, order: Order) -> License | None:
    return session.scalar(
        select(License)
        .join(OrderItem, OrderItem.id == License.order_item_id)
        .where(OrderItem.order_id == order.id)
        .order_by(License.id)
    )


def _plan_of(session: Session, product_id: int) -> int | None:
    return session.scalar(
        select(SubscriptionPlan.id).where(SubscriptionPlan.product_id == product_id)
    )


def _new_subscription(
    session: Session, provider: str, order: Order, subscription_ref: str, now
) -> Subscription:
    license = _license_of_order(session, order)
    product_id = order.items[0].product_id if order.items else None
    subscription = Subscription(
        provider=provider,
        provider_subscription_id=subscription_ref[:255],
        user_id=order.user_id,
        order_id=order.id,
        license_id=license.id if license is not None else None,
        plan_id=_plan_of(session, product_id) if product_id is not None else None,
        status="active",
        cancel_at_period_end=False,
        created_at=now,
        updated_at=now,
    )
    session.add(subscription)
    session.flush()
    return subscription


def held_subscription(session: Session, order: Order) -> Subscription | None:
    """The provider's subscription the locked ``order`` bought while its first payment
    was held for review (nothing delivered, so no row was made then; the provider bills
    it all the same), now made a row, live and without a license, so that a refund ends
    it as any other (refund_cancel). None when the order bought none at a provider, or
    was delivered (its row is the one to go by)."""
    ref = order.provider_subscription_id
    if ref is None or fulfilment.fulfilment_of(session, order.id) is not None:
        return None
    found = find_subscription(session, order.provider, ref)
    if found is not None:
        return found if found.order_id == order.id else None
    return _new_subscription(session, order.provider, order, ref, utcnow())


def _period_recorded(session: Session, provider: str, invoice_id: str) -> bool:
    return (
        session.scalar(
            select(SubscriptionPeriod.id).where(
                SubscriptionPeriod.provider == provider,
                SubscriptionPeriod.provider_invoice_id == invoice_id[:255],
            )
        )
        is not None
    )


def _add_period(
    session: Session,
    subscription: Subscription,
    invoice: pb.ProviderInvoice,
    order: Order,
    now: dt.datetime,
) -> None:
    session.add(
        SubscriptionPeriod(
            subscription_id=subscription.id,
            provider=subscription.provider,
            provider_invoice_id=invoice.invoice_id[:255],
            order_id=order.id,
            period_start=invoice.period_start,
            period_end=invoice.period_end,
            amount=invoice.amount,
            currency=invoice.currency,
            created_at=now,
        )
    )
    session.flush()
    subscription.paid_through = _paid_through(session, subscription.id)


@dataclasses.dataclass(frozen=True)
class TaxBasis:
    """What a renewal's tax is taken from: a paid period's total, its tax and the rules
    applied (``Order.tax_details``), and its cross-border count."""

    total: int
    tax: int
    details: dict | None
    cross_border_eur: int | None


def tax_basis(
    session: Session, settings, first: Order, product: Product, currency: str, fallback: int
) -> TaxBasis:
    """The first order's tax, or for a free trial's order (total 0: no tax, no
    proportion) the tax the checkout would charge that buyer for one period now: the
    product's price times the seats bought (``fallback`` when it has no price in
    ``currency`` any more) quoted with the first order's billing details and evidence.
    Where no rate is known for that now (an operator's extra rate removed since the
    trial's checkout), the rule the trial's order was quoted under (its ``tax_details``):
    a payment the provider confirmed is recorded, never refused for want of a rate."""
    if first.total:
        return TaxBasis(first.total, first.tax or 0, first.tax_details, first.cross_border_eur)
    billing = None
    if isinstance(first.billing, dict):
        names = {field.name for field in dataclasses.fields(BillingDetails)}
        billing = BillingDetails(**{k: v for k, v in first.billing.items() if k in names})
    evidence = (first.tax_details or {}).get("evidenceCountry")
    unit = pricing.unit_price(product, currency)
    amount = unit * first.items[0].quantity if unit is not None else fallback
    try:
        quote = tax_checkout.quote_order(
            session,
            settings,
            shop_profile(session, settings),
            [{"amount": amount}],
            currency,
            billing,
            evidence_country=evidence,
        )
    except tax_checkout.TaxRefused as exc:
        log.warning("order %s: the trial's tax rule, no rate known now: %s", first.number, exc)
        return TaxBasis(0, 0, first.tax_details, None)
    return TaxBasis(quote.gross, quote.tax, quote.details, quote.cross_border_eur)


def renewal_order(
    session: Session,
    subscription: Subscription,
    first: Order,
    invoice: pb.ProviderInvoice,
    settings: Mapping[str, Any],
) -> Order:
    """The renewal order recording a later period's payment: one line for the license
    (its seat multiplier shown in the name), the invoice's amount, and the first order's
    billing details and tax rule (``tax_basis``: after a free trial, what the checkout
    would charge). An amount that differs from the basis's (a plan change, a first period
    a coupon discounted, a price changed since) is taxed at the basis's rate: the net is
    the amount over one plus the rate, rounded half up, the tax the rest
    (plans.tax_of_period), so net + tax is the amount paid. A proportion of the first
    order's tax would not do: its tax was rounded on a smaller amount (a 99 % coupon),
    or is none at all."""
    license = session.get(License, subscription.license_id)
    product = session.get(Product, license.product_id)
    bought = first.items[0]
    now = utcnow()
    name = (
        f"{display_name(product.name, bought.quantity)}: "
        f"{invoice.period_start:%Y-%m-%d} to {invoice.period_end:%Y-%m-%d}"
    )
    item = OrderItem(
        product_id=product.id,
        product_slug=product.slug,
        name=name[:200],
        quantity=1,
        unit_amount=invoice.amount,
        discount=0,
        amount=invoice.amount,
        kind="renewal",
        target_license_id=license.id,
    )
    order = Order(
        number=new_order_number(),
        user_id=subscription.user_id,
        currency=invoice.currency,
        total=invoice.amount,
        discount=0,
        status="pending",
        provider=subscription.provider,
        guest=False,
        created_at=now,
        billing=first.billing,
    )
    basis = tax_basis(session, settings, first, product, invoice.currency, invoice.amount)
    if basis.details is not None:
        same = invoice.amount == basis.total
        tax = basis.tax if same else tax_of_period(invoice.amount, basis.details)
        order.tax, order.tax_details = tax, basis.details
        order.cross_border_eur = _cross_border(basis, invoice.amount - tax)
        item.net, item.tax = invoice.amount - tax, tax
    order.items = [item]
    session.add(order)
    session.flush()
    return order


def _cross_border(basis: TaxBasis, net: int) -> int | None:
    """What a renewal of net ``net`` counts towards the micro-seller threshold (euro
    cents): the basis's count, in proportion to the nets when they differ, rounded half
    up (the rate it was converted at is the basis's)."""
    counted = basis.cross_border_eur
    basis_net = basis.total - basis.tax
    if counted is None or net == basis_net:
        return counted
    if basis_net <= 0:
        return None
    return (2 * counted * net + basis_net) // (2 * basis_net)


def record_paid_invoice(
    session: Session,
    settings: Mapping[str, Any],
    provider: str,
    first: Order,
    invoice: pb.ProviderInvoice,
    state: pb.ProviderSubscription,
    *,
    event_created: dt.datetime | None,
    payment_event_id: int | None,
) -> Outcome:
    """A paid invoice of the subscription bought by the locked order ``first``."""
    now = utcnow()
    if _period_recorded(session, provider, invoice.invoice_id):
        return Outcome("duplicate", first.number, f"invoice {invoice.invoice_id} already counted")
    subscription = find_subscription(session, provider, invoice.subscription_ref, for_update=True)
    if first.provider_subscription_id is None:
        # Kept with the order before anything is decided: a first payment held for review
        # leaves no subscription row, and a refund must still find what to cancel.
        first.provider_subscription_id = invoice.subscription_ref[:255]
    if fulfilment.fulfilment_of(session, first.id) is None:
        if not invoice.first and first.status == "needs_review":
            # The first payment is held for a human (its amount did not add up): so is
            # this one, visibly, instead of being retried until the provider gives up.
            return Outcome(
                "needs_review",
                first.number,
                f"invoice {invoice.invoice_id} paid while the order that bought the "
                "subscription is held for review; record it once that is resolved "
                "(resync from the console)",
            )
        if not invoice.first:
            # A renewal before the first payment is recorded: the provider sends the
            # first period's events again, and this one (retried on "pending").
            return Outcome("pending", first.number, "the first period is not recorded yet")
        confirmation = pb.Confirmation(
            final=invoice.paid,
            amount=invoice.amount,
            currency=invoice.currency,
            order_number=invoice.order_number,
            payment_reference=invoice.payment_reference or invoice.invoice_id,
        )
        result = fulfilment.fulfil_confirmed_payment(
            session,
            first,
            settings=settings,
            provider=provider,
            confirmation=confirmation,
            payment_event_id=payment_event_id,
        )
        if result.status != "processed":
            return Outcome(result.status, first.number, result.note)
    if subscription is None:
        subscription = _new_subscription(session, provider, first, state.subscription_ref, now)
    if invoice.first:
        _add_period(session, subscription, invoice, first, now)
        notes = [f"first period to {_day(invoice.period_end)}"]
        notes.append(apply_state(subscription, state, event_created, now))
        notes.append(follow_license(session, subscription, settings, now, first=True))
        return Outcome("processed", first.number, "; ".join(n for n in notes if n))
    target = _changed_product(session, subscription, invoice, state)
    if target is not None:
        renewal = plan_change_order(session, subscription, first, invoice, target, settings)
        subscription.plan_id = _plan_of(session, target.id)
    else:
        renewal = renewal_order(session, subscription, first, invoice, settings)
    _add_period(session, subscription, invoice, renewal, now)
    changed = apply_state(subscription, state, event_created, now)
    problems = license_changes.change_problems(session, renewal, now)
    if problems:
        # Paid, but the license was revoked or suspended meanwhile: a human decides.
        fulfilment.move(renewal, "needs_review")
        renewal.payment_reference = invoice.payment_reference
        return Outcome("needs_review", renewal.number, "; ".join(problems))
    fulfilment.fulfil_order(
        session,
        renewal,
        settings=settings,
        provider=provider,
        payment_reference=invoice.payment_reference or invoice.invoice_id,
        payment_event_id=payment_event_id,
        confirmed_amount=invoice.amount,
        confirmed_currency=invoice.currency,
        renews_until=_renewed_expiry(session, subscription, settings),
    )
    what = "plan change" if target is not None else "renewal"
    notes = [f"{what} {renewal.number} to {_day(invoice.period_end)}", changed]
    return Outcome("processed", renewal.number, "; ".join(n for n in notes if n))


def _changed_product(
    session: Session, subscription: Subscription, invoice: pb.ProviderInvoice, state
) -> Product | None:
    """The product a plan change's invoice moves the license to (None: a renewal)."""
    if invoice.reason != "update" or not state.product_ref:
        return None
    license = session.get(License, subscription.license_id)
    target = session.scalar(select(Product).where(Product.slug == state.product_ref[:100]))
    if target is None or license is None or target.id == license.product_id:
        return None
    return target


def plan_change_order(
    session: Session,
    subscription: Subscription,
    first: Order,
    invoice: pb.ProviderInvoice,
    target: Product,
    settings: Mapping[str, Any],
) -> Order:
    """The order recording a plan change's payment: an upgrade of the license to
    ``target`` (its seats and features, as an upgrade bought by hand), for what the
    provider charged for the rest of the period; the license keeps its expiry."""
    order = renewal_order(session, subscription, first, invoice, settings)
    license = session.get(License, subscription.license_id)
    quantity = first.items[0].quantity
    unit = -(-invoice.amount // quantity)  # rounded up; the rest is the line's discount
    item = order.items[0]
    item.kind, item.product_id, item.product_slug = "upgrade", target.id, target.slug
    item.name = f"Change of {license.key} to {display_name(target.name, quantity)}"[:200]
    item.quantity, item.unit_amount = quantity, unit
    item.discount = unit * quantity - invoice.amount
    session.flush()
    return order


def apply_answer(
    session: Session, settings: Mapping[str, Any], subscription: Subscription, state
) -> Subscription:
    """The provider's answer to a change asked of it outside any transaction (a
    customer's cancel, resume or plan change), applied as its events are: under the lock
    of the order that bought the subscription, the status taken and the license
    following it. The locked, current row."""
    take_write_lock(session)
    fulfilment.lock_order(session, subscription.order_id)
    locked = find_subscription(
        session, subscription.provider, subscription.provider_subscription_id, for_update=True
    )
    now = utcnow()
    apply_state(locked, state, None, now)
    follow_license(session, locked, settings, now)
    session.flush()
    return locked


def sync_state(
    session: Session,
    settings: Mapping[str, Any],
    provider: str,
    first: Order,
    state: pb.ProviderSubscription,
    *,
    event_created: dt.datetime | None,
) -> Outcome:
    """The subscription changed at the provider (bought by the locked order ``first``)."""
    now = utcnow()
    subscription = find_subscription(session, provider, state.subscription_ref, for_update=True)
    if subscription is None:
        return Outcome("ignored", first.number, "no period is recorded yet; its payment adds it")
    if subscription.status == "ended":
        return Outcome("ignored", first.number, "the subscription has ended; that is final")
    if (
        event_created is not None
        and subscription.last_event_at is not None
        and event_created < subscription.last_event_at
    ):
        return Outcome("ignored", first.number, "older than the state already applied")
    before = subscription.status
    notes = [apply_state(subscription, state, event_created, now)]
    notes.append(follow_license(session, subscription, settings, now))
    failed = subscription.status == "past_due" and before != "past_due"
    if failed and queue_payment_failed(session, settings, subscription):
        notes.append("payment-failed mail queued")
    session.flush()
    return Outcome("processed", first.number, "; ".join(n for n in notes if n) or "no change")


PAYMENT_FAILED_MAIL = "subscription_payment_failed"


def queue_payment_failed(session: Session, settings, subscription: Subscription) -> bool:
    """Tell the buyer a charge failed, with the way to replace the card (their account's
    subscriptions page hands off to the provider's page: the provider's own links
    expire within minutes). Once per subscription and paid period."""
    user = session.get(User, subscription.user_id)
    license = session.get(License, subscription.license_id) if subscription.license_id else None
    product = session.get(Product, license.product_id) if license is not None else None
    base_url = settings["cmsshop.base_url"].rstrip("/")
    name = product.name if product is not None else "your"
    grace, paid = grace_for(session, subscription, settings), ever_paid(session, subscription)
    return enqueue(
        session,
        settings,
        kind=PAYMENT_FAILED_MAIL,
        to=user.email,
        subject=f"The payment for your {name} subscription failed",
        template=PAYMENT_FAILED_MAIL,
        context={
            "customer_name": user.name,
            "product": name,
            "paid_through": _day(subscription.paid_through),
            "valid_until": _day(license_expiry(subscription, grace)),
            # Nothing paid yet: the first charge after a free trial failed, and the
            # license ended with the trial (no grace).
            "trial_ended": not paid,
            "subscriptions_url": f"{base_url}/account/subscriptions",
        },
        dedupe_key=f"{PAYMENT_FAILED_MAIL}:{subscription.id}:{_day(subscription.paid_through)}",
        user_id=user.id,
    )
