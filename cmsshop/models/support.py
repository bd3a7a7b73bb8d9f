"""Support: customer support tickets and the records kept for server errors (looked up
by their support code)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    ForeignKey,
    Integer,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from cmsshop.models.accounts import User
from cmsshop.models.commerce import Order
from cmsshop.models.meta import Base, UTCDateTime
from cmsshop.util import utcnow

TICKET_STATUSES = ("open", "pending", "closed")


class SupportTicket(Base):
    __tablename__ = "support_tickets"
    __table_args__ = (CheckConstraint("status IN ('open', 'pending', 'closed')", name="status"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    # TCK-7KQ2M9: random readable characters; a collision fails on the unique
    # constraint and the request is retried with a fresh number.
    number: Mapped[str] = mapped_column(String(32), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    order_id: Mapped[int | None] = mapped_column(ForeignKey("orders.id"))
    subject: Mapped[str] = mapped_column(String(200))
    body: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(20), default="open", index=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    user: Mapped[User] = relationship()
    order: Mapped[Order | None] = relationship()
    messages: Mapped[list[TicketMessage]] = relationship(
        back_populates="ticket", order_by="TicketMessage.id", cascade="all, delete-orphan"
    )


class TicketMessage(Base):
    """A reply in a ticket's conversation, after the opening message (``ticket.body``):
    from the customer or from staff (``from_staff``; staff replies show the shop's name,
    not the admin's)."""

    __tablename__ = "ticket_messages"

    id: Mapped[int] = mapped_column(primary_key=True)
    ticket_id: Mapped[int] = mapped_column(ForeignKey("support_tickets.id"), index=True)
    author_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    from_staff: Mapped[bool] = mapped_column(Boolean, default=False)
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)

    ticket: Mapped[SupportTicket] = relationship(back_populates="messages")
    author: Mapped[User] = relationship()


class ErrorRecord(Base):
    """One server error, found again by the support code the client was shown."""

    __tablename__ = "error_records"

    id: Mapped[int] = mapped_column(primary_key=True)
    support_code: Mapped[str] = mapped_column(String(32), unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    request_id: Mapped[str | None] = mapped_column(String(64))
    method: Mapped[str] = mapped_column(String(16))
    path: Mapped[str] = mapped_column(String(2048))
    status: Mapped[int] = mapped_column(Integer)
    error_code: Mapped[str] = mapped_column(String(64))
    exception_type: Mapped[str | None] = mapped_column(String(255))
    traceback: Mapped[str | None] = mapped_column(Text)
