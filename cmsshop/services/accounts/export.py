"""Everything the shop keeps about one account, as one JSON document for its owner
(the "download all my data" of the settings page and ``GET /api/account/export``).

What is in it: the profile, the saved billing details, every order with its items
and the billing snapshot it was placed with, the numbers and totals of the invoices and
credit notes (their PDFs stay on the invoice pages), the licenses with their keys (the
owner's own keys are theirs to keep; the export goes only to the logged-in owner) and
their activations, the support tickets with their conversations, and the audit entries
of the account. Nothing secret to the shop is in it: no password hash, token or
session, no staff note.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from cmsshop.models import (
    CreditNote,
    Invoice,
    License,
    Order,
    SupportTicket,
    User,
)
from cmsshop.services.audit.entries import entries_for
from cmsshop.services.tax import billing
from cmsshop.util import isoformat_z, utcnow

FORMAT_VERSION = 1


def _order(order: Order) -> dict:
    return {
        "number": order.number,
        "status": order.status,
        "currency": order.currency,
        "total": order.total,
        "tax": order.tax,
        "discount": order.discount,
        "couponCode": order.coupon_code,
        "provider": order.provider,
        "guest": order.guest,
        "billing": order.billing,
        "termsVersion": order.terms_version,
        "termsAcceptedAt": isoformat_z(order.terms_accepted_at),
        "createdAt": isoformat_z(order.created_at),
        "paidAt": isoformat_z(order.paid_at),
        "items": [
            {
                "product": item.product_slug,
                "name": item.name,
                "kind": item.kind,
                "quantity": item.quantity,
                "unitAmount": item.unit_amount if item.unit_amount is not None else item.amount,
                "discount": item.discount,
                "amount": item.amount,
                "net": item.net,
                "tax": item.tax,
            }
            for item in order.items
        ],
    }


def _license(license: License) -> dict:
    return {
        "key": license.key,
        "product": license.product.slug,
        "status": license.status,
        "maxActivations": license.max_activations,
        "expiresAt": isoformat_z(license.expires_at),
        "features": list(license.features or []),
        "createdAt": isoformat_z(license.created_at),
        "activations": [
            {
                "domain": activation.domain,
                "environment": activation.environment,
                "active": activation.active,
                "activatedAt": isoformat_z(activation.activated_at),
                "lastValidatedAt": isoformat_z(activation.last_validated_at),
                "deactivatedAt": isoformat_z(activation.deactivated_at),
            }
            for activation in license.activations
        ],
    }


def _ticket(ticket: SupportTicket) -> dict:
    return {
        "number": ticket.number,
        "subject": ticket.subject,
        "body": ticket.body,
        "status": ticket.status,
        "createdAt": isoformat_z(ticket.created_at),
        "messages": [
            {
                "fromStaff": message.from_staff,
                "body": message.body,
                "createdAt": isoformat_z(message.created_at),
            }
            for message in ticket.messages
        ],
    }


def account_data(session: Session, user: User) -> dict:
    """The owner's data, JSON-ready (camelCase, money in minor units, times in UTC)."""
    details = billing.profile_details(billing.load_profile(session, user.id))
    orders = session.scalars(
        select(Order)
        .where(Order.user_id == user.id)
        .options(selectinload(Order.items))
        .order_by(Order.id)
    ).all()
    invoices = session.scalars(
        select(Invoice).where(Invoice.user_id == user.id).order_by(Invoice.id)
    ).all()
    credit_notes = session.scalars(
        select(CreditNote).where(CreditNote.user_id == user.id).order_by(CreditNote.id)
    ).all()
    licenses = session.scalars(
        select(License)
        .where(License.user_id == user.id)
        .options(selectinload(License.activations), selectinload(License.product))
        .order_by(License.id)
    ).all()
    tickets = session.scalars(
        select(SupportTicket)
        .where(SupportTicket.user_id == user.id)
        .options(selectinload(SupportTicket.messages))
        .order_by(SupportTicket.id)
    ).all()
    activity = entries_for(session, "user", user.id, limit=10_000)
    order_numbers = {order.id: order.number for order in orders}
    return {
        "format": FORMAT_VERSION,
        "exportedAt": isoformat_z(utcnow()),
        "profile": {
            "id": user.id,
            "email": user.email,
            "name": user.name,
            "role": user.role,
            "createdAt": isoformat_z(user.created_at),
            "emailVerifiedAt": isoformat_z(user.email_verified_at),
        },
        "billing": details.as_api() if details is not None else None,
        "orders": [_order(order) for order in orders],
        "invoices": [
            {
                "number": invoice.number,
                "order": order_numbers.get(invoice.order_id),
                "issuedAt": isoformat_z(invoice.issued_at),
                "currency": invoice.currency,
                "total": invoice.total,
            }
            for invoice in invoices
        ],
        "creditNotes": [
            {
                "number": note.number,
                "order": order_numbers.get(note.order_id),
                "kind": note.kind,
                "issuedAt": isoformat_z(note.issued_at),
                "currency": note.currency,
                "total": note.total,
            }
            for note in credit_notes
        ],
        "licenses": [_license(license) for license in licenses],
        "tickets": [_ticket(ticket) for ticket in tickets],
        "activity": [
            {
                "at": isoformat_z(entry.created_at),
                "action": entry.action,
                "actor": entry.actor,
                "summary": entry.summary,
                "ip": entry.ip,
            }
            for entry in activity
        ],
    }


def export_file_name(user: User) -> str:
    return f"account-{user.id}-data-{utcnow().date().isoformat()}.json"
