"""Orders as the admin console sees them: the filtered list, and one order with
everything its payment led to (fulfilment, the provider events, invoice, entitlements,
licenses, support tickets about it)."""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from cmsshop.models import (
    CreditNote,
    Currency,
    Entitlement,
    Fulfilment,
    Invoice,
    License,
    Order,
    OrderNote,
    PaymentEvent,
    SupportTicket,
    User,
)
from cmsshop.services.paging import Page, PageRequest, fetch_page
from cmsshop.services.tax.credit_notes import credit_notes_of_order
from cmsshop.util import utcnow


class OrderMissing(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class OrderFilters:
    status: str | None = None
    provider: str | None = None
    customer: str | None = None  # a part of the customer's email
    date_from: dt.date | None = None  # created on or after this day (UTC)
    date_to: dt.date | None = None  # created on or before this day (UTC)


@dataclasses.dataclass(frozen=True)
class OrderRow:
    order: Order
    customer: User
    currency: Currency


@dataclasses.dataclass(frozen=True)
class OrderDetail:
    order: Order
    customer: User
    currency: Currency
    fulfilment: Fulfilment | None
    # The logged event that fulfilled the order (None for a manual fulfilment), and the
    # admin who fulfilled it by hand.
    fulfilled_by_event: PaymentEvent | None
    fulfilled_by_admin: User | None
    events: list[PaymentEvent]
    invoice: Invoice | None
    credit_notes: list[CreditNote]
    entitlements: list[Entitlement]
    licenses: list[License]
    tickets: list[SupportTicket]
    notes: list[OrderNote]


def like_part(value: str) -> str:
    """``%value%`` for LIKE, with LIKE's own wildcards escaped (``\\`` is the escape)."""
    escaped = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _day_start(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(0, 0), dt.UTC)


def list_orders(session: Session, paging: PageRequest, filters: OrderFilters) -> Page:
    """A page of OrderRow, newest first."""
    query = (
        select(Order, User, Currency)
        .join(User, User.id == Order.user_id)
        .join(Currency, Currency.code == Order.currency)
    )
    if filters.status:
        query = query.where(Order.status == filters.status)
    if filters.provider:
        query = query.where(Order.provider == filters.provider)
    if filters.customer:
        # Emails are stored lower-cased.
        query = query.where(User.email.like(like_part(filters.customer.lower()), escape="\\"))
    if filters.date_from:
        query = query.where(Order.created_at >= _day_start(filters.date_from))
    if filters.date_to:
        query = query.where(Order.created_at < _day_start(filters.date_to + dt.timedelta(days=1)))
    query = query.order_by(Order.created_at.desc(), Order.id.desc())
    page = fetch_page(session, query, paging, scalars=False)
    return page.map(lambda row: OrderRow(*row))


def order_detail(session: Session, number: str) -> OrderDetail:
    order = session.scalar(
        select(Order).where(Order.number == number).options(selectinload(Order.items))
    )
    if order is None:
        raise OrderMissing(number)
    fulfilment = session.scalar(select(Fulfilment).where(Fulfilment.order_id == order.id))
    by_event = by_admin = None
    if fulfilment is not None and fulfilment.payment_event_id:
        by_event = session.get(PaymentEvent, fulfilment.payment_event_id)
    if fulfilment is not None and fulfilment.admin_id:
        by_admin = session.get(User, fulfilment.admin_id)
    item_ids = [item.id for item in order.items]
    return OrderDetail(
        order=order,
        customer=session.get(User, order.user_id),
        currency=session.get(Currency, order.currency),
        fulfilment=fulfilment,
        fulfilled_by_event=by_event,
        fulfilled_by_admin=by_admin,
        events=list(
            session.scalars(
                select(PaymentEvent)
                .where(PaymentEvent.order_number == order.number)
                .order_by(PaymentEvent.received_at.desc(), PaymentEvent.id.desc())
            )
        ),
        invoice=session.scalar(select(Invoice).where(Invoice.order_id == order.id)),
        credit_notes=credit_notes_of_order(session, order.id),
        entitlements=list(
            session.scalars(
                select(Entitlement)
                .where(Entitlement.order_item_id.in_(item_ids))
                .options(selectinload(Entitlement.product))
                .order_by(Entitlement.id)
            )
        ),
        licenses=list(
            session.scalars(
                select(License)
                .where(License.order_item_id.in_(item_ids))
                .options(selectinload(License.product))
                .order_by(License.id)
            )
        ),
        tickets=list(
            session.scalars(
                select(SupportTicket)
                .where(SupportTicket.order_id == order.id)
                .order_by(SupportTicket.id.desc())
            )
        ),
        notes=list(
            session.scalars(
                select(OrderNote)
                .where(OrderNote.order_id == order.id)
                .options(selectinload(OrderNote.author))
                .order_by(OrderNote.id)
            )
        ),
    )


def add_order_note(session: Session, number: str, author: User, body: str) -> OrderNote:
    """Add a staff note to order ``number`` (OrderMissing if there is none)."""
    order_id = session.scalar(select(Order.id).where(Order.number == number))
    if order_id is None:
        raise OrderMissing(number)
    note = OrderNote(order_id=order_id, author_id=author.id, body=body, created_at=utcnow())
    note.author = author
    session.add(note)
    session.flush()
    return note


def orders_of_user(session: Session, user_id: int) -> list[OrderRow]:
    rows = session.execute(
        select(Order, User, Currency)
        .join(User, User.id == Order.user_id)
        .join(Currency, Currency.code == Order.currency)
        .where(Order.user_id == user_id)
        .order_by(Order.created_at.desc(), Order.id.desc())
    ).all()
    return [OrderRow(*row) for row in rows]
