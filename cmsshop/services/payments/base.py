"""The contract between the shared payment machinery and each provider plugin.

The machinery (checkout, event log, exactly-once fulfilment, admin settings) knows
nothing provider-specific; a provider is one object implementing ``PaymentProvider``,
registered by its webhook plugin module. A third provider is one more such object.

Flow of a webhook: ``verify`` (before any write) -> event logged in its own transaction
-> ``interpret`` -> for ``fulfil``: ``confirm`` with the provider's API (unless the
operator trusts verified events, development only) -> shared fulfilment; for
``capture``: the optional ``capture`` method (no lock held), nothing marked paid.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any, Protocol

# What an event asks the machinery to do.
FULFIL = "fulfil"  # the payment is final: mark paid, invoice, entitlements, licenses
FAIL = "fail"  # payment failed: pending -> failed
CANCEL = "cancel"  # checkout abandoned/expired: pending -> cancelled
# A refund: paid -> refunded, revoke. When the action carries ``amount`` (the cumulative
# refunded amount), only amount >= order total in the order's currency revokes; less is a
# partial refund and changes nothing (event "ignored").
REFUND = "refund"
DISPUTE_OPENED = "dispute_opened"  # paid -> disputed, put on hold
DISPUTE_WON = "dispute_won"  # disputed -> paid, restore
DISPUTE_LOST = "dispute_lost"  # disputed -> refunded, revoke
# The buyer approved; ask the provider to take the money (``capture``), for a pending
# order only. Nothing is marked paid: the provider's "payment completed" event fulfils.
CAPTURE = "capture"
# Subscriptions (services/subscriptions): an invoice of a subscription was paid (the
# first period or a renewal), or the subscription changed (renewing, past due, paused,
# cancelled). Both are refetched from the provider before anything is written.
PERIOD_PAID = "period_paid"
SUBSCRIPTION_SYNC = "subscription_sync"
IGNORE = "ignore"  # nothing to do (200 "ignored")
ACTIONS = (
    FULFIL,
    FAIL,
    CANCEL,
    REFUND,
    DISPUTE_OPENED,
    DISPUTE_WON,
    DISPUTE_LOST,
    CAPTURE,
    PERIOD_PAID,
    SUBSCRIPTION_SYNC,
    IGNORE,
)


class SignatureInvalid(Exception):
    """The webhook failed verification; ``str(exc)`` is a reason safe to log (no secrets)."""


class ProviderUnavailable(Exception):
    """The provider's API could not be reached or answered with a server error."""


class NotConfigured(Exception):
    """A setting the provider needs (e.g. the webhook secret) is missing."""


@dataclasses.dataclass(frozen=True)
class VerifiedEvent:
    provider: str
    event_id: str
    event_type: str
    payload: dict[str, Any]  # the parsed JSON body
    raw: bytes  # the exact bytes that were verified


@dataclasses.dataclass(frozen=True)
class EventAction:
    action: str  # one of ACTIONS
    order_number: str | None = None  # our order number, when the event carries it
    payment_reference: str | None = None  # provider payment id (PaymentIntent, capture)
    provider_object_id: str | None = None  # object to confirm (Checkout Session, capture)
    amount: int | None = None  # minor units as stated by the event
    currency: str | None = None  # upper-case ISO 4217
    reason: str = ""  # why (for ignore / logs)
    # A refund event's own refund, when the event names it: the provider's refund id and
    # its amount (``amount`` is then the cumulative refunded amount of the payment).
    refund_id: str | None = None
    refund_amount: int | None = None
    # Subscription events: the provider's subscription and invoice ids, and when the
    # provider made the event (aware UTC; an event older than what is stored is ignored).
    subscription_ref: str | None = None
    invoice_ref: str | None = None
    event_created: dt.datetime | None = None


@dataclasses.dataclass(frozen=True)
class Confirmation:
    """The provider API's own account of a payment, fetched server-side."""

    final: bool  # the payment is complete (paid / COMPLETED)
    amount: int  # minor units
    currency: str  # upper-case ISO 4217
    order_number: str | None  # our reference as the provider holds it
    payment_reference: str  # the provider's payment id
    # The country the buyer gave the provider with the payment (Stripe's customer
    # details, PayPal's payer), a second piece of evidence of where the buyer is.
    country: str | None = None


