"""PayPal subscriptions (Subscriptions API v1): the request bodies, what the events mean
and how PayPal's account of a subscription and its payments reads in our terms (no I/O;
the REST calls are WalletProvider's).

PayPal bills against plans made in advance (a catalog product, a plan with a fixed
price and a billing cycle); a subscription is created for a plan and the buyer approves
it on PayPal's page. Each payment is a sale (``PAYMENT.SALE.COMPLETED``, its
``billing_agreement_id`` naming the subscription); a sale is our "invoice", one period.

The period a sale pays for starts at the sale and ends at the next payment: PayPal bills
at the start of each cycle. When the sale is the subscription's latest payment that is
``billing_info.next_billing_time``, else the time of the next completed payment in the
subscription's transactions. Nothing is computed by adding durations: PayPal's own
dates are the only source, so a billing date PayPal moves is followed as it is.

The one exception: the latest sale of a subscription PayPal will not bill again
(CANCELLED or EXPIRED, a suspended one cancelled included). PayPal then drops
``next_billing_time`` and states no date that ends that sale's period: what it keeps
(``billing_info.last_payment``, the sale itself; ``cycle_executions``, a count;
``start_time``; ``status_update_time``, the cancellation, inside the period) only
bounds its start. A renewal charged just before a cancellation (or whose event comes
after it) is still a confirmed payment, so its period ends where PayPal would have
billed next: the sale's time advanced by the plan's own billing frequency (the
REGULAR cycle's ``frequency`` from ``GET /v1/billing/plans/{id}``), by calendar as
PayPal bills (``advance``: the same day of the month, or the month's last when it is
shorter). Without a readable plan the period's end stays unknown (the event is
retried).

A plan may open with a free TRIAL cycle, which has no sale: the trial is then the
subscription's first period, an "invoice" of 0 (``trial_invoice``) from its start to
its first payment (``next_billing_time`` while the trial lasts), and every sale is a
renewal. A plan may instead open with a priced TRIAL cycle, a first period a coupon
discounted: that cycle is billed at the start like a regular one, so its sale is the
first period (the order's payment) as without it. The plan tells the two apart
(``plan_free_trial``: its TRIAL cycle with a price or without one), and WalletProvider
reads it for a subscription that ran a TRIAL cycle; the subscription's own
``cycle_executions``, where PayPal's published example writes a
``current_pricing_scheme_version`` only for a cycle with a price, stand in only where
the plan cannot be read.
"""

from __future__ import annotations

import calendar
import datetime as dt
from collections.abc import Mapping
from typing import Any

from cmsshop.services.payments import base as pb
from cmsshop.services.payments.walletprovider.actions import order_number_of, paypal_object_id
from cmsshop.services.payments.walletprovider.money import money_of, to_decimal_string

# PayPal's largest interval_count per interval_unit (Subscriptions API, frequency).
CYCLE_LIMITS = {"day": 365, "week": 52, "month": 12, "year": 1}
# PayPal's page where a buyer manages automatic payments (the funding source of each
# subscription); there is no API for a merchant to hand a buyer a card-update session.
AUTOPAY_URL = "https://www.paypal.com/myaccount/autopay/"
SANDBOX_AUTOPAY_URL = "https://www.sandbox.paypal.com/myaccount/autopay/"

# The state of a subscription changed: each is refetched before it is acted on.
# BILLING.SUBSCRIPTION.CREATED is left out: a subscription is APPROVAL_PENDING then, not
# live until the buyer approves and PayPal activates it.
STATE_EVENTS = (
    "BILLING.SUBSCRIPTION.ACTIVATED",
    "BILLING.SUBSCRIPTION.UPDATED",
    "BILLING.SUBSCRIPTION.RE-ACTIVATED",
    "BILLING.SUBSCRIPTION.SUSPENDED",
    "BILLING.SUBSCRIPTION.CANCELLED",
    "BILLING.SUBSCRIPTION.EXPIRED",
    "BILLING.SUBSCRIPTION.PAYMENT.FAILED",
)
SALE_COMPLETED = "PAYMENT.SALE.COMPLETED"

