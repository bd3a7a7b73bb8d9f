"""Queueing a message: a row in the caller's transaction.

``enqueue`` is called by the service whose event causes the message (fulfilment, the
password-reset request, a staff reply...), with that event's session: the message
commits with its cause or not at all. A ``dedupe_key`` names the cause ("receipt:order:42"),
so a cause that runs twice (a retried request, a duplicate webhook, a second reminder
pass) queues one message: the insert does nothing when the key exists.

Messages are rendered when queued, from ``templates/mail/<template>.txt`` (plain text,
not escaped) and ``templates/mail/<template>.html`` (autoescaped), so what is sent is
what was true when its cause committed.

A message with a link that logs its reader in (password reset, email verification) is
queued with ``TOKEN_PLACEHOLDER`` where the link's token goes: the sender issues the
token as it sends and puts it only into the message that leaves (see
``services.accounts.tokens.issue_mailed_token``), so no table, backup or admin page ever
holds a usable link -- the outbox and the admin console show the link masked.
"""

from __future__ import annotations

import functools
from email.utils import make_msgid
from urllib.parse import urlsplit

import jinja2
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from cmsshop.models import OutboxMessage
from cmsshop.util import utcnow

# Stands for a mailed link's token until the sender issues it. In the token alphabet but
# shorter than a token, so the masked link a reader may follow is refused as invalid.
TOKEN_PLACEHOLDER = "HIDDEN-UNTIL-SENT"


def with_token(body: str, token: str) -> str:
    """``body`` with its masked link's token put in (only in the message that leaves)."""
    return body.replace(f"token={TOKEN_PLACEHOLDER}", f"token={token}")


@functools.cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("cmsshop", "templates"),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html",)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_message(template: str, context: dict) -> tuple[str, str]:
    """(text, html) of ``templates/mail/<template>.{txt,html}``."""
    environment = _environment()
    text = environment.get_template(f"mail/{template}.txt").render(context)
    html = environment.get_template(f"mail/{template}.html").render(context)
    return text, html


def outbox_values(
    settings,
    *,
    kind: str,
    to: str,
    subject: str,
    template: str,
    context: dict,
    dedupe_key: str,
    user_id: int | None = None,
    now=None,
) -> dict:
    """The outbox row of a message, rendered (``enqueue`` inserts one; fulfilment of a
    batch inserts many at once). Templates see ``context`` plus ``site_name`` and
    ``base_url``."""
    base_url = settings["cmsshop.base_url"].rstrip("/")
    site_name = settings.get("cmsshop.site_name") or "cmsshop"
    text, html = render_message(
        template, {"site_name": site_name, "base_url": base_url, "subject": subject, **context}
    )
    domain = urlsplit(base_url).hostname or "localhost"
    now = now or utcnow()
    return {
        "dedupe_key": dedupe_key[:200],
        "kind": kind,
        "user_id": user_id,
        "to_address": to,
        "subject": subject[:300],
        "text_body": text,
        "html_body": html,
        "message_id": make_msgid(domain=domain),
        "status": "pending",
        "attempts": 0,
        "next_attempt_at": now,
        "created_at": now,
    }


def insert_messages(session: Session):
    """The INSERT of outbox rows that does nothing for a dedupe key already queued."""
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    return insert(OutboxMessage).on_conflict_do_nothing(index_elements=[OutboxMessage.dedupe_key])


def enqueue(session: Session, settings, **message) -> bool:
    """Queue a message in ``session``'s transaction; False if its ``dedupe_key`` was
    queued before (nothing is written then). ``message``: ``outbox_values``' keywords."""
    values = outbox_values(settings, **message)
    result = session.execute(
        insert_messages(session)
        .values(**values)
        # RETURNING, not rowcount: through the ORM session, psycopg reports a rowcount
        # of -1 for this INSERT on PostgreSQL, so "queued" read as "already queued".
        .returning(OutboxMessage.id)
    )
    return result.first() is not None
