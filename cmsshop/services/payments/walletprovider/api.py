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
    """A non-2xx answer of the REST API (``issues``: the ``details[].issue`` codes)."""

    def __init__(self, status: int, issues: tuple[str, ...] = ()):
        detail = f" ({', '.join(issues)})" if issues else ""
        super().__init__(f"PayPal API answered HTTP {status}{detail}")
        self.status = status
        self.issues = issues


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
    # Item lines are informative; they are sent only when they add up to the total
    # (PayPal refuses an order whose breakdown does not match its amount).
    amounts = [item.get("amount") for item in checkout.items]
    readable = all(isinstance(a, int) and a >= 0 for a in amounts)
    if checkout.items and readable and sum(amounts) == checkout.total:
        try:
            unit["items"] = [
                {
                    "name": str(item.get("name") or item.get("product") or "Item")[:127],
                    "sku": str(item.get("product") or "")[:127],
                    "quantity": "1",
                    "category": "DIGITAL_GOODS",
                    "unit_amount": {
                        "currency_code": currency,
                        "value": to_decimal_string(item["amount"], currency),
                    },
                }
                for item in checkout.items
            ]
            unit["amount"]["breakdown"] = {
                "item_total": {"currency_code": currency, "value": total}
            }
        except ValueError:
            unit.pop("items", None)
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
