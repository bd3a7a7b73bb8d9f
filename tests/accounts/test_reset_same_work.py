"""A password-reset request does the same work whether the address has an account or
not, so its timing cannot tell which addresses do: the same statements in the same
order, and one queued job of the same kind; the sender finds the account, issues the
token and mails the link, and drops the job of an address without one. (The timing
itself is measured by bench/reset_timing.py: tests assert no timings.)"""

from __future__ import annotations

import re

from helpers.clients import client_from
from helpers.mail_links import deliver_mail, mails_to
from sqlalchemy import event, func, select

from cmsshop.models import AccountToken, OutboxMessage

RESET = "/api/auth/password-reset"


def statements_of(app, call) -> list[str]:
    """The SQL the app runs during ``call()``, literals and parameters left out."""
    seen: list[str] = []
    engine = app.registry["cmsshop.engine"]

    def record(conn, cursor, statement, parameters, context, executemany):
        seen.append(re.sub(r"\s+", " ", statement).strip())

    event.listen(engine, "before_cursor_execute", record)
    try:
        call()
    finally:
        event.remove(engine, "before_cursor_execute", record)
    return seen


def test_known_and_unknown_addresses_run_the_same_statements(app, customer, dbsession):
    client = client_from(app)
    client.post_json(RESET, {"email": "warm-up@example.com"}, status=202)  # first-request work
    known = statements_of(
        app, lambda: client.post_json(RESET, {"email": customer.email}, status=202)
    )
    unknown = statements_of(
        app, lambda: client.post_json(RESET, {"email": "nobody@example.com"}, status=202)
    )
    assert known == unknown
    assert any("outbox_messages" in statement for statement in known)
    assert not any("account_tokens" in statement for statement in known)

    # One job each, of the same kind; no token exists before the sender runs.
    dbsession.rollback()
    kinds = [
        (m.to_address, m.kind)
        for m in dbsession.scalars(select(OutboxMessage).order_by(OutboxMessage.id))
    ]
    assert kinds == [
        ("warm-up@example.com", "password_reset"),
        (customer.email, "password_reset"),
        ("nobody@example.com", "password_reset"),
    ]
    assert dbsession.scalar(select(func.count()).select_from(AccountToken)) == 0

    # The sender mails the account's owner and drops the others without a trace.
    delivered = deliver_mail(dbsession)
    [sent] = mails_to(dbsession, customer.email, "password_reset")
    assert sent.status == "sent" and sent.message_id in delivered
    assert mails_to(dbsession, "nobody@example.com") == []
    assert dbsession.scalar(select(func.count()).select_from(OutboxMessage)) == 1
    assert dbsession.scalar(select(func.count()).select_from(AccountToken)) == 1
