"""The admin's view of the outbox: recent messages, one message, resending one."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import OutboxMessage
from cmsshop.services.paging import Page, PageRequest, fetch_page
from cmsshop.util import utcnow


class MessageMissing(LookupError):
    pass


class MessagePending(Exception):
    """A resend of a message still waiting for the sender: it goes out anyway."""


def list_messages(session: Session, paging: PageRequest, status: str | None = None) -> Page:
    """Messages newest first, optionally of one status."""
    query = select(OutboxMessage).order_by(OutboxMessage.created_at.desc(), OutboxMessage.id.desc())
    if status:
        query = query.where(OutboxMessage.status == status)
    return fetch_page(session, query, paging)


def find_message(session: Session, message_id: int) -> OutboxMessage:
    row = session.get(OutboxMessage, message_id)
    if row is None:
        raise MessageMissing(message_id)
    return row


def resend(session: Session, message_id: int, admin_email: str) -> OutboxMessage:
    """Put a sent or failed message back in the queue, due now with a fresh set of
    attempts: an explicit admin decision, noted in ``last_error`` (who, when, and what
    the message was before). It goes out with its own Message-ID again, so a mail client
    that has the first copy shows one message.

    A pending message is refused: it is queued already, and the sender may be sending it
    right now (on PostgreSQL under a row lock this request would wait for).
    """
    row = session.get(OutboxMessage, message_id)
    if row is None:
        raise MessageMissing(message_id)
    if row.status == "pending":
        raise MessagePending(message_id)
    now = utcnow()
    note = f"resend requested by {admin_email} at {now.isoformat(timespec='seconds')}"
    before = f"was {row.status}" + (f": {row.last_error}" if row.last_error else "")
    row.last_error = f"{note} ({before})"[:2000]
    row.status, row.attempts, row.next_attempt_at = "pending", 0, now
    row.claimed_until, row.sent_at = None, None
    return row
