"""What an order line says once the order is placed, for everything downstream of it: the
provider's checkout, the invoice, the receipt and the order pages.

A line is ``unit_amount x quantity - discount = amount`` (its share of the coupon's
discount is already taken off ``amount``). Lines placed before quantities existed have
no unit price (``unit_amount`` NULL): they read as one unit at their amount, with no
discount, everywhere here.

Tax (services.tax.checkout): each line keeps its ``net`` and ``tax``; ``gross_of`` is what
the line adds to the order's total. With prices entered tax-inclusive ``amount`` is that
gross already; tax-exclusive, the tax comes on top of it. Lines from before taxes were
charged have neither: all net, no tax, gross = amount.
"""

from __future__ import annotations

from typing import Any


def unit_amount_of(item) -> int:
    """The unit price of an order item (its amount for a line from before quantities)."""
    return item.amount if item.unit_amount is None else item.unit_amount


def quantity_of(item) -> int:
    return 1 if item.unit_amount is None else item.quantity


def discount_of(item) -> int:
    return 0 if item.unit_amount is None else item.discount


def subtotal_of(item) -> int:
    """What the line costs before its share of the discount."""
    return unit_amount_of(item) * quantity_of(item)


def net_of(item) -> int:
    return item.amount if item.net is None else item.net


def tax_of(item) -> int:
    return 0 if item.tax is None else item.tax


def gross_of(item) -> int:
    """What the line adds to the order's total, tax included (OrderItem.gross)."""
    return item.gross


def tax_added_of(item) -> int:
    """The tax charged on top of the line's ``amount`` (prices entered without tax); 0
    when ``amount`` includes it."""
    return gross_of(item) - item.amount


def display_name(name: str, quantity: int) -> str:
    """``Name × 3`` for several units, the name alone for one."""
    return f"{name} × {quantity}" if quantity > 1 else name


def checkout_items(items) -> list[dict[str, Any]]:
    """The lines of a ``CheckoutRequest`` (services/payments/base.py) from order items:
    ``amount`` as the price list reads (the tax on top of it, if any, is ``tax_added``)."""
    return [
        {
            "product": item.product_slug,
            "name": item.name,
            "quantity": quantity_of(item),
            "unit_amount": unit_amount_of(item),
            "discount": discount_of(item),
            "amount": item.amount,
            "tax_added": tax_added_of(item),
        }
        for item in items
    ]


def invoice_lines(items, rate: str | None = None) -> list[dict[str, Any]]:
    """The ``Invoice.lines`` of order items, in the API's camelCase: they are served as
    stored (see ``read_invoice_lines`` for invoices written before quantities). ``rate``:
    the order's tax rate in percent (``Order.tax_details``), "0" when none; ``amount``
    is the line's gross, ``net + tax``."""
    return [
        {
            "product": item.product_slug,
            "name": item.name,
            "quantity": quantity_of(item),
            "unitAmount": unit_amount_of(item),
            "discount": discount_of(item),
            "net": net_of(item),
            "taxRate": rate or "0",
            "tax": tax_of(item),
            "amount": gross_of(item),
        }
        for item in items
    ]


def read_invoice_lines(lines: list | None) -> list[dict[str, Any]]:
    """Stored invoice lines with every field: an invoice issued before quantities has
    ``{"product", "name", "amount"}`` lines, which read as one unit at their amount; one
    issued before taxes reads as all net at 0 %.
    Invoices are never rewritten; this is how every reader sees them."""
    read = []
    for line in lines or []:
        if not isinstance(line, dict):
            continue
        amount = line.get("amount", 0)
        unit = line.get("unitAmount")
        taxed = "net" in line and "tax" in line
        read.append(
            {
                "product": line.get("product", ""),
                "name": line.get("name", ""),
                "quantity": line.get("quantity", 1) if unit is not None else 1,
                "unitAmount": amount if unit is None else unit,
                "discount": line.get("discount", 0) if unit is not None else 0,
                "net": line["net"] if taxed else amount,
                "taxRate": str(line.get("taxRate") or "0") if taxed else "0",
                "tax": line["tax"] if taxed else 0,
                "amount": amount,
            }
        )
    return read
