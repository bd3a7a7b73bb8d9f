"""Arranging and reading the mail outbox."""

from __future__ import annotations

from sqlalchemy import select

from cmsshop.models import OutboxMessage
from cmsshop.services.mail.outbox import enqueue
from cmsshop.util import utcnow

QUEUE_SETTINGS = {"cmsshop.base_url": "https://shop.example.com", "cmsshop.site_name": "Shop"}


def queue(session, count: int = 1, prefix: str = "m") -> list[str]:
    """Queue ``count`` messages and commit; their Message-IDs, oldest first."""
    for i in range(count):
        enqueue(
            session,
            QUEUE_SETTINGS,
            kind="account_exists",
            to=f"{prefix}{i}@example.com",
            subject=f"Your account {i} – ünïcode",
            template="account_exists",
            context={},
            dedupe_key=f"{prefix}:{i}",
        )
    session.commit()
    return [row.message_id for row in rows(session) if row.dedupe_key.startswith(f"{prefix}:")]


def rows(session) -> list[OutboxMessage]:
    session.expire_all()
    session.rollback()
    return list(session.scalars(select(OutboxMessage).order_by(OutboxMessage.id)))


def hostile_message(dbsession) -> OutboxMessage:
    row = OutboxMessage(
        dedupe_key="hostile:1",
        kind="ticket_reply",
        to_address="x@example.com",
        subject="<b>Subject</b>",
        text_body="text <i>part</i>",
        html_body='<script>alert("admin")</script><p onclick="x()">Hi</p>',
        message_id="<hostile-1@example.com>",
        status="failed",
        attempts=8,
        last_error="451 4.3.0 try later",
        next_attempt_at=utcnow(),
        created_at=utcnow(),
    )
    dbsession.add(row)
    dbsession.commit()
    return row
