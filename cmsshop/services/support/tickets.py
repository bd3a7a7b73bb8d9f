"""Support tickets: opening them and replying (each with an hourly per-customer limit),
the conversation, listing (the customer's own, the admin queue), status."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, joinedload, selectinload

from cmsshop.db import take_write_lock
from cmsshop.errors import RateLimited, ValidationFailed
from cmsshop.models import TICKET_STATUSES, Order, SupportTicket, TicketMessage, User
from cmsshop.services.mail.outbox import enqueue
from cmsshop.services.paging import Page, PageRequest, fetch_page
from cmsshop.services.ratelimit import RateDecision, RateLimiter
from cmsshop.services.webhooks import payloads
from cmsshop.services.webhooks.events import emit_event
from cmsshop.util import readable_token, utcnow

TICKET_WINDOW = 3600  # the limit is "tickets per hour"
TICKET_POLICY = "tickets.user"
REPLY_POLICY = "tickets.reply"  # a customer's replies, per hour (staff replies are free)
ORDER_CHOICES = 100  # the newest orders offered when opening a ticket on a page


def count_ticket(limiter: RateLimiter, user_id: int) -> RateDecision | None:
    """Count one ticket of ``user_id`` in this hour's window (shared, own transaction);
    the refusal, or None.

    Called after validation, so a typo does not use up the allowance, and before the
    request's first write, as ``RateLimiter.count`` requires.
    """
    return limiter.count([(TICKET_POLICY, str(user_id))])


def count_reply(limiter: RateLimiter, user_id: int) -> RateDecision | None:
    """Count one reply of ``user_id`` in this hour's window; the refusal, or None (called
    like :func:`count_ticket`: after validation, before the first write)."""
    return limiter.count([(REPLY_POLICY, str(user_id))])


def find_customer_order(session: Session, user_id: int, number: str) -> Order | None:
    return session.scalar(select(Order).where(Order.number == number, Order.user_id == user_id))


def list_order_choices(session: Session, user_id: int) -> list[Order]:
    """The customer's newest orders (at most ORDER_CHOICES), for a ticket form's choice."""
    return list(
        session.scalars(
            select(Order)
            .where(Order.user_id == user_id)
            .order_by(Order.created_at.desc(), Order.id.desc())
            .limit(ORDER_CHOICES)
        )
    )


def submit_ticket(
    session: Session,
    limiter: RateLimiter,
    user: User,
    subject: str,
    body: str,
    order_number: str | None,
) -> SupportTicket:
    """Open a ticket for ``user`` from validated fields: 422 if ``order_number`` is not
    one of theirs, 429 ``ticket_rate_limited`` past the hourly limit (a refused order
    number does not use up the allowance)."""
    order = None
    if order_number is not None:
        order = find_customer_order(session, user.id, order_number)
        if order is None:
            raise ValidationFailed({"orderNumber": "is not one of your orders"})
    refusal = count_ticket(limiter, user.id)
    if refusal is not None:
        raise RateLimited(
            refusal.retry_after,
            f"You can open at most {refusal.limit} tickets per hour.",
            code="ticket_rate_limited",
        )
    return open_ticket(session, user, subject, body, order)


def new_ticket_number() -> str:
    """``TCK-7KQ2M9``: 30 random bits of readable characters (a rare collision fails on
    the unique constraint and the request is retried with a new number)."""
    return readable_token(1, 6, prefix="TCK")


def open_ticket(
    session: Session, user: User, subject: str, body: str, order: Order | None
) -> SupportTicket:
    now = utcnow()
    ticket = SupportTicket(
        number=new_ticket_number(),
        user_id=user.id,
        order_id=order.id if order is not None else None,
        subject=subject,
        body=body,
        status="open",
        created_at=now,
        updated_at=now,
    )
    ticket.user = user
    ticket.order = order
    take_write_lock(session)
    session.add(ticket)
    session.flush()
    subject, data = payloads.ticket_event(session, ticket)
    emit_event(session, "ticket.created", subject=subject, data=data)
    return ticket


def _newest_first(session: Session, where: list, request: PageRequest) -> Page[SupportTicket]:
    query = (
        select(SupportTicket)
        .where(*where)
        .options(joinedload(SupportTicket.order), joinedload(SupportTicket.user))
        .order_by(SupportTicket.created_at.desc(), SupportTicket.id.desc())
    )
    count = select(func.count()).select_from(SupportTicket).where(*where)
    return fetch_page(session, query, request, count_query=count)


def list_customer_tickets(
    session: Session, user_id: int, request: PageRequest
) -> Page[SupportTicket]:
    """The user's tickets, newest first."""
    return _newest_first(session, [SupportTicket.user_id == user_id], request)


def list_all_tickets(
    session: Session, status: str | None, request: PageRequest
) -> Page[SupportTicket]:
    """Every ticket (optionally of one status), newest first: the admin queue."""
    where = [SupportTicket.status == status] if status else []
    return _newest_first(session, where, request)