# PayPal's statuses in ours. ACTIVE with failed payments (failed_payments_count > 0,
# which PayPal resets to 0 after a successful payment) is past due: PayPal retries the
# charge. SUSPENDED is past due too: PayPal suspends a subscription once its failed
# payments reach the plan's payment_failure_threshold (the license keeps the grace
# while the buyer settles it). CANCELLED and EXPIRED are final.
_STATUSES = {"ACTIVE": "active", "SUSPENDED": "past_due", "CANCELLED": "ended", "EXPIRED": "ended"}
NOT_LIVE = ("APPROVAL_PENDING", "APPROVED")
# Transactions in which money was taken (a later refund does not undo the period's
# start); of these, the ones still paid.
_TAKEN = ("COMPLETED", "PARTIALLY_REFUNDED", "REFUNDED")
_PAID = ("COMPLETED", "PARTIALLY_REFUNDED")
PAID_SALE_STATES = ("completed", "partially_refunded")
# A failed payment suspends the subscription after the retries of one cycle (PayPal
# retries twice, five days apart), well within the default licence grace of 21 days.
PAYMENT_FAILURE_THRESHOLD = 1


# --- request bodies ----------------------------------------------------------------------


def _money(amount: int, currency: str) -> dict[str, str]:
    try:
        return {"currency_code": currency, "value": to_decimal_string(amount, currency)}
    except ValueError as exc:
        raise pb.ProviderUnavailable(str(exc)) from exc


def plan_name(checkout: pb.CheckoutRequest) -> str:
    item = checkout.items[0] if checkout.items else {}
    return str(item.get("name") or item.get("product") or "Subscription")[:127]


def product_body(checkout: pb.CheckoutRequest) -> dict[str, Any]:
    """``POST /v1/catalogs/products``: the product a plan bills for."""
    return {"name": plan_name(checkout), "type": "DIGITAL", "category": "SOFTWARE"}


def plan_body(checkout: pb.CheckoutRequest, product_id: str) -> dict[str, Any]:
    """``POST /v1/billing/plans``: the order's total every cycle, for ever (total_cycles
    0). The total already holds any tax added on top of the price, so the plan carries
    no ``taxes`` of its own; the same buyer's renewals cost what the first period did.
    After a coupon (``first_period_discount``) the first cycle is a TRIAL cycle of the
    order's total, discounted, tax included, and the regular ones charge the full price
    (the total plus the discount: the lines' full prices with their tax on top)."""
    recurring = checkout.recurring
    currency = checkout.currency.upper()
    cycle = f"{recurring.count} {recurring.interval}"
    frequency = {"interval_unit": recurring.interval.upper(), "interval_count": recurring.count}
    full = checkout.total + recurring.first_period_discount
    cycles = [
        {
            "frequency": frequency,
            "tenure_type": "REGULAR",
            "sequence": 1,
            "total_cycles": 0,
            "pricing_scheme": {"fixed_price": _money(full, currency)},
        }
    ]
    name = f"{plan_name(checkout)}, every {cycle}"
    if recurring.first_period_discount > 0:
        # PayPal bills each cycle at its start: the first sale is this TRIAL cycle's,
        # the order's total, and every later one the regular full price.
        cycles[0]["sequence"] = 2
        first = {
            "frequency": dict(frequency),
            "tenure_type": "TRIAL",
            "sequence": 1,
            "total_cycles": 1,
            "pricing_scheme": {"fixed_price": _money(checkout.total, currency)},
        }
        cycles.insert(0, first)
        name = f"{name}, first {to_decimal_string(checkout.total, currency)} {currency}"
    elif recurring.trial_days:
        # A free trial is a TRIAL cycle before the regular ones: one cycle of that many
        # days, with no pricing scheme (free), so nothing is charged at the start.
        cycles[0]["sequence"] = 2
        trial = {
            "frequency": {"interval_unit": "DAY", "interval_count": recurring.trial_days},
            "tenure_type": "TRIAL",
            "sequence": 1,
            "total_cycles": 1,
        }
        cycles.insert(0, trial)
        name = f"{name}, {recurring.trial_days} days free"
    return {
        "product_id": product_id,
        "name": name[:127],
        "status": "ACTIVE",
        "billing_cycles": cycles,
        "payment_preferences": {
            "auto_bill_outstanding": True,
            "payment_failure_threshold": PAYMENT_FAILURE_THRESHOLD,
        },
    }


def plan_request_id(checkout: pb.CheckoutRequest) -> str:
    """One idempotency key per plan key: two first checkouts at once get one plan."""
    r = checkout.recurring
    trial = f"-trial-{r.trial_days}" if r.trial_days else ""
    amount = f"{checkout.total}"
    if r.first_period_discount > 0:
        amount = f"{checkout.total + r.first_period_discount}-first-{checkout.total}"
    return (
        f"cmsshop-plan-{r.plan_id}-{checkout.currency.upper()}-{amount}"
        f"-{r.interval}-{r.count}{trial}"
    )


