"""Customers as the admin console sees them: search by email or name, and one
customer's orders, licenses and support tickets."""

from __future__ import annotations

import dataclasses

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session, selectinload

from cmsshop.models import License, Order, SupportTicket, User
from cmsshop.services.paging import Page, PageRequest, fetch_page
from cmsshop.services.payments.orders_admin import OrderRow, like_part, orders_of_user


class CustomerMissing(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class CustomerRow:
    user: User
    orders: int


@dataclasses.dataclass(frozen=True)
class CustomerDetail:
    user: User
    orders: list[OrderRow]
    licenses: list[License]
    tickets: list[SupportTicket]


def search_customers(session: Session, paging: PageRequest, q: str | None = None) -> Page:
    """Accounts newest first with their number of orders; ``q`` matches a part of the
    email or the name (case-insensitively)."""
    orders = (
        select(func.count())
        .select_from(Order)
        .where(Order.user_id == User.id)
        .correlate(User)
        .scalar_subquery()
    )
    query = select(User, orders)
    q = (q or "").strip()
    if q:
        part = like_part(q.lower())
        query = query.where(
            or_(User.email.like(part, escape="\\"), func.lower(User.name).like(part, escape="\\"))
        )
    query = query.order_by(User.created_at.desc(), User.id.desc())
    page = fetch_page(session, query, paging, scalars=False)
    return page.map(lambda row: CustomerRow(row[0], int(row[1] or 0)))


def customer_detail(session: Session, user_id: int) -> CustomerDetail:
    user = session.get(User, user_id)
    if user is None:
        raise CustomerMissing(user_id)
    return CustomerDetail(
        user=user,
        orders=orders_of_user(session, user.id),
        licenses=list(
            session.scalars(
                select(License)
                .where(License.user_id == user.id)
                .options(selectinload(License.product))
                .order_by(License.id.desc())
            )
        ),
        tickets=list(
            session.scalars(
                select(SupportTicket)
                .where(SupportTicket.user_id == user.id)
                .order_by(SupportTicket.id.desc())
            )
        ),
    )
