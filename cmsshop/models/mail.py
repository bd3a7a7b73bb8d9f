"""Mail: the transactional outbox.

A message is a row written in the same transaction as the event that causes it (an order
fulfilled, a password reset asked for, a ticket answered), so it exists exactly when its
cause committed. The sender (services/mail/sender.py) delivers pending rows later.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import CheckConstraint, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from cmsshop.models.meta import Base, UTCDateTime, one_of
from cmsshop.util import utcnow

# pending: waiting for the sender (also after a failed attempt, until it gives up);
# sent: the SMTP server accepted it; failed: the sender gave up (an admin may resend).
MAIL_STATUSES = ("pending", "sent", "failed")


class OutboxMessage(Base):
    __tablename__ = "outbox_messages"
    __table_args__ = (
        CheckConstraint(one_of("status", MAIL_STATUSES), name="status"),
        # The sender's query: due pending messages, oldest first.
        Index("ix_outbox_messages_due", "status", "next_attempt_at", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    # What caused it, made unique: "receipt:order:42" is queued once however often its
    # cause runs (a retried request, a duplicate webhook).
    dedupe_key: Mapped[str] = mapped_column(String(200), unique=True)
    kind: Mapped[str] = mapped_column(String(40))
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), index=True)
    to_address: Mapped[str] = mapped_column(String(320))
    subject: Mapped[str] = mapped_column(String(300))
    text_body: Mapped[str] = mapped_column(Text)
    html_body: Mapped[str] = mapped_column(Text)
    # Fixed when queued: a message delivered twice (a sender killed between the SMTP
    # server's acceptance and the commit) is one message to the recipient's mail client.
    message_id: Mapped[str] = mapped_column(String(255), unique=True)
    status: Mapped[str] = mapped_column(String(20), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    # A sender's claim on the row while it sends (see services/mail/sender.py).
    claimed_until: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    sent_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
