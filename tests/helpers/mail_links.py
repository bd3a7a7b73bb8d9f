"""Reading the links a customer gets by mail, from the queued outbox rows (what the
mailbox would show: the plain-text body), for tests that follow a registration's
verification link or a password-reset link."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

from sqlalchemy import select

from cmsshop.models import OutboxMessage

LINK = re.compile(r"https?://\S+")


def mails_to(dbsession, address: str, kind: str | None = None) -> list[OutboxMessage]:
    """The messages queued for ``address`` (of ``kind``), oldest first."""
    dbsession.rollback()  # a fresh snapshot: the app committed in its own session
    query = select(OutboxMessage).where(OutboxMessage.to_address == address)
    if kind is not None:
        query = query.where(OutboxMessage.kind == kind)
    return list(dbsession.scalars(query.order_by(OutboxMessage.id)))


def mailed_link(dbsession, address: str, kind: str, path: str) -> str:
    """The local part (path and query) of the newest ``kind`` mail's link to ``path``."""
    messages = mails_to(dbsession, address, kind)
    assert messages, f"no {kind} mail queued for {address}"
    for url in LINK.findall(messages[-1].text_body):
        parts = urlsplit(url)
        if parts.path == path:
            return f"{parts.path}?{parts.query}"
    raise AssertionError(f"no link to {path} in the {kind} mail:\n{messages[-1].text_body}")


def link_in(text: str, path: str) -> str:
    """The local part (path and query) of the link to ``path`` in a message's text."""
    for url in LINK.findall(text):
        parts = urlsplit(url)
        if parts.path == path:
            return f"{parts.path}?{parts.query}"
    raise AssertionError(f"no link to {path} in:\n{text}")


def token_of(link: str) -> str:
    return parse_qs(urlsplit(link).query)["token"][0]


def verify_link(dbsession, address: str) -> str:
    return mailed_link(dbsession, address, "verify_email", "/verify-email")


def reset_link(dbsession, address: str) -> str:
    return mailed_link(dbsession, address, "password_reset", "/reset-password")