def list_ticket_queue(
    session: Session, status: str | None, request: PageRequest
) -> Page[SupportTicket]:
    """The admin queue page: open tickets (waiting on staff) longest-waiting first, by
    their last change (opened, a customer's reply, reopened); any other choice newest
    first, like :func:`list_all_tickets`."""
    if status != "open":
        return list_all_tickets(session, status, request)
    where = [SupportTicket.status == "open"]
    query = (
        select(SupportTicket)
        .where(*where)
        .options(joinedload(SupportTicket.order), joinedload(SupportTicket.user))
        .order_by(SupportTicket.updated_at.asc(), SupportTicket.id.asc())
    )
    count = select(func.count()).select_from(SupportTicket).where(*where)
    return fetch_page(session, query, request, count_query=count)


def find_ticket(session: Session, ticket_id: int) -> SupportTicket | None:
    return session.get(SupportTicket, ticket_id)


def find_ticket_conversation(session: Session, ticket_id: int | None) -> SupportTicket | None:
    """Any customer's ticket with its conversation, customer and order (admin)."""
    if ticket_id is None:
        return None
    return session.scalar(
        select(SupportTicket)
        .where(SupportTicket.id == ticket_id)
        .options(
            selectinload(SupportTicket.messages).joinedload(TicketMessage.author),
            joinedload(SupportTicket.order),
            joinedload(SupportTicket.user),
        )
    )


def set_ticket_status(session: Session, ticket: SupportTicket, status: str) -> SupportTicket:
    if status not in TICKET_STATUSES:
        raise ValueError(f"unknown ticket status {status!r}")
    if ticket.status != status:
        take_write_lock(session)
        ticket.status = status
        ticket.updated_at = utcnow()
        session.flush()
    return ticket


def find_customer_ticket(
    session: Session, user_id: int, ticket_id: int | None
) -> SupportTicket | None:
    """The ticket ``ticket_id`` with its conversation, if it is ``user_id``'s (None if not:
    another customer's ticket is indistinguishable from a missing one)."""
    if ticket_id is None:
        return None
    return session.scalar(
        select(SupportTicket)
        .where(SupportTicket.id == ticket_id, SupportTicket.user_id == user_id)
        .options(selectinload(SupportTicket.messages), joinedload(SupportTicket.order))
    )


def add_message(
    session: Session, ticket: SupportTicket, author: User, body: str, *, from_staff: bool
) -> TicketMessage:
    """Add a reply to the conversation. A staff reply leaves the ticket ``pending`` (on the
    customer); a customer's reply (re)opens it, a closed ticket included."""
    now = utcnow()
    take_write_lock(session)
    message = TicketMessage(
        ticket_id=ticket.id, author_id=author.id, from_staff=from_staff, body=body, created_at=now
    )
    message.author = author
    ticket.messages.append(message)
    ticket.status = "pending" if from_staff else "open"
    ticket.updated_at = now
    session.flush()
    return message


def reply_as_customer(
    session: Session, limiter: RateLimiter, user: User, ticket: SupportTicket, body: str
) -> TicketMessage:
    """The customer's reply to their own ticket (reopening it); 429 past the hourly
    reply limit, with nothing written."""
    refusal = count_reply(limiter, user.id)
    if refusal is not None:
        raise RateLimited(
            refusal.retry_after, f"You can send at most {refusal.limit} replies per hour."
        )
    return add_message(session, ticket, user, body, from_staff=False)


def reply_as_staff(
    session: Session,
    ticket: SupportTicket,
    admin: User,
    body: str,
    status: str | None = None,
    *,
    settings: Mapping[str, Any],
) -> TicketMessage:
    """A staff reply: the ticket waits on the customer (``pending``) unless ``status``
    says otherwise (e.g. answer and close in one step). The customer is told by e-mail,
    queued with the reply (``settings`` give the link and the shop's name)."""
    message = add_message(session, ticket, admin, body, from_staff=True)
    if status is not None:
        set_ticket_status(session, ticket, status)
    queue_reply_notice(session, settings, ticket, message)
    return message


def queue_reply_notice(
    session: Session, settings: Mapping[str, Any], ticket: SupportTicket, message: TicketMessage
) -> bool:
    """Queue ``ticket_reply`` to the ticket's customer, once per staff message. Staff sign
    as the shop: nothing of the admin (name, address) goes into it."""
    base_url = settings["cmsshop.base_url"].rstrip("/")
    customer = ticket.user or session.get(User, ticket.user_id)
    subject = " ".join(ticket.subject.split())  # one header line, whatever was typed
    return enqueue(
        session,
        settings,
        kind="ticket_reply",
        to=customer.email,
        subject=f"Re: [{ticket.number}] {subject}",
        template="ticket_reply",
        context={
            "customer_name": customer.name,
            "ticket_number": ticket.number,
            "ticket_subject": ticket.subject,
            "reply": message.body,
            "ticket_url": f"{base_url}/account/tickets/{ticket.id}",
            "ticket_status": ticket.status,
        },
        dedupe_key=f"ticket-reply:{message.id}",
        user_id=customer.id,
    )