@dataclasses.dataclass(frozen=True)
class Recurring:
    """A subscription's billing cycle: every ``count`` ``interval`` (day/week/month/year).
    ``plan_id`` is our subscription plan's (subscription_plans.id); ``provider_plan_ref``
    the provider's plan to subscribe to, for a provider that bills against plans made in
    advance (``create_plan``; the checkout fills it in before ``create_checkout``).

    A coupon discounts the first period only (the order it was applied to): then
    ``first_period_discount`` is what it takes off that period, tax included (minor
    units), and ``full_tax`` the tax added on top of the lines' full prices (prices
    entered without tax; 0 when they include it). Each later period costs the lines'
    ``unit_amount`` x ``quantity`` plus ``full_tax``; the first costs ``total``.

    ``trial_days``: days free before the first charge (0: charged from the start); the
    order that buys a trial costs nothing, and the request's lines and total are then
    what every period after the trial costs. A trial takes no coupon."""

    interval: str
    count: int = 1
    plan_id: int | None = None
    provider_plan_ref: str | None = None
    first_period_discount: int = 0
    full_tax: int = 0
    trial_days: int = 0


@dataclasses.dataclass(frozen=True)
class ProviderInvoice:
    """The provider API's account of one invoice of a subscription."""

    invoice_id: str
    subscription_ref: str
    paid: bool
    amount: int  # minor units paid
    currency: str  # upper-case ISO 4217
    period_start: dt.datetime  # the service period it pays for (the provider's dates)
    period_end: dt.datetime
    payment_reference: str | None  # the payment a refund goes back through
    first: bool  # it opened the subscription (paid by the order that bought it)
    order_number: str | None  # our order that bought the subscription
    # Why it was billed: "create" (the first), "cycle" (a renewal), "update" (a plan
    # change charged for the rest of the period).
    reason: str = "cycle"


@dataclasses.dataclass(frozen=True)
class ProviderSubscription:
    """The provider API's account of a subscription, in our statuses
    (models.SUBSCRIPTION_STATUSES)."""

    subscription_ref: str
    status: str
    current_period_end: dt.datetime | None
    cancel_at_period_end: bool
    ended_at: dt.datetime | None
    order_number: str | None
    customer_ref: str | None = None  # the buyer at the provider
    product_ref: str | None = None  # our product it is billed for, after a plan change
    # A free trial the subscription opened with, for a provider whose trial has no
    # invoice of its own (PayPal; Stripe's has an invoice of 0): the trial as a paid
    # invoice of 0, its first period, which fulfils the order that bought it.
    trial: ProviderInvoice | None = None


@dataclasses.dataclass(frozen=True)
class PlanPrice:
    """What a subscription changes to: our product, its name, and the amount billed
    each cycle (minor units; the product's price times the seats packs bought)."""

    slug: str
    name: str
    amount: int
    currency: str
    recurring: Recurring


@dataclasses.dataclass(frozen=True)
class PlanPreview:
    """The provider's own account of a plan change before it is made."""

    charged_now: int  # minor units, for the rest of the current period
    currency: str
    next_amount: int  # each cycle from the next one
    next_at: dt.datetime | None


@dataclasses.dataclass(frozen=True)
class CheckoutSession:
    redirect_url: str
    provider_checkout_id: str


@dataclasses.dataclass(frozen=True)
class CheckoutRequest:
    """What the provider is asked to charge: ``total`` (the order's, minor units) and the
    lines it is made of, ``[{"product", "name", "quantity", "unit_amount", "discount",
    "amount", "tax_added"}]`` with ``unit_amount * quantity - discount = amount``
    (services/payments/lines.py ``checkout_items`` builds them from order items);
    ``discount``: the order's coupon discount, the sum of the lines' (None: take the
    lines' sum; a provider that is told both checks they agree); ``tax``: the tax charged
    on top of the lines' amounts (prices entered without tax; 0 when they include it),
    named ``tax_label`` ("VAT 19 %"). The amounts plus ``tax`` make ``total``."""

    order_number: str
    currency: str
    total: int
    items: list[dict[str, Any]]
    customer_email: str
    success_url: str
    cancel_url: str
    discount: int | None = None
    tax: int = 0
    tax_label: str = "Tax"
    # A subscription: the provider charges the same lines again every cycle.
    recurring: Recurring | None = None


