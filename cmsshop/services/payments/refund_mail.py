"""The buyer's refund e-mail: queued when the provider's event confirms a refund, in that
event's transaction (the order row locked), once per refund.

Its dedupe key names the refund: ``refund:<provider>:<provider's refund id>`` when the
event names one (Stripe's charge.refunded carries the charge's refunds, newest first;
PayPal's PAYMENT.CAPTURE.REFUNDED is the refund itself), else
``refund:<provider>:event:<event id>``. So a repeated delivery sends nothing more, and
neither does an event that arrives after the order was refunded in full (its refund, or
an older one, was told with the full refund) or one the state machine did not act on
(an order never paid, a refund in another currency).

What the mail says is read from the event and the order as the refund step left them:
this refund's amount (when the event states it), the refunded total and what is left
paid, and what was taken back: for a full refund the order's downloads and license keys,
by name; for a partial refund nothing (its licenses stay active, held for the seller's
review, as ``fulfilment.refund`` decides). A credit note line goes here once there are
tax invoices (``credit_note`` in the context, None until then).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import (
    CreditNote,
    Currency,
    Entitlement,
    License,
    Order,
    PaymentEvent,
    Refund,
    User,
)
from cmsshop.services.mail.outbox import enqueue
from cmsshop.services.payments import base as pb
from cmsshop.services.store.currencies import format_amount

REFUND_MAIL = "refund"
# The states a refund event is told from: the order had been paid (or was with a human).
TOLD_FROM = frozenset({"paid", "disputed", "needs_review"})


def refund_dedupe_key(provider: str, refund_id: str | None, event_id: str | None) -> str | None:
    if refund_id:
        return f"refund:{provider}:{refund_id}"
    if event_id:
        return f"refund:{provider}:event:{event_id}"
    return None


def _event_id(session: Session, row_id: int | None) -> str | None:
    if row_id is None:
        return None
    return session.scalar(select(PaymentEvent.event_id).where(PaymentEvent.id == row_id))


def _refund_row(session: Session, provider: str, refund_id: str | None) -> Refund | None:
    if not refund_id:
        return None
    return session.scalar(
        select(Refund).where(Refund.provider == provider, Refund.provider_refund_id == refund_id)
    )


def _revoked(session: Session, order: Order) -> tuple[list[str], list[dict[str, str]]]:
    """Downloads (product names) and licenses (product, key) of ``order`` now revoked."""
    names = {item.id: item.name for item in order.items}
    item_ids = list(names)
    downloads = [
        names[item_id]
        for item_id in session.scalars(
            select(Entitlement.order_item_id)
            .where(Entitlement.order_item_id.in_(item_ids), Entitlement.status == "revoked")
            .order_by(Entitlement.order_item_id)
        )
    ]
    licenses = [
        {"product": names[license.order_item_id], "key": license.key}
        for license in session.scalars(
            select(License)
            .where(License.order_item_id.in_(item_ids), License.status == "revoked")
            .order_by(License.order_item_id)
        )
    ]
    return downloads, licenses


def _credit_note(
    session: Session, order: Order, row: Refund | None, base_url: str
) -> dict[str, str] | None:
    """The credit note this refund issued (in this transaction, just before the mail):
    the refund row's, else (an event naming no refund) the order's newest."""
    query = select(CreditNote.number).where(CreditNote.order_id == order.id)
    if row is not None:
        query = query.where(CreditNote.refund_id == row.id)
    number = session.scalar(query.order_by(CreditNote.id.desc()).limit(1))
    if number is None:
        return None
    return {"number": number, "url": f"{base_url}/account/credit-notes/{number}"}


def queue_refund_mail(
    session: Session,
    settings: Mapping[str, Any],
    order: Order,
    action: pb.EventAction,
    *,
    provider: str,
    status_before: str,
    result_status: str,
    event_row_id: int | None,
) -> bool:
    """Queue the refund mail for ``action`` (a REFUND the state machine just handled on
    the locked ``order``, which was ``status_before``); False when nothing is to be told
    or it was told before."""
    if status_before not in TOLD_FROM or result_status == "duplicate":
        return False
    if action.currency and action.currency.upper() != order.currency:
        return False  # the state machine ignored it: nothing we can state in our currency
    full = order.status == "refunded"
    refunded = order.total if action.amount is None else min(action.amount, order.total)
    if not full and (action.amount is None or refunded <= 0):
        return False
    key = refund_dedupe_key(provider, action.refund_id, _event_id(session, event_row_id))
    if key is None:
        key = f"refund:{provider}:order:{order.id}:{refunded}"
    currency = session.get(Currency, order.currency)

    def money(amount: int) -> str:
        return format_amount(amount, currency.symbol, currency.decimals)

    downloads, licenses = _revoked(session, order) if full else ([], [])
    held_licenses = (
        []
        if full
        else list(
            session.scalars(
                select(License.key)
                .where(License.order_item_id.in_([item.id for item in order.items]))
                .where(License.status.in_(("active", "suspended")))
                .order_by(License.order_item_id)
            )
        )
    )
    this_refund = action.refund_amount  # None: unknown, the mail states the total only
    row = _refund_row(session, provider, action.refund_id)
    user = session.get(User, order.user_id)
    base_url = settings["cmsshop.base_url"].rstrip("/")
    return enqueue(
        session,
        settings,
        kind=REFUND_MAIL,
        to=user.email,
        subject=f"Refund for order {order.number}",
        template=REFUND_MAIL,
        context={
            "customer_name": user.name,
            "order_number": order.number,
            "full": full,
            "refund_amount": money(this_refund) if this_refund else None,
            "refunded_total": money(refunded),
            "remaining": money(max(order.total - refunded, 0)),
            "total": money(order.total),
            "revoked_downloads": downloads,
            "revoked_licenses": licenses,
            "kept_licenses": held_licenses,
            "refund_reference": row.provider_refund_id if row is not None else action.refund_id,
            "credit_note": _credit_note(session, order, row, base_url),
            "order_url": f"{base_url}/account/orders/{order.number}",
        },
        dedupe_key=key,
        user_id=order.user_id,
    )