def subscription_body(checkout: pb.CheckoutRequest) -> dict[str, Any]:
    """``POST /v1/billing/subscriptions``: our order number as ``custom_id`` (PayPal
    copies it onto the subscription's sales as ``custom``)."""
    body: dict[str, Any] = {
        "plan_id": checkout.recurring.provider_plan_ref,
        "custom_id": checkout.order_number,
        "application_context": {
            "user_action": "SUBSCRIBE_NOW",
            "shipping_preference": "NO_SHIPPING",
            "return_url": checkout.success_url,
            "cancel_url": checkout.cancel_url,
        },
    }
    if checkout.customer_email:
        body["subscriber"] = {"email_address": checkout.customer_email}
    return body


# --- events ------------------------------------------------------------------------------


def parse_time(value: Any) -> dt.datetime | None:
    """PayPal's RFC 3339 time as an aware UTC datetime (None when unreadable)."""
    if not isinstance(value, str) or not 10 <= len(value) <= 64:
        return None
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return moment.astimezone(dt.UTC) if moment.tzinfo is not None else None


def format_time(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def sale_money(sale: Mapping[str, Any]) -> tuple[int | None, str | None]:
    """A v1 sale's ``amount`` is ``{"total", "currency"}``, not v2's money object."""
    amount = sale.get("amount")
    if not isinstance(amount, Mapping):
        return None, None
    return money_of({"currency_code": amount.get("currency"), "value": amount.get("total")})


def sale_order_number(sale: Mapping[str, Any]) -> str | None:
    fields = {"custom_id": sale.get("custom"), "invoice_id": sale.get("invoice_number")}
    return order_number_of(fields)


def sale_action(resource: Mapping[str, Any], created: dt.datetime | None) -> pb.EventAction:
    """PAYMENT.SALE.COMPLETED: a paid period. PayPal sends some renewal sales without
    ``billing_agreement_id``; such a one goes without ``subscription_ref`` and is matched
    to a subscription (or parked) by services/subscriptions/parked.py."""
    sale_id = paypal_object_id(resource.get("id"))
    if sale_id is None:
        return pb.EventAction(pb.IGNORE, reason=f"{SALE_COMPLETED} without a usable sale id")
    state = resource.get("state")
    if state not in PAID_SALE_STATES:
        return pb.EventAction(pb.IGNORE, reason=f"sale {sale_id} is {str(state)[:40]}")
    amount, currency = sale_money(resource)
    return pb.EventAction(
        pb.PERIOD_PAID,
        order_number=sale_order_number(resource),
        payment_reference=sale_id,
        amount=amount,
        currency=currency,
        reason=SALE_COMPLETED,
        subscription_ref=paypal_object_id(resource.get("billing_agreement_id")),
        invoice_ref=sale_id,
        event_created=created,
    )


SALE_REFUNDED = "PAYMENT.SALE.REFUNDED"


def sale_refund_action(resource: Mapping[str, Any]) -> pb.EventAction:
    """PAYMENT.SALE.REFUNDED: a subscription payment (a v1 sale) was refunded, in full or
    in part. The refund names its ``sale_id``, the payment reference its order was
    fulfilled with, so the shared refund step finds that order (a renewal's: one period
    taken back). No order number goes along: PayPal copies the subscription's
    ``custom_id`` (the order that bought it) onto every sale and its refunds, so it would
    name the first order for a renewal's refund. ``total_refunded_amount`` is the
    sale's refunded total where PayPal sends it; else this refund's own amount stands for
    it (a second partial refund then reads as partial and goes to the admin's review,
    never revoking too much). PayPal writes a refund's amount with a minus sign at times:
    the amounts are read unsigned."""
    sale_id = paypal_object_id(resource.get("sale_id"))
    if sale_id is None:
        return pb.EventAction(pb.IGNORE, reason=f"{SALE_REFUNDED} without a usable sale id")
    own, currency = sale_money({"amount": _unsigned(resource.get("amount"))})
    total = resource.get("total_refunded_amount")
    # v1 writes this one as {"value", "currency"} (v2's money objects say currency_code).
    cumulative, total_currency = (
        money_of(
            {
                "currency_code": total.get("currency", total.get("currency_code")),
                "value": str(total.get("value", "")).lstrip("-"),
            }
        )
        if isinstance(total, Mapping)
        else (None, None)
    )
    if cumulative is None or total_currency != currency:
        cumulative = own
    return pb.EventAction(
        pb.REFUND,
        payment_reference=sale_id,
        provider_object_id=sale_id,
        amount=cumulative,
        currency=currency,
        reason=SALE_REFUNDED,
        refund_id=paypal_object_id(resource.get("id")),
        refund_amount=own,
    )


def _unsigned(amount: Any) -> Any:
    if isinstance(amount, Mapping) and isinstance(amount.get("total"), str):
        return {**amount, "total": amount["total"].lstrip("-")}
    return amount


def state_action(kind: str, resource: Mapping[str, Any], created) -> pb.EventAction:
    ref = paypal_object_id(resource.get("id"))
    if ref is None:
        return pb.EventAction(pb.IGNORE, reason=f"{kind} without a usable subscription id")
    return pb.EventAction(
        pb.SUBSCRIPTION_SYNC,
        order_number=order_number_of({"custom_id": resource.get("custom_id")}),
        subscription_ref=ref,
        reason=kind,
        event_created=created,
    )


# --- PayPal's account in ours ----------------------------------------------------------------


def _billing(found: Mapping[str, Any]) -> Mapping[str, Any]:
    billing = found.get("billing_info")
    return billing if isinstance(billing, Mapping) else {}


def _executions(found: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The plan's cycles as PayPal ran them so far, by tenure type (TRIAL, REGULAR)."""
    cycles = _billing(found).get("cycle_executions")
    cycles = cycles if isinstance(cycles, list) else []
    return {str(cycle.get("tenure_type")): cycle for cycle in cycles if isinstance(cycle, Mapping)}


def ran_a_trial_cycle(found: Mapping[str, Any]) -> bool:
    """Its plan opens with a TRIAL cycle: a free trial, or a first period a coupon
    discounted (:func:`plan_free_trial` tells which)."""
    return "TRIAL" in _executions(found)


def plan_free_trial(plan: Mapping[str, Any]) -> bool | None:
    """Whether the plan (``GET /v1/billing/plans/{id}``) opens with a free TRIAL cycle:
    one without a price, or priced at 0. A TRIAL cycle with a price is a first period
    a coupon discounted, billed at its start as a regular one is. None when the plan
    states nothing readable."""
    cycles = plan.get("billing_cycles")
    if not isinstance(cycles, list):
        return None
    for cycle in cycles:
        if not isinstance(cycle, Mapping) or cycle.get("tenure_type") != "TRIAL":
            continue
        scheme = cycle.get("pricing_scheme")
        price = scheme.get("fixed_price") if isinstance(scheme, Mapping) else None
        if price is None:
            return True
        amount, _ = money_of(price)
        return None if amount is None else amount == 0
    return False


def began_with_trial(found: Mapping[str, Any], free_trial: bool | None = None) -> bool:
    """Opened with a free trial. ``free_trial`` is what the subscription's plan says
    (:func:`plan_free_trial`), the sure answer: the plans are ours. Without it, the
    subscription's own record is read as PayPal's published example writes it: only a
    cycle with a price has a ``current_pricing_scheme_version``."""
    trial = _executions(found).get("TRIAL")
    if trial is None:
        return False
    if free_trial is not None:
        return free_trial
    return trial.get("current_pricing_scheme_version") is None


def in_trial(found: Mapping[str, Any], free_trial: bool | None = None) -> bool:
    """Still in its free trial: no regular cycle billed yet."""
    regular = _executions(found).get("REGULAR") or {}
    completed = regular.get("cycles_completed")
    return (
        began_with_trial(found, free_trial)
        and not (isinstance(completed, int) and completed > 0)
        and not isinstance(_billing(found).get("last_payment"), Mapping)
    )


def trial_invoice(
    found: Mapping[str, Any],
    ref: str,
    first_payment: dt.datetime | None = None,
    free_trial: bool | None = None,
) -> pb.ProviderInvoice | None:
    """The free trial the subscription opened with, as its first period, an invoice of 0
    (None without a trial, or when its end is not known): from the subscription's start
    to its first payment, ``first_payment`` once there was one, else
    ``next_billing_time`` (while the trial lasts, PayPal's first billing)."""
    if not began_with_trial(found, free_trial):
        return None
    start = parse_time(found.get("start_time"))
    end = first_payment
    if end is None and in_trial(found, free_trial):
        end = parse_time(_billing(found).get("next_billing_time"))
    _, currency = money_of(_billing(found).get("outstanding_balance"))
    if start is None or end is None or end <= start or currency is None:
        return None
    return pb.ProviderInvoice(
        invoice_id=f"{ref}-TRIAL",
        subscription_ref=ref,
        paid=True,
        amount=0,
        currency=currency,
        period_start=start,
        period_end=end,
        payment_reference=None,
        first=True,
        order_number=order_number_of({"custom_id": found.get("custom_id")}),
        reason="create",
    )


def subscription_of(
    found: Mapping[str, Any],
    ref: str,
    transactions: list[Any] | None = None,
    free_trial: bool | None = None,
) -> pb.ProviderSubscription:
    """Our account of ``GET /v1/billing/subscriptions/{id}``. A subscription not live
    yet (APPROVAL_PENDING, APPROVED) or in a status PayPal has not documented is
    ProviderUnavailable: the event waits (503) until PayPal activates it. Active in its
    free trial is trialing; the trial itself comes along as ``trial`` (its end after
    the trial is the first payment in ``transactions``)."""
    if found.get("id") != ref:
        raise pb.ProviderUnavailable("PayPal answered for a different subscription")
    status = str(found.get("status"))
    if status in NOT_LIVE:
        raise pb.ProviderUnavailable(f"subscription {ref} is {status}: not live yet")
    ours = _STATUSES.get(status)
    if ours is None:
        raise pb.ProviderUnavailable(f"subscription {ref} has an unknown status {status[:40]}")
    failed = _billing(found).get("failed_payments_count")
    if ours == "active" and isinstance(failed, int) and failed > 0:
        ours = "past_due"
    elif ours == "active" and in_trial(found, free_trial):
        ours = "trialing"
    payments = _payments(transactions or [])
    subscriber = found.get("subscriber")
    payer = subscriber.get("payer_id") if isinstance(subscriber, Mapping) else None
    return pb.ProviderSubscription(
        subscription_ref=ref,
        status=ours,
        current_period_end=parse_time(_billing(found).get("next_billing_time")),
        cancel_at_period_end=False,  # PayPal has no such thing: a cancellation is at once
        ended_at=parse_time(found.get("status_update_time")) if ours == "ended" else None,
        order_number=order_number_of({"custom_id": found.get("custom_id")}),
        customer_ref=paypal_object_id(payer),
        trial=trial_invoice(found, ref, payments[0]["time"] if payments else None, free_trial),
    )


def transactions_window(
    found: Mapping[str, Any], now: dt.datetime, also: dt.datetime | None = None
) -> tuple[str, str]:
    """(start_time, end_time) of the transactions list: from a day before the
    subscription started to a day after the latest of now, its last payment and
    ``also`` (the sale asked about): PayPal's clock, not ours, dates its payments."""
    started = parse_time(found.get("start_time")) or parse_time(found.get("create_time"))
    last = _billing(found).get("last_payment")
    latest = [now, parse_time(last.get("time")) if isinstance(last, Mapping) else None, also]
    end = max(moment for moment in latest if moment is not None)
    start = min(started or end, end) - dt.timedelta(days=1)
    return format_time(start), format_time(end + dt.timedelta(days=1))


def _payments(transactions: list[Any]) -> list[dict[str, Any]]:
    """The transactions in which money was taken, oldest first, readable ones only."""
    found = []
    for txn in transactions:
        if not isinstance(txn, Mapping) or txn.get("status") not in _TAKEN:
            continue
        txn_id, moment = paypal_object_id(txn.get("id")), parse_time(txn.get("time"))
        breakdown = txn.get("amount_with_breakdown")
        gross = breakdown.get("gross_amount") if isinstance(breakdown, Mapping) else None
        amount, currency = money_of(gross)
        if txn_id is None or moment is None or amount is None or currency is None:
            continue
        found.append(
            {"id": txn_id, "time": moment, "amount": amount, "currency": currency,
             "paid": txn.get("status") in _PAID}
        )  # fmt: skip
    found.sort(key=lambda p: (p["time"], p["id"]))
    return found


def sale_as_transaction(sale: Mapping[str, Any]) -> dict[str, Any] | None:
    """A sale in the shape of a transaction, for a sale the list does not show yet."""
    amount = sale.get("amount")
    if not isinstance(amount, Mapping):
        return None
    state = str(sale.get("state") or "").upper()
    return {
        "id": sale.get("id"),
        "status": state,
        "time": sale.get("create_time"),
        "amount_with_breakdown": {
            "gross_amount": {"currency_code": amount.get("currency"), "value": amount.get("total")}
        },
    }


# PayPal will not bill a subscription in these statuses again.
BILLED_NO_MORE = ("CANCELLED", "EXPIRED")
_UNITS = ("DAY", "WEEK", "MONTH", "YEAR")


def billed_no_more(found: Mapping[str, Any]) -> bool:
    """PayPal will not bill it again and states no next billing time: its latest sale's
    period ends one plan frequency after the sale (``invoices_of``)."""
    return found.get("status") in BILLED_NO_MORE and (
        parse_time(_billing(found).get("next_billing_time")) is None
    )


def plan_frequency(plan: Mapping[str, Any]) -> tuple[str, int] | None:
    """(interval_unit, interval_count) of the plan's REGULAR billing cycle, as PayPal's
    ``GET /v1/billing/plans/{id}`` states it; None when it states none readable."""
    cycles = plan.get("billing_cycles")
    for cycle in cycles if isinstance(cycles, list) else []:
        if not isinstance(cycle, Mapping) or cycle.get("tenure_type") != "REGULAR":
            continue
        frequency = cycle.get("frequency")
        if not isinstance(frequency, Mapping):
            return None
        unit, count = frequency.get("interval_unit"), frequency.get("interval_count", 1)
        limit = CYCLE_LIMITS.get(str(unit).lower())
        if unit not in _UNITS or type(count) is not int or not 1 <= count <= (limit or 0):
            return None
        return unit, count
    return None


def advance(moment: dt.datetime, frequency: tuple[str, int]) -> dt.datetime:
    """``moment`` plus one billing cycle, by calendar as PayPal bills: days and weeks as
    such, months and years to the same day of the month, or the month's last day when
    it is shorter (31 January, one month: 28 or 29 February)."""
    unit, count = frequency
    if unit in ("DAY", "WEEK"):
        return moment + dt.timedelta(days=count * (7 if unit == "WEEK" else 1))
    months = moment.year * 12 + moment.month - 1 + count * (12 if unit == "YEAR" else 1)
    year, month = divmod(months, 12)
    day = min(moment.day, calendar.monthrange(year, month + 1)[1])
    return moment.replace(year=year, month=month + 1, day=day)


def invoices_of(
    found: Mapping[str, Any],
    ref: str,
    transactions: list[Any],
    frequency: tuple[str, int] | None = None,
    free_trial: bool | None = None,
) -> list[tuple[pb.ProviderInvoice | None, str]]:
    """Every payment of the subscription as (our invoice, its sale id). The latest
    payment of a subscription PayPal bills no more (``billed_no_more``) ends one plan
    ``frequency`` after it (the module's one exception). The invoice is None when its
    end is not known: no ``frequency`` given for such a one, or PayPal states a time
    before the payment (``next_billing_time`` is briefly wrong right after
    activation)."""
    payments = _payments(transactions)
    next_billing = parse_time(_billing(found).get("next_billing_time"))
    ended = billed_no_more(found)
    number = order_number_of({"custom_id": found.get("custom_id")})
    # A free trial is the first period: every sale after it is a renewal.
    trial = trial_invoice(found, ref, payments[0]["time"] if payments else None, free_trial)
    invoices: list[tuple[pb.ProviderInvoice | None, str]] = []
    if trial is not None:
        invoices.append((trial, trial.invoice_id))
    for index, payment in enumerate(payments):
        later = payments[index + 1]["time"] if index + 1 < len(payments) else next_billing
        if later is None and ended and frequency is not None:
            later = advance(payment["time"], frequency)
        invoice = None
        if later is not None and later > payment["time"]:
            invoice = pb.ProviderInvoice(
                invoice_id=payment["id"],
                subscription_ref=ref,
                paid=payment["paid"],
                amount=payment["amount"],
                currency=payment["currency"],
                period_start=payment["time"],
                period_end=later,
                payment_reference=payment["id"],
                first=index == 0 and not began_with_trial(found, free_trial),
                order_number=number,
            )
        invoices.append((invoice, payment["id"]))
    return invoices


def next_link(data: Mapping[str, Any]) -> str | None:
    for link in data.get("links") or []:
        if isinstance(link, Mapping) and link.get("rel") == "next":
            href = link.get("href")
            return href if isinstance(href, str) else None
    return None
