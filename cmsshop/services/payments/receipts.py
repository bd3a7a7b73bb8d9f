"""The order receipt: queued by fulfilment, in its transaction, once per order.

Split in two so fulfilment can gather everything (buyer, currency, items, license keys)
before it takes the invoice number -- which locks the year's counter row until the
commit -- and only render and insert the message afterwards (see ``fulfil_order``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import Currency, License, Order, User
from cmsshop.services.accounts.tokens import RECEIPT_SET_PASSWORD, guest_link_lifetime, order_link
from cmsshop.services.accounts.users import has_password
from cmsshop.services.mail.outbox import enqueue
from cmsshop.services.payments.lines import display_name, quantity_of, subtotal_of, unit_amount_of
from cmsshop.services.store.currencies import format_amount
from cmsshop.services.tax.checkout import tax_label


@dataclasses.dataclass(frozen=True)
class Receipt:
    """What a receipt says, but the invoice number (known only once it is taken)."""

    order_id: int
    user_id: int
    to: str
    context: dict[str, Any]
    # The buyer's account has no password (a guest checkout's): the receipt's link to
    # the order sets one; otherwise it leads through the login page.
    set_password: bool = False


def receipt_dedupe_key(order_id: int) -> str:
    return f"receipt:order:{order_id}"


def prepare_receipt(session: Session, order: Order) -> Receipt:
    """The receipt of a fulfilled ``order`` whose licenses are issued (flushed)."""
    user = session.get(User, order.user_id)
    currency = session.get(Currency, order.currency)
    item_ids = [item.id for item in order.items]
    licenses = {
        license.order_item_id: license.key
        for license in session.scalars(select(License).where(License.order_item_id.in_(item_ids)))
    }
    return build_receipt(order, user, currency, licenses)


def _tax_context(order: Order, money) -> dict[str, Any] | None:
    details = order.tax_details
    if not order.tax or not isinstance(details, dict):
        return None
    return {
        "label": tax_label(details),
        "amount": money(order.tax),
        "included": bool(details.get("pricesIncludeTax")),
    }


def build_receipt(order: Order, user: User, currency: Currency | None, licenses: dict) -> Receipt:
    """The receipt of ``order`` for ``user``; ``licenses``: key by order item id."""

    def money(amount: int) -> str:
        if currency is None:  # a currency row is a foreign key target; never missing
            return f"{amount} {order.currency}"
        return format_amount(amount, currency.symbol, currency.decimals)

    paid_at = order.paid_at or order.created_at
    return Receipt(
        order_id=order.id,
        user_id=order.user_id,
        to=user.email,
        set_password=not has_password(user),
        context={
            "customer_name": user.name,
            "order_number": order.number,
            "order_date": paid_at.strftime("%Y-%m-%d"),
            # Each line at its price before the coupon, so that the lines, less the one
            # discount line, make the total.
            "items": [
                {
                    "name": display_name(item.name, quantity_of(item)),
                    "quantity": quantity_of(item),
                    "unit_amount": money(unit_amount_of(item)),
                    "amount": money(subtotal_of(item)),
                }
                for item in order.items
            ],
            "subtotal": money(sum(subtotal_of(item) for item in order.items)),
            "discount": money(order.discount) if order.discount else None,
            "coupon_code": order.coupon_code if order.discount else None,
            "total": money(order.total),
            # The tax: a line before the total (prices without tax) or said to be
            # included after it; None without tax.
            "tax": _tax_context(order, money),
            "tax_notes": list((order.tax_details or {}).get("notes") or ()),
            "licenses": [
                {"product": item.name, "key": licenses[item.id]}
                for item in order.items
                if item.id in licenses
            ],
        },
    )


def receipt_message(settings: Mapping[str, Any], receipt: Receipt, invoice_number: str) -> dict:
    """``enqueue``'s arguments for ``receipt`` with its invoice number."""
    base_url = settings["cmsshop.base_url"].rstrip("/")
    order_number = receipt.context["order_number"]
    order_path = f"/account/orders/{order_number}"
    return {
        # A set-password receipt's kind tells the sender to issue its link's token as
        # it sends (services.accounts.tokens.MAILED_TOKEN_PURPOSES); one per order all
        # the same (the dedupe key).
        "kind": RECEIPT_SET_PASSWORD if receipt.set_password else "receipt",
        "to": receipt.to,
        "subject": f"Your receipt for order {order_number}",
        "template": "receipt",
        "context": {
            **receipt.context,
            "invoice_number": invoice_number,
            "invoice_url": f"{base_url}/account/invoices/{invoice_number}",
            "invoice_pdf_url": f"{base_url}/account/invoices/{invoice_number}.pdf",
            "downloads_url": f"{base_url}/account/downloads",
            "licenses_url": f"{base_url}/account/licenses",
            "set_password": receipt.set_password,
            "order_link": order_link(settings, order_path, set_password=receipt.set_password),
            "link_valid_for": guest_link_lifetime(settings) if receipt.set_password else None,
        },
        "dedupe_key": receipt_dedupe_key(receipt.order_id),
        "user_id": receipt.user_id,
    }


def queue_receipt(
    session: Session, settings: Mapping[str, Any], receipt: Receipt, invoice_number: str
) -> bool:
    """Queue ``receipt`` with its invoice number; False if this order's was queued."""
    return enqueue(session, settings, **receipt_message(settings, receipt, invoice_number))
