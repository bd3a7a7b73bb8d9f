"""Reading the links a customer gets by mail, from the mail the sender actually delivers
(one pass of the sender into a folder, as the worker would, then the plain-text part of
the newest message), for tests that follow a registration's verification link or a
password-reset link. The queued rows never hold a usable link: the sender issues its
token when it sends."""

from __future__ import annotations

import email
import email.policy
import os
import re
import tempfile
from email.message import EmailMessage
from urllib.parse import parse_qs, urlsplit

from sqlalchemy import select

from cmsshop.models import Base, OutboxMessage
from cmsshop.services.mail.delivery import FileBackend
from cmsshop.services.mail.sender import send_due
from cmsshop.settings import load_settings

LINK = re.compile(r"https?://\S+")
# One folder per database for the whole run: a message is delivered once, and read by
# its Message-ID (unique) however many tests ran before.
_MAILBOXES: dict[str, str] = {}


def mails_to(dbsession, address: str, kind: str | None = None) -> list[OutboxMessage]:
    """The messages queued for ``address`` (of ``kind``), oldest first."""
    dbsession.rollback()  # a fresh snapshot: the app committed in its own session
    query = select(OutboxMessage).where(OutboxMessage.to_address == address)
    if kind is not None:
        query = query.where(OutboxMessage.kind == kind)
    return list(dbsession.scalars(query.order_by(OutboxMessage.id)))


def deliver_mail(dbsession, settings=None) -> dict[str, EmailMessage]:
    """One pass of the sender (what the worker does) into this database's folder, with
    the test defaults or the app's ``settings``; every message delivered there so far,
    by Message-ID."""
    engine = dbsession.get_bind()
    folder = _MAILBOXES.setdefault(str(engine.url), tempfile.mkdtemp(prefix="cmsshop-mailbox-"))
    if settings is None:
        settings = load_settings({"cmsshop.database_url": "sqlite://"}, environ={})
    dbsession.rollback()
    send_due(engine, FileBackend(folder), settings)
    messages = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".eml"):
            with open(os.path.join(folder, name), "rb") as handle:
                message = email.message_from_binary_file(handle, policy=email.policy.default)
            messages[message["Message-ID"]] = message
    return messages


def mailed_text(dbsession, address: str, kind: str, settings=None) -> str:
    """The plain-text part of the newest ``kind`` mail delivered to ``address``."""
    delivered = deliver_mail(dbsession, settings)
    messages = [m for m in mails_to(dbsession, address, kind) if m.message_id in delivered]
    assert messages, f"no {kind} mail delivered to {address}"
    return delivered[messages[-1].message_id].get_body(preferencelist=("plain",)).get_content()


def mailed_link(dbsession, address: str, kind: str, path: str, settings=None) -> str:
    """The local part (path and query) of the newest ``kind`` mail's link to ``path``."""
    return link_in(mailed_text(dbsession, address, kind, settings), path)


def link_in(text: str, path: str) -> str:
    """The local part (path and query) of the link to ``path`` in a message's text."""
    for url in LINK.findall(text):
        parts = urlsplit(url)
        if parts.path == path:
            return f"{parts.path}?{parts.query}"
    raise AssertionError(f"no link to {path} in:\n{text}")


def token_of(link: str) -> str:
    return parse_qs(urlsplit(link).query)["token"][0]


def verify_link(dbsession, address: str, settings=None) -> str:
    return mailed_link(dbsession, address, "verify_email", "/verify-email", settings)


def reset_link(dbsession, address: str, settings=None) -> str:
    return mailed_link(dbsession, address, "password_reset", "/reset-password", settings)


def stored_text(dbsession) -> str:
    """Every value of every row of every table, as text: what a backup holds."""
    dbsession.rollback()
    values = []
    for table in Base.metadata.sorted_tables:
        for row in dbsession.execute(select(table)):
            values.extend(str(value) for value in row)
    return "\n".join(values)
