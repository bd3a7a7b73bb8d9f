"""The event log: rows written in short transactions of their own (they survive the
business transaction's rollback), the bounded record of rejected deliveries, and the
claim/outcome statements the business transaction runs on an event's row."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from cmsshop.db import own_transaction
from cmsshop.errors import RateLimited
from cmsshop.hotsql import HotStatement, db_time, raw_autocommit
from cmsshop.models import PaymentEvent
from cmsshop.services.payments.base import PaymentProvider, VerifiedEvent
from cmsshop.services.payments.events.errors import OrderRef
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.util import utcnow

log = logging.getLogger(__name__)

FINAL_STATUSES = ("processed", "duplicate", "ignored")  # also spelled out in QUEUE_EVENT
MAX_ERROR = 2000
# Never stored: they authenticate someone, they do not describe the delivery.
DROPPED_HEADERS = {"cookie", "authorization", "proxy-authorization", "x-csrf-token"}
# A rejected delivery comes from anyone: its row stays a few KiB whatever was sent.
MAX_KEPT_REJECTED_BODY = 4 * 1024  # kept whole (re-verifiable) up to this size
REJECTED_EXCERPT = 512  # else only this much of it
MAX_SIGNATURE_HEADER = 1024
MAX_SELECTED_HEADERS = 2048
REJECTED_CONTEXT_HEADERS = {"content-type": 100, "user-agent": 200}


def safe_text(value: bytes | str, limit: int | None = None) -> str:
    """Text any database stores: valid UTF-8 (invalid bytes replaced), no NUL."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if not is_storable(value):
        value = value.encode("utf-8", errors="replace").decode("utf-8")
        value = value.replace("\x00", "\ufffd")
    return value[:limit] if limit is not None else value


def is_storable(value: str) -> bool:
    """Text every supported database stores as it is: no NUL (PostgreSQL's text cannot
    hold it) and no lone surrogate (not encodable as UTF-8)."""
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def selected_headers(headers: Mapping[str, str], names: Mapping[str, int]) -> str:
    """JSON of the named headers (lower-case name: cap), within a total budget."""
    kept: dict[str, str] = {}
    budget = MAX_SELECTED_HEADERS
    lowered = {str(name).lower(): value for name, value in headers.items()}
    for name, cap in names.items():
        if name in lowered:
            value = safe_text(str(lowered[name]), cap)
            if len(name) + len(value) <= budget:
                kept[name] = value
                budget -= len(name) + len(value)
    return json.dumps(kept)


def storable_headers(headers: Mapping[str, str]) -> str:
    kept = {
        safe_text(str(name), 100): safe_text(str(value), 4096)
        for name, value in headers.items()
        if str(name).lower() not in DROPPED_HEADERS
    }
    return json.dumps(dict(list(kept.items())[:50]))


def _insert_for(session: Session):
    return postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert


@dataclasses.dataclass(frozen=True)
class LoggedEvent:
    id: int
    status: str
    attempts: int


def log_event(
    registry,
    event: VerifiedEvent,
    headers: Mapping[str, str],
    lookup: Callable[[Session], OrderRef | None] | None = None,
    *,
    queue: bool = False,
) -> tuple[LoggedEvent, OrderRef | None]:
    """Insert the verified event as ``received``, or count one more delivery of it.

    ``lookup`` (finding the event's order, a read) runs in the same short transaction,
    after the log row is written, unless the event is already final: one round of
    connection, BEGIN and COMMIT less per delivery.

    ``queue``: the event is due for the worker now (events.queue), and so is a
    redelivery of one not final yet (a final one is left as it is).
    """
    now = utcnow()
    if queue:
        return _queue_event(registry, event, headers, now), None
    with own_transaction(registry) as session:
        insert = _insert_for(session)
        stmt = (
            insert(PaymentEvent)
            .values(
                provider=event.provider,
                event_id=event.event_id,
                event_type=event.event_type[:100],
                received_at=now,
                payload_sha256=hashlib.sha256(event.raw).hexdigest(),
                payload=safe_text(event.raw),
                status="received",
                attempts=1,
                headers=storable_headers(headers),
            )
            .on_conflict_do_update(
                index_elements=[PaymentEvent.provider, PaymentEvent.event_id],
                set_={"attempts": PaymentEvent.attempts + 1},
            )
            .returning(PaymentEvent.id, PaymentEvent.status, PaymentEvent.attempts)
        )
        row = session.execute(stmt).one()
        ref = None
        if lookup is not None and row.status not in FINAL_STATUSES:
            ref = lookup(session)
    return LoggedEvent(row.id, row.status, row.attempts), ref


