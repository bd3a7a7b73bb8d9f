"""The outbox: a message is a row of its cause's transaction, queued once per cause."""

from __future__ import annotations

from sqlalchemy import func, select

from cmsshop.models import OutboxMessage
from cmsshop.services.mail.outbox import enqueue

SETTINGS = {"cmsshop.base_url": "https://shop.example.com/", "cmsshop.site_name": "Shop <&>"}


def queue_one(session, key="account-exists:1", to="a@example.com"):
    return enqueue(
        session,
        SETTINGS,
        kind="account_exists",
        to=to,
        subject="Your account",
        template="account_exists",
        context={},
        dedupe_key=key,
    )


def rows_in_session(session) -> int:
    return session.scalar(select(func.count()).select_from(OutboxMessage))


def test_a_message_is_rendered_and_queued_once_per_cause(dbsession):
    assert queue_one(dbsession) is True
    assert queue_one(dbsession) is False  # the same cause again: nothing more
    assert queue_one(dbsession, key="account-exists:2") is True
    dbsession.commit()
    assert rows_in_session(dbsession) == 2
    message = dbsession.scalar(select(OutboxMessage).order_by(OutboxMessage.id))
    assert message.status == "pending" and message.attempts == 0
    assert message.message_id.endswith("@shop.example.com>")
    assert "https://shop.example.com/forgot-password" in message.text_body
    # Plain text is not escaped; HTML is.
    assert "Shop <&>" in message.text_body
    assert "Shop &lt;&amp;&gt;" in message.html_body


def test_a_message_rolls_back_with_its_cause(dbsession):
    queue_one(dbsession)
    dbsession.rollback()
    assert rows_in_session(dbsession) == 0
