"""Checkout: price an order from the database, commit it as pending, then ask the
provider for a checkout session.

The order is committed (a transaction of its own) BEFORE the provider is asked, so a
webhook arriving faster than our response always finds it. Without API credentials
outside production, the redirect URL is our own sandbox route instead and the order stays
pending until a (simulated) webhook arrives.

A customer may hold at most ``cmsshop.max_pending_orders`` pending orders created within
the last hour (``PENDING_WINDOW``): each checkout commits an order before calling the
provider, so unlimited checkouts would let one account fill the orders table and the
provider's session list. The count and the insert run in one transaction that first
locks the customer's row (PostgreSQL) or takes the write lock (SQLite), so parallel
checkouts of one customer queue there and cannot exceed the limit. Older pending orders
are abandoned checkouts and do not count. A guest's pending orders are counted per
visitor instead (``check_pending_limit``), and guest checkout is rate limited as
registration is.

What belongs to the order commits with it, in the same transaction: a guest's account
(services/accounts/guests.py), the buyer's billing details as the account's profile
(``remember_billing``; the order keeps its own snapshot), the coupon's redemption
(services/checkout/coupons.py: the count is taken there, race-free), emptying the cart
the order came from, and, for an order that costs nothing (a zero price or a 100 %
coupon), its fulfilment: a free order is delivered by the same ``fulfil_order`` as a paid
one, with no provider.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload

from cmsshop.db import own_transaction, take_write_lock
from cmsshop.models import FREE_PROVIDER, Currency, Order, OrderItem, Product, User
from cmsshop.services.accounts import guests
from cmsshop.services.accounts.users import find_user
from cmsshop.services.checkout import carts, coupons, pricing
from cmsshop.services.checkout.pricing import CheckoutInvalid
from cmsshop.services.legal import documents as legal
from cmsshop.services.payments import fulfilment
from cmsshop.services.payments import license_changes as changes
from cmsshop.services.payments.base import (
    CheckoutRequest,
    NotConfigured,
    ProviderUnavailable,
)
from cmsshop.services.payments.lines import checkout_items
from cmsshop.services.payments.registry import ProviderSpec
from cmsshop.services.payments.settings import provider_config
from cmsshop.services.store.currencies import amount_text, default_currency, parse_major_amount
from cmsshop.services.subscriptions import plans as subscription_plans
from cmsshop.services.subscriptions import provider_plans
from cmsshop.services.tax import billing as billing_details
from cmsshop.services.tax import checkout as tax_checkout
from cmsshop.services.tax import seller
from cmsshop.services.tax.billing import BillingDetails
from cmsshop.util import readable_token, utcnow

log = logging.getLogger(__name__)

MAX_ITEMS = 20
PENDING_WINDOW = dt.timedelta(hours=1)


class CheckoutUnavailable(Exception):
    """The provider could not create a checkout; the order was cancelled."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


class TooManyPendingOrders(Exception):
    """The customer already has the allowed number of recent pending orders."""

    def __init__(self, limit: int, retry_after: int):
        super().__init__(f"{limit} unpaid orders are waiting already")
        self.limit = limit
        self.retry_after = retry_after


@dataclasses.dataclass(frozen=True)
class Buyer:
    """Who places an order: a logged-in customer (``user_id``), or a guest with an
    e-mail address (and a name) whose order goes to that address's account. A guest's
    ``visitor_hash`` (carts.visitor_hash of the cookie) lets that browser see the order."""

    user_id: int | None = None
    email: str | None = None
    name: str | None = None
    visitor_hash: str | None = None


@dataclasses.dataclass(frozen=True)
class PlacedOrder:
    order: Order  # committed; its items loaded
    redirect_url: str
    sandbox: bool


def new_order_number() -> str:
    """``ORD-XXXXX-XXXXX``: 50 random bits, so numbers reveal nothing about volume."""
    return readable_token(2, 5, prefix="ORD")