# The queued delivery's only statement, committed on its own (one round trip): a new
# event is due for the worker now; a redelivery counts an attempt and, unless the event
# is final (FINAL_STATUSES, spelled out), makes it due now again.
QUEUE_EVENT = HotStatement(
    "INSERT INTO payment_events (provider, event_id, event_type, received_at,"
    " payload_sha256, payload, status, attempts, headers, next_attempt_at)"
    " VALUES (:provider, :event_id, :event_type, :now, :sha256, :payload, 'received', 1,"
    " :headers, :now)"
    " ON CONFLICT (provider, event_id) DO UPDATE SET"
    " attempts = payment_events.attempts + 1,"
    " next_attempt_at = CASE WHEN payment_events.status IN ('processed', 'duplicate', 'ignored')"
    " THEN payment_events.next_attempt_at ELSE excluded.next_attempt_at END"
    " RETURNING id, status, attempts"
)


def _queue_event(registry, event: VerifiedEvent, headers: Mapping[str, str], now) -> LoggedEvent:
    with raw_autocommit(registry["cmsshop.engine"]) as conn:
        cursor = QUEUE_EVENT.run(
            conn,
            {
                "provider": event.provider,
                "event_id": event.event_id,
                "event_type": event.event_type[:100],
                "now": db_time(conn, now),
                "sha256": hashlib.sha256(event.raw).hexdigest(),
                "payload": safe_text(event.raw),
                "headers": storable_headers(headers),
            },
        )
        row = cursor.fetchone()
        cursor.close()
    return LoggedEvent(*row)


def rejected_summary(
    provider: PaymentProvider,
    headers: Mapping[str, str],
    raw: bytes,
    reason: str,
    failure: str = "invalid signature",
) -> dict[str, Any]:
    """The bounded row of a delivery that failed verification: whatever an anonymous
    caller sends, a few KiB at most. A small body is kept whole (an operator can
    re-verify it once a wrong secret is fixed); a larger one only as its hash, size and
    an excerpt. Only the headers the provider signs with, content-type and user-agent
    are kept, each capped."""
    keep_whole = len(raw) <= MAX_KEPT_REJECTED_BODY
    stored = raw if keep_whole else raw[:REJECTED_EXCERPT]
    claimed_type = "unknown"
    try:
        claimed = json.loads(raw) if keep_whole else None
        if isinstance(claimed, dict):
            kind = claimed.get("type") or claimed.get("event_type")
            if isinstance(kind, str) and kind:
                claimed_type = safe_text(kind, 100)
    except (ValueError, RecursionError):
        pass
    wanted = dict.fromkeys(getattr(provider, "signature_headers", ()), MAX_SIGNATURE_HEADER)
    wanted.update(REJECTED_CONTEXT_HEADERS)
    return {
        "event_type": claimed_type,
        "payload_sha256": hashlib.sha256(raw).hexdigest(),
        "payload": safe_text(stored),
        "last_error": safe_text(
            f"{failure}: {safe_text(reason, 300)}"
            + ("" if keep_whole else f" (body of {len(raw)} bytes; only an excerpt kept)"),
            MAX_ERROR,
        ),
        "headers": selected_headers(headers, wanted),
    }


REJECTED_IP_POLICY = "webhooks.rejected_ip"


def record_rejected(
    registry,
    limiter: RateLimiter,
    provider: PaymentProvider,
    headers: Mapping[str, str],
    raw: bytes,
    reason: str,
    client_ip: str,
    failure: str = "invalid signature",
) -> None:
    """Log a delivery that failed verification (bounded, never a secret). The claimed
    event id is not trusted, so the row gets an id of its own; reprocess re-verifies it.

    ``failure`` says why: an invalid signature, or a verification that could not be
    done now (a certificate host that does not answer). Both come from anyone, and both
    count: past the per-address policy nothing is logged and RateLimited is raised, so a
    flood costs one counter row per address and window, not a row per request."""
    refusal = limiter.count([(REJECTED_IP_POLICY, client_ip)])
    if refusal is not None:
        raise RateLimited(refusal.retry_after, "Too many deliveries that could not be verified.")
    try:
        with own_transaction(registry) as session:
            session.add(
                PaymentEvent(
                    provider=provider.name,
                    event_id=f"unverified-{uuid.uuid4().hex}",
                    received_at=utcnow(),
                    status="rejected",
                    attempts=1,
                    **rejected_summary(provider, headers, raw, reason, failure),
                )
            )
    except Exception:  # noqa: BLE001 - the 400 answer must not turn into a 500
        log.warning("could not log a rejected %s delivery", provider.name, exc_info=True)


