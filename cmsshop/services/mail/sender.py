"""Delivering the outbox: due messages, one per short transaction, never two senders on one.

``send_due`` takes the oldest due pending message, sends it, and records the outcome,
then takes the next, until none is due (or ``limit``/``stop``). Any number of senders
may run at once (``send-mail`` by hand while the worker runs, two workers); how a
message is kept to one sender depends on the database:

PostgreSQL
    ``SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1`` in a transaction, send, record the
    outcome, COMMIT. The row lock is held during the SMTP conversation: another sender's
    query skips the row and takes the next one. A sender killed mid-send loses its
    connection, PostgreSQL rolls its transaction back and releases the lock, and the row
    is still pending: it is sent again by the next pass, not lost.

SQLite (one writer at a time, no row locks)
    A sender claims a message with ``UPDATE ... SET claimed_until = now + lease WHERE
    id = ? AND status = 'pending' AND (claimed_until IS NULL OR claimed_until < now)``
    in a transaction of its own; a rowcount of 0 means another sender won it. It sends
    outside any transaction (holding SQLite's only write lock through an SMTP
    conversation would stall every request that writes), then records the outcome in
    another short transaction. A killed sender's claim expires after the lease
    (``cmsshop.mail.claim_lease``, far longer than an SMTP conversation can last), and
    the message is sent by a later pass.

Delivery is therefore at least once, and more than once only in one window: after
the SMTP server accepted a message and before "sent" was committed (a sender killed
or the database gone right then). No protocol closes it -- the server's acceptance and
our commit are two systems' writes, and no transaction spans both; committing "sent"
before sending would lose messages instead, which is worse for receipts and reset
links. The Message-ID is fixed when a message is queued, so such a duplicate carries
the same Message-ID and mail clients show it as one message.

A reset or verification message carries a link that logs its reader in: its row holds
the link masked, and the sender issues the token in the transaction that claims the row
(``services.accounts.tokens.issue_mailed_token``) and puts it only into the message it
hands to the backend. Such a message whose account does not exist (a reset asked for an
unknown address: the request path never looks) is dropped: its row deleted, nothing
sent. The token row commits with the claim on SQLite and with the outcome on
PostgreSQL, at the latest just after the server accepted the message.

A failed attempt counts against ``cmsshop.mail.max_attempts`` and schedules the next
one with growing back-off (1 min, 5 min, 15 min, 1 h, 3 h, 6 h, then every 12 h,
each +-10 % so messages that failed together do not retry together); the last one
marks the message ``failed``. A recipient refused with a 5xx reply fails at once
(see :func:`cmsshop.services.mail.delivery.is_permanent`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import random
from collections.abc import Callable

from sqlalchemy import or_, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import sessionmaker

from cmsshop.db import make_session_factory, take_write_lock
from cmsshop.models import OutboxMessage
from cmsshop.services.accounts.tokens import MAILED_TOKEN_PURPOSES, issue_mailed_token
from cmsshop.services.mail.delivery import DeliveryFailed, MailBackend, build_email
from cmsshop.util import utcnow

log = logging.getLogger("cmsshop.mail")

# Seconds before attempt n+1 after n failures; the last step repeats.
BACKOFF_SECONDS = (60, 300, 900, 3600, 3 * 3600, 6 * 3600, 12 * 3600)
JITTER = 0.1


@dataclasses.dataclass
class SendReport:
    """One pass: messages sent, retried later, given up (failed), dropped (a reset for
    an address without an account)."""

    sent: int = 0
    retried: int = 0
    failed: int = 0
    dropped: int = 0

    @property
    def attempted(self) -> int:
        return self.sent + self.retried + self.failed

    def __str__(self) -> str:
        text = f"{self.sent} sent, {self.retried} to retry, {self.failed} failed"
        return text + (f", {self.dropped} dropped" if self.dropped else "")


def backoff(attempts: int, rng: Callable[[], float] = random.random) -> dt.timedelta:
    """How long to wait after the ``attempts``-th failure (1-based), with jitter."""
    base = BACKOFF_SECONDS[min(max(attempts, 1), len(BACKOFF_SECONDS)) - 1]
    return dt.timedelta(seconds=base * (1 + JITTER * (2 * rng() - 1)))


@dataclasses.dataclass
class Outcome:
    """What happened to one message; applied to its row in :func:`_record`."""

    sent: bool
    error: str | None = None
    permanent: bool = False


def _deliver(
    row: OutboxMessage, backend: MailBackend, settings, now: dt.datetime, token: str | None
) -> Outcome:
    try:
        message = build_email(row, settings["cmsshop.mail.from"], now=now, token=token)
    except (ValueError, TypeError) as exc:
        # A header the e-mail library refuses (an invalid address): it never will be.
        return Outcome(False, f"cannot build the message: {exc}", permanent=True)
    try:
        backend.send(message, row.id)
    except DeliveryFailed as exc:
        return Outcome(False, exc.text, permanent=exc.permanent)
    return Outcome(True)


def _record(row: OutboxMessage, outcome: Outcome, settings, now: dt.datetime) -> str:
    """Apply ``outcome`` to ``row`` (in the caller's transaction); the row's new state:
    sent, pending (to retry) or failed."""
    row.claimed_until = None
    if outcome.sent:
        row.status, row.sent_at = "sent", now
        return "sent"
    row.attempts += 1
    row.last_error = outcome.error
    if outcome.permanent or row.attempts >= settings["cmsshop.mail.max_attempts"]:
        row.status = "failed"
        return "failed"
    row.next_attempt_at = now + backoff(row.attempts)
    return "pending"


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One message's attempt, for the log line (read before its session closes)."""

    state: str
    id: int
    kind: str
    to_address: str
    message_id: str
    attempts: int
    error: str | None

    @classmethod
    def of(cls, row: OutboxMessage, state: str, outcome: Outcome) -> Attempt:
        return cls(
            state, row.id, row.kind, row.to_address, row.message_id, row.attempts, outcome.error
        )

    def log(self) -> None:
        """One line per message, without its body."""
        if self.state == "dropped":
            # Not the address: whoever typed it has no account, and the log need not know.
            log.info("mail %s dropped: %s for no account", self.id, self.kind)
            return
        if self.state == "sent":
            log.info(
                "mail %s sent: %s to %s %s", self.id, self.kind, self.to_address, self.message_id
            )
            return
        log.warning(
            "mail %s %s after attempt %s: %s to %s: %s",
            self.id,
            "failed" if self.state == "failed" else "will be retried",
            self.attempts,
            self.kind,
            self.to_address,
            self.error,
        )


def _issue_token(session, row: OutboxMessage, settings) -> tuple[str | None, Attempt | None]:
    """(token, None) for a row whose link the sender issues (None for other rows), or
    (None, the dropped attempt) after deleting a row that has no account to mail."""
    if row.kind not in MAILED_TOKEN_PURPOSES:
        return None, None
    token = issue_mailed_token(session, settings, row)
    if token is not None:
        return token, None
    dropped = Attempt.of(row, "dropped", Outcome(False))
    session.delete(row)
    return None, dropped


def _due(now: dt.datetime):
    return (
        select(OutboxMessage)
        .where(OutboxMessage.status == "pending", OutboxMessage.next_attempt_at <= now)
        .order_by(OutboxMessage.next_attempt_at, OutboxMessage.id)
    )


def _send_one_locked(
    factory: sessionmaker, backend: MailBackend, settings, clock
) -> Attempt | None:
    """PostgreSQL: the row lock keeps the message to this sender while it sends."""
    with factory() as session, session.begin():
        now = clock()
        row = session.scalars(_due(now).limit(1).with_for_update(skip_locked=True)).first()
        if row is None:
            return None
        token, dropped = _issue_token(session, row, settings)
        if dropped is not None:
            return dropped
        outcome = _deliver(row, backend, settings, now, token)
        state = _record(row, outcome, settings, clock())
        return Attempt.of(row, state, outcome)


def _send_one_claimed(
    factory: sessionmaker, backend: MailBackend, settings, clock
) -> Attempt | None:
    """SQLite: claim, send outside any transaction, record."""
    lease = dt.timedelta(seconds=settings["cmsshop.mail.claim_lease"])
    while True:
        now = clock()
        unclaimed = or_(OutboxMessage.claimed_until.is_(None), OutboxMessage.claimed_until < now)
        with factory() as session, session.begin():
            row_id = session.scalar(_due(now).where(unclaimed).with_only_columns(OutboxMessage.id))
        if row_id is None:
            return None
        with factory() as session, session.begin():
            # The first statement of its transaction is this write, so SQLite gives it
            # the write lock (waiting on the busy timeout) instead of failing to upgrade
            # a read snapshot; status and claim are checked again under that lock.
            claimed = session.execute(
                update(OutboxMessage)
                .where(
                    OutboxMessage.id == row_id,
                    OutboxMessage.status == "pending",
                    OutboxMessage.next_attempt_at <= now,
                    unclaimed,
                )
                .values(claimed_until=now + lease)
                .execution_options(synchronize_session=False)
            ).rowcount
            row = session.get(OutboxMessage, row_id) if claimed == 1 else None
            if row is not None:
                token, dropped = _issue_token(session, row, settings)
                if dropped is not None:
                    return dropped
                session.flush()
                session.expunge(row)  # read while sending, whatever the factory expires
        if row is not None:
            break  # else another sender won this one: take the next
    outcome = _deliver(row, backend, settings, clock(), token)
    with factory() as session, session.begin():
        take_write_lock(session)  # write lock first: a read snapshot may not upgrade
        row = session.get(OutboxMessage, row_id)
        state = _record(row, outcome, settings, clock())
        return Attempt.of(row, state, outcome)


def send_due(
    engine_or_session_factory: Engine | sessionmaker,
    backend: MailBackend,
    settings,
    *,
    limit: int | None = None,
    stop: Callable[[], bool] | None = None,
    clock: Callable[[], dt.datetime] = utcnow,
) -> SendReport:
    """Deliver due pending messages, oldest first, until none is due, ``limit`` were
    attempted, or ``stop()`` says so (checked between messages: the one in flight is
    always finished and recorded). ``clock`` is for tests."""
    if isinstance(engine_or_session_factory, Engine):
        factory = make_session_factory(engine_or_session_factory)
    else:
        factory = engine_or_session_factory
    with factory() as probe:
        dialect = probe.get_bind().dialect.name
    send_one = _send_one_locked if dialect == "postgresql" else _send_one_claimed
    report = SendReport()
    try:
        while (limit is None or report.attempted < limit) and not (stop and stop()):
            attempt = send_one(factory, backend, settings, clock)
            if attempt is None:
                break
            attempt.log()
            if attempt.state == "dropped":
                report.dropped += 1
            elif attempt.state == "sent":
                report.sent += 1
            elif attempt.state == "failed":
                report.failed += 1
            else:
                report.retried += 1
    finally:
        backend.close()
    return report
