"""The "data" object of each outgoing webhook event, and its subject.

What a seller's system needs to act on the change (numbers, keys, statuses, money in
minor units with its currency), never a secret of the shop's: no password hash, no
payment provider secret, no signing key. Subjects keep one thing's events in order:
an activation uses its licence's subject.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import Activation, License, Order, Product, SupportTicket, User
from cmsshop.util import isoformat_z


def order_subject(number: str) -> str:
    return f"order:{number}"


def license_subject(license_id: int) -> str:
    return f"license:{license_id}"


def ticket_subject(ticket_id: int) -> str:
    return f"ticket:{ticket_id}"


def _email(session: Session, user_id: int | None) -> str | None:
    if user_id is None:
        return None
    return session.scalar(select(User.email).where(User.id == user_id))


def order_data(order: Order, email: str | None) -> dict[str, Any]:
    return {
        "orderNumber": order.number,
        "status": order.status,
        "customerEmail": email,
        "currency": order.currency,
        "total": order.total,
        "tax": order.tax,
        "discount": order.discount,
        "couponCode": order.coupon_code,
        "paidAt": isoformat_z(order.paid_at),
        "items": [
            {
                "productSlug": item.product_slug,
                "name": item.name,
                "kind": item.kind,
                "quantity": item.quantity,
                "amount": item.amount,
            }
            for item in order.items
        ],
    }


def order_event(session: Session, order: Order) -> tuple[str, dict[str, Any]]:
    """(subject, data) of an order's event."""
    return order_subject(order.number), order_data(order, _email(session, order.user_id))


def license_data(
    license_id: int,
    *,
    key: str,
    product_slug: str,
    status: str,
    expires_at,
    max_activations: int,
    features,
    email: str | None,
    order_number: str | None = None,
) -> dict[str, Any]:
    return {
        "licenseId": license_id,
        "licenseKey": key,
        "productSlug": product_slug,
        "status": status,
        "expiresAt": isoformat_z(expires_at),
        "seats": max_activations,
        "features": list(features or []),
        "customerEmail": email,
        "orderNumber": order_number,
    }


def license_event(session: Session, license: License, **extra: Any) -> tuple[str, dict[str, Any]]:
    """(subject, data) of a licence's event; ``extra`` adds fields (what changed)."""
    slug = session.scalar(select(Product.slug).where(Product.id == license.product_id))
    data = license_data(
        license.id,
        key=license.key,
        product_slug=slug,
        status=license.status,
        expires_at=license.expires_at,
        max_activations=license.max_activations,
        features=license.features,
        email=_email(session, license.user_id),
    )
    return license_subject(license.id), {**data, **extra}


def activation_event(
    session: Session, activation: Activation, license_key: str | None = None
) -> tuple[str, dict[str, Any]]:
    """(subject, data) of an activation's event: its licence's subject."""
    if license_key is None:
        license_key = session.scalar(select(License.key).where(License.id == activation.license_id))
    return license_subject(activation.license_id), {
        "activationId": activation.id,
        "licenseId": activation.license_id,
        "licenseKey": license_key,
        "fingerprint": activation.fingerprint,
        "domain": activation.domain,
        "environment": activation.environment,
        "active": activation.active,
        "activatedAt": isoformat_z(activation.activated_at),
        "deactivatedAt": isoformat_z(activation.deactivated_at),
    }


def ticket_event(session: Session, ticket: SupportTicket) -> tuple[str, dict[str, Any]]:
    order_number = None
    if ticket.order_id is not None:
        order_number = session.scalar(select(Order.number).where(Order.id == ticket.order_id))
    return ticket_subject(ticket.id), {
        "ticketId": ticket.id,
        "ticketNumber": ticket.number,
        "subject": ticket.subject,
        "status": ticket.status,
        "customerEmail": _email(session, ticket.user_id),
        "orderNumber": order_number,
        "createdAt": isoformat_z(ticket.created_at),
    }


def ping_data() -> dict[str, Any]:
    return {"message": "A test event sent from the cmsshop console."}