def record_unprocessable(
    registry, event: VerifiedEvent, headers: Mapping[str, str], problem: str
) -> None:
    """Log a verified event that cannot be stored or acted on as it is: final
    (``ignored``) under an id derived from its own, so a redelivery counts an attempt."""
    claimed = event.event_id.encode("utf-8", errors="surrogatepass")
    with own_transaction(registry) as session:
        stmt = (
            _insert_for(session)(PaymentEvent)
            .values(
                provider=event.provider,
                event_id=f"unprocessable-{hashlib.sha256(claimed).hexdigest()[:40]}",
                event_type=safe_text(event.event_type, 100),
                received_at=utcnow(),
                payload_sha256=hashlib.sha256(event.raw).hexdigest(),
                payload=safe_text(event.raw),
                status="ignored",
                attempts=1,
                last_error=safe_text(f"unprocessable: {problem}", MAX_ERROR),
                processed_at=utcnow(),
                headers=storable_headers(headers),
            )
            .on_conflict_do_update(
                index_elements=[PaymentEvent.provider, PaymentEvent.event_id],
                set_={"attempts": PaymentEvent.attempts + 1},
            )
        )
        session.execute(stmt)


def claim(session: Session, row_id: int) -> None:
    """The business transaction's first statement: a write, so that on SQLite the write
    lock is taken before any read (a fresh snapshot), and on PostgreSQL deliveries of
    the same event queue here."""
    session.execute(
        update(PaymentEvent)
        .where(PaymentEvent.id == row_id)
        .values(attempts=PaymentEvent.attempts)
        .execution_options(synchronize_session=False)
    )


def set_outcome(
    session: Session, row_id: int, status: str, order_number: str | None, note: str
) -> None:
    values: dict[str, Any] = {
        "status": status,
        "last_error": safe_text(note, MAX_ERROR) if note else None,
        "processed_at": utcnow(),
        "next_attempt_at": None,  # final: nothing left for the worker
    }
    if order_number:
        values["order_number"] = order_number[:32]
    session.execute(
        update(PaymentEvent)
        .where(PaymentEvent.id == row_id)
        .values(**values)
        .execution_options(synchronize_session=False)
    )


class FailureRecorder:
    """Writes the failure of a delivery on its event row once the business transaction
    has aborted (or failed to commit), in a transaction of its own. A final status
    (processed by a concurrent delivery) is never overwritten."""

    def __init__(self, registry, row_id: int):
        self.registry = registry
        self.row_id = row_id
        self.status = "error"
        self.message = "the transaction was rolled back"
        self.order_number: str | None = None

    def attach(self, txn) -> None:
        txn.addAfterAbortHook(self._after_abort)
        txn.addAfterCommitHook(self._after_commit)

    def fail(self, status: str, message: str, order_number: str | None = None) -> None:
        self.status, self.message = status, message
        if order_number:
            self.order_number = order_number

    def _after_commit(self, committed: bool) -> None:
        if not committed:
            self.fail("error", f"commit failed ({self.message})")
            self._record()

    def _after_abort(self) -> None:
        self._record()

    def _record(self) -> None:
        values: dict[str, Any] = {
            "status": self.status,
            "last_error": safe_text(self.message, MAX_ERROR),
        }
        if self.order_number:
            values["order_number"] = self.order_number[:32]
        try:
            with own_transaction(self.registry) as session:
                session.execute(
                    update(PaymentEvent)
                    .where(
                        PaymentEvent.id == self.row_id,
                        PaymentEvent.status.not_in(FINAL_STATUSES),
                    )
                    .values(**values)
                )
        except Exception:  # noqa: BLE001 - a hook must not raise; the log line remains
            log.warning("could not record the outcome of event %s", self.row_id, exc_info=True)