class PaymentProvider(Protocol):
    name: str  # "cardprovider", "walletprovider": also the URL segment and settings key
    # Admin settings fields: JSON name -> True if the value is a secret (encrypted at
    # rest, shown as its last 4 characters only).
    settings_fields: Mapping[str, bool]
    # Lower-case names of the headers ``verify`` reads: a rejected delivery keeps only
    # these (and content-type, user-agent), so an operator can re-verify it later.
    signature_headers: tuple[str, ...]

    def verify(
        self, headers: Mapping[str, str], raw_body: bytes, config: Mapping[str, Any]
    ) -> VerifiedEvent:
        """Check the signature of a delivery; raise SignatureInvalid or NotConfigured."""

    def interpret(self, event: VerifiedEvent) -> EventAction:
        """What this event means for our orders (no I/O)."""

    def confirm(self, action: EventAction, config: Mapping[str, Any]) -> Confirmation:
        """Ask the provider API for the payment's final state; raise ProviderUnavailable."""

    def create_checkout(
        self, checkout: CheckoutRequest, config: Mapping[str, Any]
    ) -> CheckoutSession:
        """Create the provider-side checkout; raise ProviderUnavailable."""

    # Optional, for a provider that sells subscriptions (``sells_subscriptions = True``):
    #
    # def fetch_invoice(self, invoice_ref: str, config) -> ProviderInvoice: ...
    # def fetch_subscription(self, subscription_ref: str, config) -> ProviderSubscription:
    #     """Both raise ProviderUnavailable or NotConfigured."""
    #
    # For reconciliation and self-service: ``list_paid_invoices(subscription_ref, config)``,
    # ``set_cancel_at_period_end(subscription_ref, cancel, config)`` (returns the
    # ProviderSubscription after the change), ``payment_method_url(customer_ref,
    # return_url, config)``.
    #
    # ``subscription_cycle_limits``: {interval: the largest count the provider bills}, for
    # a provider with narrower limits than ours (a longer cycle is refused at checkout).
    # ``discounts_first_period = True``: a coupon on a subscription is taken off its first
    # period only (``Recurring.first_period_discount``, ``full_tax``); without it, a
    # coupon on a subscription is refused at checkout.
    # ``minimum_charges``: {currency: the smallest charge the provider takes, in major
    # units ("0.50")}; a checkout whose charge would be smaller is refused (422) before
    # anything is committed.
    # ``cancels_at_once = True``: the provider has no cancellation at the period end, a
    # cancellation ends the subscription there at once (the paid period is kept here),
    # so nothing can be taken back.
    #
    # A provider that bills against plans made in advance:
    #
    # def create_plan(self, checkout: CheckoutRequest, config, sibling_plan_ref) -> str:
    #     """Make the provider's plan charging ``checkout.total`` every
    #     ``checkout.recurring`` cycle (after a coupon, ``first_period_discount`` more
    #     every cycle after the first); its id. ``sibling_plan_ref``: a plan made earlier
    #     for the same product (another price or cycle), whose provider-side product can
    #     be reused. Idempotent for the same plan; raise ProviderUnavailable/NotConfigured."""
    #
    # A provider whose payment events may name no subscription:
    #
    # def find_invoice(self, invoice_ref: str, subscription_ref: str, config):
    #     """The invoice as ``fetch_invoice`` gives it when the provider lists it among
    #     ``subscription_ref``'s payments, else None (it is not that subscription's)."""
    #
    # Optional (looked up with getattr; a provider whose ``interpret`` never answers
    # CAPTURE need not have it):
    #
    # def capture(self, action: EventAction, config: Mapping[str, Any]) -> None:
    #     """Take the money for an approved checkout (``action.provider_object_id``).
    #     Must be idempotent (the machinery may call it again for a redelivered or
    #     reprocessed event); "already captured" is success. Raise ProviderUnavailable
    #     (503, the provider retries) or NotConfigured."""