def price_order(
    session: Session, user_id: int | None, items: list[dict], currency: str, grace
) -> list[dict]:
    """Order lines of checkout ``items``, in the order given: ``{"product": slug,
    "quantity": n, "seen": unit price shown or None}`` (a purchase), ``{"renew": key}``
    or ``{"upgrade": key, "to": slug}`` (services/payments/license_changes.py; only a
    logged-in customer, ``user_id``, has licenses). CheckoutInvalid names each bad item;
    PricesChanged says a price moved since the buyer saw it."""
    errors: dict[str, str] = {}
    problem = pricing.currency_problem(session, currency)
    if problem:
        raise CheckoutInvalid({"currency": problem})
    purchases = [
        {
            "index": i,
            "product": item["product"],
            "quantity": item.get("quantity") or 1,
            "seen": item.get("seen"),
        }
        for i, item in enumerate(items)
        if item.get("product")
    ]
    lines: dict[int, dict] = {}
    if purchases:
        try:
            lines.update(pricing.price_purchases(session, purchases, currency))
        except CheckoutInvalid as exc:
            errors.update(exc.errors)
    now = utcnow()
    targets: set[str] = set()
    for index, item in enumerate(items):
        key = item.get("renew") or item.get("upgrade")
        if not key:
            continue
        if user_id is None:
            errors[f"items.{index}"] = "log in to renew or upgrade a license"
            continue
        if key.strip().upper() in targets:
            errors[f"items.{index}"] = "the same license twice in one order"
            continue
        targets.add(key.strip().upper())
        try:
            if item.get("renew"):
                line = changes.price_renewal(session, user_id, key, currency, now, grace)
            else:
                line = changes.price_upgrade(session, user_id, key, item["to"], currency, now)
        except changes.ItemRefused as exc:
            errors[f"items.{index}.{exc.field}"] = exc.message
            continue
        # A license change is one line for the license (its price already counts the
        # license's seat packs).
        quantity = line.get("quantity", 1)
        lines[index] = {
            **line,
            "quantity": quantity,
            "unit_amount": line.get("unit_amount", line["amount"] // quantity),
            "discount": 0,
        }
    if errors:
        raise CheckoutInvalid(errors)
    return [lines[index] for index in sorted(lines)]


def insert_order(
    session: Session,
    buyer: Buyer,
    user_id: int,
    currency: str,
    provider: str,
    lines,
    billing: BillingDetails | None = None,
    tax: tax_checkout.OrderTax | None = None,
) -> Order:
    """The pending order of priced ``lines``; ``tax`` (services.tax.checkout.quote_order
    of the same lines) makes its total the gross and gives each line its net and tax."""
    order = build_order(buyer, user_id, currency, provider, lines, billing, tax)
    session.add(order)
    session.flush()
    return order


def build_order(
    buyer: Buyer,
    user_id: int | None,
    currency: str,
    provider: str,
    lines,
    billing: BillingDetails | None = None,
    tax: tax_checkout.OrderTax | None = None,
) -> Order:
    """``insert_order``'s order, not added to any session."""
    sums = pricing.totals(lines)
    order = Order(
        number=new_order_number(),
        user_id=user_id,
        currency=currency,
        total=sums.total,
        discount=sums.discount,
        status="pending",
        provider=provider,
        guest=buyer.user_id is None,
        visitor_hash=buyer.visitor_hash,
        created_at=utcnow(),
        billing=billing.snapshot() if billing is not None else None,
    )
    order.items = [
        OrderItem(
            product_id=line["product_id"],
            product_slug=line["slug"],
            name=line["name"],
            quantity=line["quantity"],
            unit_amount=line["unit_amount"],
            discount=line["discount"],
            amount=line["amount"],
            kind=line.get("kind", "purchase"),
            target_license_id=line.get("target_license_id"),
        )
        for line in lines
    ]
    if tax is not None:
        tax_checkout.apply_to_order(order, tax)
    return order


def check_pending_limit(session: Session, buyer: Buyer, user_id: int, limit: int) -> None:
    """Raise TooManyPendingOrders when the buyer holds ``limit`` recent pending orders:
    a logged-in customer's own, or a guest visitor's (guest orders are not counted
    against the account they were placed for, or anyone could use up another person's
    limit by typing their address). Call it after locking the customer (module doc)."""
    since = utcnow() - PENDING_WINDOW
    if buyer.user_id is not None:
        mine = (Order.user_id == user_id) & Order.guest.is_(False)
    else:
        mine = Order.visitor_hash == buyer.visitor_hash
    count, oldest = session.execute(
        select(func.count(), func.min(Order.created_at)).where(
            mine, Order.status == "pending", Order.created_at > since
        )
    ).one()
    if count >= limit:
        frees_at = oldest + PENDING_WINDOW if oldest is not None else utcnow()
        if frees_at.tzinfo is None:
            frees_at = frees_at.replace(tzinfo=dt.UTC)
        wait = int((frees_at - utcnow()).total_seconds()) + 1
        raise TooManyPendingOrders(limit, max(1, wait))


def lock_customer(session: Session, user_id: int) -> None:
    """Queue this customer's checkouts: their row on PostgreSQL, the write lock on SQLite."""
    take_write_lock(session)
    session.execute(select(User.id).where(User.id == user_id).with_for_update())


def _loaded(session: Session, order: Order) -> Order:
    """``order`` with its items loaded, usable after its session closed."""
    session.flush()
    session.refresh(order, attribute_names=["items"])
    return order


def fulfil_free_order(session: Session, order: Order, settings) -> None:
    """Deliver an order that costs nothing, in the transaction that placed it, through
    the same fulfilment as a paid one (entitlements, licenses, invoice and receipt,
    each once: the fulfilment gate row is unique per order)."""
    refused = changes.change_problems(session, order, utcnow())
    if refused:
        raise CheckoutInvalid({"items": "; ".join(refused)})
    fulfilment.fulfil_order(
        session,
        order,
        settings=settings,
        provider=FREE_PROVIDER,
        payment_reference=f"free-{order.number}",
    )


def remember_billing(session: Session, buyer: Buyer, user_id: int, billing) -> None:
    """Keep the order's billing details as the account's profile, prefilled next time.
    A guest's details fill the account's profile only while it has none: anyone may
    check out as a guest with any address, so a guest must not replace what the
    account's owner saved."""
    if buyer.user_id is None and billing_details.load_profile(session, user_id) is not None:
        return
    billing_details.save_profile(session, user_id, billing)


def _commit_new_order(
    registry,
    buyer: Buyer,
    currency: str,
    provider: str,
    lines,
    coupon_code: str | None,
    cart_id: str | None,
    billing: BillingDetails | None,
    tax: tax_checkout.OrderTax | None = None,
    terms_version: int | None = None,
    trial: bool = False,
) -> Order:
    """Commit the order (see the module doc), in one transaction with what belongs to
    it: the guest's account, the buyer's billing profile, the coupon's redemption,
    emptying the cart it came from, and, when it costs nothing, its fulfilment. A
    subscription's ``trial`` costs nothing too, but is fulfilled once the provider
    confirms it (services/subscriptions)."""
    settings = registry.settings
    now = utcnow()
    free = pricing.totals(lines).total == 0 and not trial
    for _attempt in range(3):
        try:
            with own_transaction(registry) as session:
                if buyer.user_id is not None:
                    user_id = buyer.user_id
                else:
                    user_id = guests.customer_for_checkout(
                        session, buyer.email, buyer.name or ""
                    ).id
                lock_customer(session, user_id)
                if trial and subscription_plans.had_product(
                    session, user_id, lines[0]["product_id"]
                ):
                    # Another checkout of this buyer placed an order of the product since
                    # the trial was offered (two at once): under the customer's lock its
                    # order is in, and one trial a customer and product is the rule.
                    raise CheckoutInvalid(
                        {
                            "items": "a free trial of this product was just started for this "
                            "account: check out again to subscribe, charged from the start"
                        }
                    )
                check_pending_limit(session, buyer, user_id, settings["cmsshop.max_pending_orders"])
                order = insert_order(
                    session,
                    buyer,
                    user_id,
                    currency,
                    FREE_PROVIDER if free else provider,
                    lines,
                    billing,
                    tax,
                )
                if terms_version is not None:
                    order.terms_version, order.terms_accepted_at = terms_version, now
                if billing is not None:
                    remember_billing(session, buyer, user_id, billing)
                if coupon_code:
                    coupon = coupons.find_coupon(session, coupon_code)
                    coupons.reserve_redemption(
                        session, coupon, order=order, discount=order.discount, now=now
                    )
                if cart_id is not None:
                    carts.empty_cart(session, cart_id)
                if free:
                    fulfil_free_order(session, order, settings)
                return _loaded(session, order)
        except IntegrityError:  # an order number collided (50 random bits): draw again
            continue
    raise CheckoutUnavailable("could not allocate an order number", code="checkout_failed")


def _set_order(registry, number: str, **values) -> Order:
    with own_transaction(registry) as session:
        # A read then a write: on SQLite take the write lock first, or a checkout that
        # committed in between makes the upgrade fail and the whole request retry.
        take_write_lock(session)
        order = session.scalar(select(Order).where(Order.number == number))
        for name, value in values.items():
            setattr(order, name, value)
        order.updated_at = utcnow()
        return _loaded(session, order)


def checkout_urls(settings, number: str) -> tuple[str, str]:
    base = settings["cmsshop.base_url"].rstrip("/")
    success = (
        settings.get("cmsshop.payments.success_url") or f"{base}/checkout/success?order={{order}}"
    )
    cancel = (
        settings.get("cmsshop.payments.cancel_url") or f"{base}/checkout/cancel?order={{order}}"
    )
    return success.replace("{order}", number), cancel.replace("{order}", number)


def sandbox_url(settings, number: str) -> str:
    return f"{settings['cmsshop.base_url'].rstrip('/')}/api/store/checkout/sandbox/{number}"


def success_url(settings, number: str) -> str:
    return checkout_urls(settings, number)[0]


def place_order(
    registry,
    session: Session,
    *,
    buyer: Buyer,
    items: list[dict],
    currency: str | None,
    spec: ProviderSpec | None,
    coupon_code: str | None = None,
    cart_id: str | None = None,
    billing: BillingDetails | None,
    evidence_country: str | None = None,
    accept_terms: bool = False,
) -> PlacedOrder:
    """Price, commit as pending, then create the provider checkout (see module doc).
    An order that costs nothing is fulfilled as it is committed and needs no provider
    (``spec`` may then be None). ``billing`` (checked by services.tax.billing, VAT ID
    included) is kept on the order and as the buyer's profile; every caller that takes
    an order from a buyer gives it (None only for orders made by the shop itself). The
    order's tax is decided here from it (services.tax.checkout), with
    ``evidence_country`` (the network address's country, if known) as the second
    piece of evidence of where the buyer is; the order keeps it. When the shop publishes
    terms of sale the buyer must accept them (``accept_terms``, 422 ``acceptTerms``
    otherwise); the order keeps the version accepted and when.

    ``session`` (the request's) is only read; the order is written in transactions of
    its own, so it is committed before the provider is called. In production nothing is
    placed while the seller's legal details for invoices are incomplete (409).
    """
    settings = registry.settings
    profile = seller.shop_profile(session, settings)  # the refusal's and the tax's
    refusal = seller.live_checkout_refusal(profile, settings)
    if refusal is not None:
        raise refusal
    if not items or len(items) > MAX_ITEMS:
        raise CheckoutInvalid({"items": f"between 1 and {MAX_ITEMS} items"})
    try:
        terms_version = legal.accepted_terms_version(session, accept_terms)
    except legal.TermsNotAccepted as exc:
        raise CheckoutInvalid({exc.field: exc.message}) from None
    if currency is None:
        currency = default_currency(session)
        if currency is None:
            raise CheckoutInvalid({"currency": "this shop has no default currency; name one"})
    lines = price_order(session, buyer.user_id, items, currency, changes.grace_of(settings))
    if coupon_code:
        pricing.apply_coupon(
            session, lines, coupon_code, currency=currency, user_id=buyer.user_id, now=utcnow()
        )
    if spec is None and pricing.totals(lines).total > 0:
        raise CheckoutInvalid({"provider": "no payment provider is enabled on this site"})
    try:
        recurring = subscription_plans.recurring_of(
            session,
            lines,
            coupon=bool(coupon_code),
            sells_subscriptions=getattr(spec.provider, "sells_subscriptions", False)
            if spec is not None
            else False,
            cycle_limits=getattr(spec.provider, "subscription_cycle_limits", None)
            if spec is not None
            else None,
            discounts_first_period=getattr(spec.provider, "discounts_first_period", False)
            if spec is not None
            else False,
        )
    except subscription_plans.SubscriptionRefused as exc:
        raise CheckoutInvalid({exc.field: exc.message}) from None
    trial_days = 0
    if recurring is not None:
        recurring = subscription_plans.with_trial(
            session, recurring, lines[0]["product_id"], _account_of(session, buyer)
        )
        trial_days = recurring.trial_days
    if trial_days and coupon_code:
        # The first charge comes after the trial, at the full price; a coupon discounts
        # the first period paid at checkout, and there is none.
        raise CheckoutInvalid(
            {
                "coupon": f"this subscription starts with a free trial of {trial_days} days; "
                "a coupon cannot be combined with it: remove the coupon"
            }
        )
    try:
        tax = tax_checkout.quote_order(
            session, settings, profile, lines, currency, billing, evidence_country=evidence_country
        )
        order_lines, order_tax = lines, tax
        if trial_days:
            # A free trial: the order buys it for nothing (no charge, no tax), and the
            # provider is asked for what each period after the trial costs (``lines``).
            order_lines = [subscription_plans.trial_line(lines[0], trial_days)]
            order_tax = tax_checkout.quote_order(
                session, settings, profile, order_lines, currency, billing,
                evidence_country=evidence_country,
            )  # fmt: skip
    except tax_checkout.TaxRefused as exc:
        log.error("no tax rate for an order: %s", exc)
        raise CheckoutInvalid(
            {"billing.country": "no tax rate is known for this country yet"}
        ) from None
    # What the provider is asked to charge: the order, or after a free trial each period.
    charged_lines, charged_tax = (lines, tax) if trial_days else (order_lines, order_tax)
    # (Built before the commit, to refuse a charge below the provider's minimum first.)
    to_charge = build_order(
        buyer, None, currency, FREE_PROVIDER, charged_lines, billing, charged_tax
    )
    _refuse_below_minimum(session, spec, currency, to_charge.total, coupon_code)
    recurring = subscription_plans.discount_first_period(recurring, lines, tax)
    order = _commit_new_order(
        registry,
        buyer,
        currency,
        spec.name if spec else FREE_PROVIDER,
        order_lines,
        coupon_code,
        cart_id,
        billing,
        order_tax,
        terms_version,
        trial=bool(trial_days),
    )
    number = order.number
    if order.status == "paid":
        return PlacedOrder(order, success_url(settings, number), sandbox=False)
    success, cancel = checkout_urls(settings, number)
    email = session.scalar(select(User.email).where(User.id == order.user_id))
    # Without a trial: the order itself, its items as committed.
    charged = to_charge if trial_days else order
    items = checkout_items(charged.items)
    request = CheckoutRequest(
        order_number=number,
        currency=currency,
        total=charged.total,
        items=items,
        discount=charged.discount,
        tax=sum(item["tax_added"] for item in items),
        tax_label=tax_checkout.tax_label(charged.tax_details),
        customer_email=email or "",
        success_url=success,
        cancel_url=cancel,
        recurring=recurring,
    )
    try:
        if recurring is not None and hasattr(spec.provider, "create_plan"):
            # A provider that bills against plans made in advance gets the plan first
            # (made once per product, price and cycle, then reused).
            plan_ref = provider_plans.provider_plan_for(registry, spec, request)
            request = dataclasses.replace(
                request, recurring=dataclasses.replace(recurring, provider_plan_ref=plan_ref)
            )
        checkout = spec.provider.create_checkout(request, provider_config(registry, spec))
    except NotConfigured as exc:
        if settings["cmsshop.environment"] == "production":
            _cancel_order(registry, number)
            log.error("checkout with %s refused: %s", spec.name, exc)
            raise CheckoutUnavailable(
                f"Payments with {spec.name} are not configured on this site.",
                code="payments_not_configured",
            ) from None
        # Development without a provider account: pay with simulate-payment.
        return PlacedOrder(order, sandbox_url(settings, number), sandbox=True)
    except ProviderUnavailable as exc:
        _cancel_order(registry, number)
        log.warning("checkout with %s failed for %s: %s", spec.name, number, exc)
        raise CheckoutUnavailable(
            f"{spec.name} could not start the payment; nothing was charged. Try again shortly.",
            code="provider_unavailable",
        ) from None
    order = _set_order(registry, number, provider_checkout_id=checkout.provider_checkout_id[:255])
    return PlacedOrder(order, checkout.redirect_url, sandbox=False)


def _refuse_below_minimum(
    session: Session, spec: ProviderSpec | None, currency: str, amount: int, coupon: str | None
) -> None:
    """A 422 for a charge smaller than the provider takes (its ``minimum_charges``, the
    card provider's as its network sets them): its API would refuse the checkout after
    the order was committed, and trying again would never help. On the coupon when one
    brought the charge down (without it the charge may be enough), else on the items."""
    minimums = getattr(spec.provider, "minimum_charges", None) if spec is not None else None
    minimum_text = (minimums or {}).get(currency)
    if minimum_text is None or amount <= 0:
        return
    row = session.get(Currency, currency)
    minimum = parse_major_amount(minimum_text, row.decimals if row is not None else 2)
    if amount >= minimum:
        return
    field = "coupon" if coupon else "items"
    raise CheckoutInvalid(
        {
            field: f"{spec.name} takes payments of at least "
            f"{amount_text(session, minimum, currency)}, and this one comes to "
            f"{amount_text(session, amount, currency)}"
            + (": remove the coupon or pay another way" if coupon else ": pay another way")
        }
    )


def _account_of(session: Session, buyer: Buyer) -> int | None:
    """The account the order goes to, if it exists yet (a guest's address may have one)."""
    if buyer.user_id is not None or not buyer.email:
        return buyer.user_id
    user = find_user(session, buyer.email)
    return user.id if user is not None else None


def _cancel_order(registry, number: str) -> None:
    """The provider could not take the order: cancel it and give its coupon back."""
    with own_transaction(registry) as session:
        take_write_lock(session)
        order_id = session.scalar(select(Order.id).where(Order.number == number))
        order = fulfilment.lock_order(session, order_id)
        fulfilment.close_order(session, order, "cancelled")


def find_customer_order(session: Session, user_id: int, number: str) -> Order | None:
    return session.scalar(
        select(Order)
        .where(Order.number == number, Order.user_id == user_id)
        .options(selectinload(Order.items))
    )


def find_visitor_order(session: Session, visitor_hash: str, number: str) -> Order | None:
    """A guest order placed from this browser (its cookie's visitor hash)."""
    return session.scalar(
        select(Order)
        .where(Order.number == number, Order.guest.is_(True), Order.visitor_hash == visitor_hash)
        .options(selectinload(Order.items))
    )


def create_demo_order(session: Session, user: User, product: Product, currency: str) -> Order:
    """A pending order for the demo customer, so ``simulate-payment`` can be tried at once."""
    line = pricing.purchase_line(product, 1, pricing.unit_price(product, currency))
    return insert_order(session, Buyer(user_id=user.id), user.id, currency, "cardprovider", [line])
