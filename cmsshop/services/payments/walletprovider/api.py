"""The REST API: its errors and the Orders v2 request body."""

from __future__ import annotations

from typing import Any

import requests

from cmsshop.services.payments.base import (
    CheckoutRequest,
    ProviderUnavailable,
)
from cmsshop.services.payments.walletprovider.money import to_decimal_string


class PayPalApiError(ProviderUnavailable):
    """A non-2xx answer of the REST API (``issues``: the ``details[].issue`` codes of
    the v2 APIs; ``name``: the error's name, which is all the v1 APIs' errors say, e.g.
    ``TRANSACTION_ALREADY_REFUNDED``)."""

    def __init__(self, status: int, issues: tuple[str, ...] = (), name: str | None = None):
        shown = issues or ((name,) if name else ())
        detail = f" ({', '.join(shown)})" if shown else ""
        super().__init__(f"PayPal API answered HTTP {status}{detail}")
        self.status = status
        self.issues = issues
        self.name = name


def api_issues(response: requests.Response) -> tuple[str, ...]:
    try:
        data = response.json()
    except ValueError:
        return ()
    details = data.get("details") if isinstance(data, dict) else None
    found = [
        d["issue"][:64]
        for d in (details if isinstance(details, list) else [])[:10]
        if isinstance(d, dict) and isinstance(d.get("issue"), str)
    ]
    return tuple(found)


def api_error_name(response: requests.Response) -> str | None:
    """The error's ``name`` (``[A-Z_]`` only, at most 64 characters), if it states one."""
    try:
        data = response.json()
    except ValueError:
        return None
    name = data.get("name") if isinstance(data, dict) else None
    if isinstance(name, str) and 0 < len(name) <= 64 and name.replace("_", "").isalpha():
        return name if name.isupper() else None
    return None


def checkout_order_body(checkout: CheckoutRequest) -> dict[str, Any]:
    """The Orders v2 request: intent CAPTURE, our order number as custom_id/invoice_id."""
    currency = checkout.currency.upper()
    try:
        total = to_decimal_string(checkout.total, currency)
    except ValueError as exc:
        raise ProviderUnavailable(str(exc)) from exc
    unit: dict[str, Any] = {
        "reference_id": checkout.order_number,
        "custom_id": checkout.order_number,
        "invoice_id": checkout.order_number,
        "description": f"Order {checkout.order_number}",
        "amount": {"currency_code": currency, "value": total},
    }
    try:
        lines = _breakdown(checkout, currency)
    except ValueError:  # an amount PayPal cannot take as such (fractional HUF, ...)
        lines = None
    if lines is not None:
        unit["items"], unit["amount"]["breakdown"] = lines
    return {
        "intent": "CAPTURE",
        "purchase_units": [unit],
        "payment_source": {
            "paypal": {
                "experience_context": {
                    "return_url": checkout.success_url,
                    "cancel_url": checkout.cancel_url,
                    "user_action": "PAY_NOW",
                    "shipping_preference": "NO_SHIPPING",
                }
            }
        },
    }


def _count(value: Any, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _breakdown(checkout: CheckoutRequest, currency: str) -> tuple[list, dict] | None:
    """(``items``, ``amount.breakdown``) of the purchase unit, or None when the lines do
    not add up. Item lines are informative, but PayPal checks them: each item is its unit
    price x quantity, ``item_total`` is their sum and ``amount`` must equal item_total -
    discount, or the whole order is refused (422). So they are sent only when every line
    reads ``unit_amount x quantity - discount = amount``, the amounts sum to the total and
    the discounts to the order's discount; otherwise the order goes without them and the
    buyer still pays the right total. The coupon is one order-level ``discount``: PayPal
    has no per-item discount (nor promo codes of its own). Tax added on top of prices
    entered without tax is the breakdown's ``tax_total`` (amount = item_total - discount
    + tax_total)."""
    items = checkout.items
    if not items:
        return None
    sent = []
    for item in items:
        amount = item.get("amount")
        unit = item.get("unit_amount", amount)
        quantity = item.get("quantity", 1)
        discount = item.get("discount", 0)
        if not (
            _count(amount, 0)
            and _count(unit, 0)
            and _count(quantity, 1)
            and _count(discount, 0)
            and unit * quantity - discount == amount
        ):
            return None
        sent.append(
            {
                "name": str(item.get("name") or item.get("product") or "Item")[:127],
                "sku": str(item.get("product") or "")[:127],
                "quantity": str(quantity),
                "category": "DIGITAL_GOODS",
                "unit_amount": {
                    "currency_code": currency,
                    "value": to_decimal_string(unit, currency),
                },
            }
        )
    discount = sum(item.get("discount", 0) for item in items)
    tax = checkout.tax
    if sum(item["amount"] for item in items) + tax != checkout.total:
        return None
    if checkout.discount is not None and discount != checkout.discount:
        return None
    breakdown = {
        "item_total": {
            "currency_code": currency,
            "value": to_decimal_string(checkout.total - tax + discount, currency),
        }
    }
    if tax:
        breakdown["tax_total"] = {
            "currency_code": currency,
            "value": to_decimal_string(tax, currency),
        }
    if discount:
        breakdown["discount"] = {
            "currency_code": currency,
            "value": to_decimal_string(discount, currency),
        }
    return sent, breakdown


def refund_body(amount: int, currency: str, reason: str) -> dict[str, Any]:
    """``POST /v2/payments/captures/{id}/refund``: the amount (PayPal's decimal string)
    and the reason as the note the buyer sees. No invoice_id: PayPal keeps those unique
    per refund, and the refund's event finds the order by its capture anyway."""
    try:
        value = to_decimal_string(amount, currency.upper())
    except ValueError as exc:
        raise ProviderUnavailable(str(exc)) from exc
    body: dict[str, Any] = {"amount": {"currency_code": currency.upper(), "value": value}}
    if reason.strip():
        body["note_to_payer"] = reason.strip()[:255]
    return body


def sale_refund_body(amount: int, currency: str, reason: str) -> dict[str, Any]:
    """``POST /v1/payments/sale/{id}/refund``: the amount always stated (v1's ``total``
    and ``currency``, not v2's money object), so PayPal refunds what was asked or
    refuses, never the whole sale by default; the reason as the refund's description."""
    try:
        value = to_decimal_string(amount, currency.upper())
    except ValueError as exc:
        raise ProviderUnavailable(str(exc)) from exc
    body: dict[str, Any] = {"amount": {"total": value, "currency": currency.upper()}}
    if reason.strip():
        body["description"] = reason.strip()[:255]
    return body
