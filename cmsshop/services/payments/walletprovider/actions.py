"""What a PayPal event means for our orders (``interpret``'s helpers; no I/O)."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

from cmsshop.services.payments import base as pb
from cmsshop.services.payments.walletprovider.money import money_of

# Dispute outcomes (CUSTOMER.DISPUTE.RESOLVED). Lost: the buyer got the money back from
# us. Won: the money stays with us (PayPal covered the buyer, or the claim fell away).
DISPUTE_LOST_OUTCOMES = frozenset({"RESOLVED_BUYER_FAVOUR", "ACCEPTED", "REFUNDED"})
DISPUTE_WON_OUTCOMES = frozenset(
    {"RESOLVED_SELLER_FAVOUR", "RESOLVED_WITH_PAYOUT", "CANCELED_BY_BUYER", "DENIED"}
)

# PayPal object ids are upper-case alphanumerics (captures, orders) or prefixed with
# dashes (WH-..., PP-D-...); anything else is not put into a URL path.
_OBJECT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")
_CAPTURE_LINK = re.compile(r"/v2/payments/captures/([A-Za-z0-9-]{1,64})/?$")


def paypal_object_id(value: Any) -> str | None:
    return value if isinstance(value, str) and _OBJECT_ID.match(value) else None


def order_number_of(obj: Mapping[str, Any]) -> str | None:
    for key in ("custom_id", "invoice_id"):
        value = obj.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()[:64]
    return None


def link_of(obj: Mapping[str, Any], rel: str) -> str | None:
    links = obj.get("links")
    for link in links if isinstance(links, list) else []:
        if isinstance(link, Mapping) and link.get("rel") == rel:
            href = link.get("href")
            return href if isinstance(href, str) else None
    return None


def approved_action(resource: Mapping[str, Any], kind: str) -> pb.EventAction:
    """The buyer approved a PayPal order: ask for the capture (the machinery does it for
    a pending order of ours only). Approval is not payment; the capture's COMPLETED
    event fulfils."""
    units = resource.get("purchase_units")
    unit = units[0] if isinstance(units, list) and units else {}
    unit = unit if isinstance(unit, Mapping) else {}
    order_number = order_number_of(unit)
    paypal_order = paypal_object_id(resource.get("id"))
    status = resource.get("status")
    if paypal_order is None:
        return pb.EventAction(pb.IGNORE, order_number=order_number, reason=f"{kind} without an id")
    if status != "APPROVED":
        return pb.EventAction(
            pb.IGNORE,
            order_number=order_number,
            provider_object_id=paypal_order,
            reason=f"{kind} with order status {str(status)[:40]}; nothing to capture",
        )
    amount, currency = money_of(unit.get("amount"))
    return pb.EventAction(
        pb.CAPTURE,
        order_number=order_number,
        provider_object_id=paypal_order,
        amount=amount,
        currency=currency,
        reason="order approved by the buyer; approval is not payment, the capture is",
    )


def capture_action(action: str, resource: Mapping[str, Any], kind: str) -> pb.EventAction:
    capture_id = paypal_object_id(resource.get("id"))
    if capture_id is None:
        return pb.EventAction(pb.IGNORE, reason=f"{kind} without a usable capture id")
    amount, currency = money_of(resource.get("amount"))
    # provider_object_id: the PayPal order (our order's provider_checkout_id), so the
    # order is found even when custom_id was lost; confirm() reads the capture itself.
    related = resource.get("supplementary_data")
    related = related.get("related_ids") if isinstance(related, Mapping) else None
    paypal_order = related.get("order_id") if isinstance(related, Mapping) else None
    return pb.EventAction(
        action,
        order_number=order_number_of(resource),
        payment_reference=capture_id,
        provider_object_id=paypal_object_id(paypal_order) or capture_id,
        amount=amount,
        currency=currency,
        reason=kind,
    )


def refund_action(resource: Mapping[str, Any], kind: str) -> pb.EventAction:
    """REFUNDED / REVERSED carry a refund object whose ``up`` link names the capture."""
    up = link_of(resource, "up") or ""
    match = _CAPTURE_LINK.search(urllib.parse.urlsplit(up).path) if up else None
    capture_id = match.group(1) if match else None
    if capture_id is None and resource.get("status") in ("REFUNDED", "REVERSED"):
        capture_id = paypal_object_id(resource.get("id"))  # a capture object itself
    if capture_id is None:
        return pb.EventAction(pb.IGNORE, reason=f"{kind} without a capture reference")
    breakdown = resource.get("seller_payable_breakdown")
    total = breakdown.get("total_refunded_amount") if isinstance(breakdown, Mapping) else None
    amount, currency = money_of(total if total is not None else resource.get("amount"))
    # A refund resource (not a capture) is this refund: its id and its own amount.
    is_refund = match is not None
    own, own_currency = money_of(resource.get("amount")) if is_refund else (None, None)
    return pb.EventAction(
        pb.REFUND,
        order_number=order_number_of(resource),
        payment_reference=capture_id,
        provider_object_id=capture_id,
        amount=amount,
        currency=currency,
        reason=kind,
        refund_id=paypal_object_id(resource.get("id")) if is_refund else None,
        refund_amount=own if own_currency == currency else None,
    )


def dispute_action(action: str, resource: Mapping[str, Any], kind: str) -> pb.EventAction:
    """Disputes name the payment in ``disputed_transactions[]``: ``seller_transaction_id``
    is the capture id, ``custom`` our custom_id and ``invoice_number`` our invoice_id."""
    transactions = resource.get("disputed_transactions")
    for txn in transactions if isinstance(transactions, list) else []:
        if not isinstance(txn, Mapping):
            continue
        capture_id = paypal_object_id(txn.get("seller_transaction_id"))
        order_number = order_number_of(
            {"custom_id": txn.get("custom"), "invoice_id": txn.get("invoice_number")}
        )
        if capture_id or order_number:
            amount, currency = money_of(resource.get("dispute_amount"))
            return pb.EventAction(
                action,
                order_number=order_number,
                payment_reference=capture_id,
                provider_object_id=capture_id,
                amount=amount,
                currency=currency,
                reason=kind,
            )
    return pb.EventAction(pb.IGNORE, reason=f"{kind} names no transaction of ours")
