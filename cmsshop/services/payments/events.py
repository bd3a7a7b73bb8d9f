"""The provider event log and the provider-neutral handling of one webhook delivery.

Order of work for a delivery (each step says which transaction it runs in):

1. read the provider config (a short session of its own) and ``verify`` the signature --
   nothing is written before this; a failure is logged as ``rejected`` (own transaction)
   and answered 400;
2. ``interpret`` (no I/O), then log the event (own transaction, committed at once):
   insert ``received`` or, for a redelivery, count the attempt; in the same short
   transaction, read which order the event is about. An event already
   ``processed``/``duplicate``/``ignored`` is answered ``duplicate``, nothing else happens;
3. for a payment, ``confirm`` it with the provider API (or trust the verified event when
   the operator allows it, development only); for a ``capture`` action (the buyer
   approved), ask the provider to capture (``_capture``: idempotent, nothing marked paid).
   No lock is held during these network calls;
4. the business transaction (the request's, committed by pyramid_tm): its FIRST statement
   claims the event row (an UPDATE), then the order row is locked FOR UPDATE, the state
   machine acts, and the event's outcome is written in the same transaction -- so the
   outcome and the business rows commit together or not at all;
5. when that transaction aborts instead (409 unknown order, 503 provider down, any error,
   a failed commit), an after-abort hook records the failure on the event row in a
   transaction of its own, never overwriting a final status. The provider gets a non-2xx
   answer and delivers again; an admin can also reprocess from the stored payload.

Lock ordering: on SQLite our own transactions are never open while the request session
holds the write lock (steps 1-3 finish before step 4's first write; step 5 runs after the
abort released it). Making step 4's first statement a write also means the SQLite read
snapshot starts after our own commits, so it can be upgraded to a write. On PostgreSQL
the claim serialises deliveries of the same event and the order lock serialises
different events of the same payment; nobody waits while holding what the other needs.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import transaction
import zope.sqlalchemy
from requests.structures import CaseInsensitiveDict
from sqlalchemy import func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from transaction.interfaces import NoTransaction

from cmsshop.db import is_retryable_db_error, own_transaction
from cmsshop.models import Fulfilment, Order, PaymentEvent
from cmsshop.services.payments import fulfilment
from cmsshop.services.payments.base import (
    CANCEL,
    CAPTURE,
    DISPUTE_LOST,
    DISPUTE_OPENED,
    DISPUTE_WON,
    FAIL,
    FULFIL,
    IGNORE,
    REFUND,
    Confirmation,
    EventAction,
    NotConfigured,
    ProviderUnavailable,
    SignatureInvalid,
    VerifiedEvent,
)
from cmsshop.services.payments.settings import ProviderSpec, find_provider, provider_config
from cmsshop.util import isoformat_z, utcnow

log = logging.getLogger(__name__)

FINAL_STATUSES = ("processed", "duplicate", "ignored")
MAX_REJECTED_PAYLOAD = 64 * 1024
MAX_ERROR = 2000
# Never stored: they authenticate someone, they do not describe the delivery.
DROPPED_HEADERS = {"cookie", "authorization", "proxy-authorization", "x-csrf-token"}


# --- errors (mapped to HTTP by the views) --------------------------------------------------


class DeliveryError(Exception):
    """A delivery that could not be handled now; ``event_status`` is logged."""

    event_status = "error"


class WebhookNotConfigured(DeliveryError):
    """No webhook secret: 503, the provider keeps retrying until an operator sets it."""


class VerificationUnavailable(DeliveryError):
    """Verification needed something remote (a certificate) that did not answer: 503."""


class DeliveryRejected(DeliveryError):
    event_status = "rejected"


class OrderNotFound(DeliveryError):
    """409: the provider retries (the order may not be committed yet)."""

    event_status = "pending_order"


class ConfirmFailed(DeliveryError):
    """503: the provider API was unreachable or refused; nothing was marked paid."""

    event_status = "confirm_failed"


class CaptureFailed(DeliveryError):
    """503: asking the provider to capture an approved payment failed; the provider
    redelivers the approval (logged ``confirm_failed``: the provider API call failed)."""

    event_status = "confirm_failed"


class PaymentNotFinal(DeliveryError):
    """409: the event says paid, the provider API does not (yet)."""

    event_status = "confirm_failed"


class CannotReprocess(DeliveryError):
    """409: the stored event cannot be processed again (final, or still unverifiable)."""


class EventNotFound(DeliveryError):
    pass


@dataclasses.dataclass(frozen=True)
class DeliveryResult:
    """``status``: processed / duplicate / ignored / needs_review (the response's)."""

    status: str
    event_log_id: int | None = None
    order_number: str | None = None
    note: str = ""


@dataclasses.dataclass(frozen=True)
class OrderRef:
    id: int
    number: str
    status: str
    fulfilled: bool
    provider: str = ""
    checkout_id: str | None = None


# --- small helpers ---------------------------------------------------------------------------


def safe_text(value: bytes | str, limit: int | None = None) -> str:
    """Text any database stores: valid UTF-8 (invalid bytes replaced), no NUL."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    value = value.replace("\x00", "\ufffd")
    return value[:limit] if limit is not None else value


def storable_headers(headers: Mapping[str, str]) -> str:
    kept = {
        safe_text(str(name), 100): safe_text(str(value), 4096)
        for name, value in headers.items()
        if str(name).lower() not in DROPPED_HEADERS
    }
    return json.dumps(dict(list(kept.items())[:50]))


def _insert_for(session: Session):
    return postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert


# --- the event log -------------------------------------------------------------------------


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
) -> tuple[LoggedEvent, OrderRef | None]:
    """Insert the verified event as ``received``, or count one more delivery of it.

    ``lookup`` (finding the event's order, a read) runs in the same short transaction,
    after the log row is written, unless the event is already final: one round of
    connection, BEGIN and COMMIT less per delivery.
    """
    with own_transaction(registry) as session:
        insert = _insert_for(session)
        stmt = (
            insert(PaymentEvent)
            .values(
                provider=event.provider,
                event_id=event.event_id,
                event_type=event.event_type[:100],
                received_at=utcnow(),
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


def record_rejected(registry, provider: str, headers: Mapping[str, str], raw: bytes, reason: str):
    """Log a delivery that failed verification (reason only, never a secret). The claimed
    event id is not trusted, so the row gets an id of its own; reprocess re-verifies it."""
    claimed_type = "unknown"
    try:
        claimed = json.loads(raw) if len(raw) <= MAX_REJECTED_PAYLOAD else None
        if isinstance(claimed, dict):
            kind = claimed.get("type") or claimed.get("event_type")
            if isinstance(kind, str) and kind:
                claimed_type = safe_text(kind, 100)
    except (ValueError, RecursionError):
        pass
    stored = raw if len(raw) <= MAX_REJECTED_PAYLOAD else b""
    try:
        with own_transaction(registry) as session:
            session.add(
                PaymentEvent(
                    provider=provider,
                    event_id=f"unverified-{uuid.uuid4().hex}",
                    event_type=claimed_type,
                    received_at=utcnow(),
                    payload_sha256=hashlib.sha256(raw).hexdigest(),
                    payload=safe_text(stored),
                    status="rejected",
                    attempts=1,
                    last_error=safe_text(
                        f"invalid signature: {reason}"
                        + ("" if stored else f" (body of {len(raw)} bytes not kept)"),
                        MAX_ERROR,
                    ),
                    headers=storable_headers(headers),
                )
            )
    except Exception:  # noqa: BLE001 - the 400 answer must not turn into a 500
        log.warning("could not log a rejected %s delivery", provider, exc_info=True)


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


# --- one delivery ----------------------------------------------------------------------------


def receive_delivery(
    registry, session: Session, tm, spec: ProviderSpec, headers: Mapping[str, str], raw: bytes
) -> DeliveryResult:
    """Handle one webhook delivery (see the module docstring); raise a DeliveryError."""
    config = provider_config(registry, spec)
    try:
        event = spec.provider.verify(headers, raw, config)
    except NotConfigured as exc:
        log.warning("%s webhook refused: %s", spec.name, exc)
        raise WebhookNotConfigured(str(exc)) from None
    except ProviderUnavailable as exc:
        raise VerificationUnavailable(str(exc)) from None
    except SignatureInvalid as exc:
        log.warning("%s webhook rejected: %s", spec.name, exc)
        record_rejected(registry, spec.name, headers, raw, str(exc))
        raise DeliveryRejected(str(exc)) from None
    try:
        action = spec.provider.interpret(event)  # no I/O; a failure is retried below
    except Exception:  # noqa: BLE001 - process_event interprets again and records it
        action = None
    lookup = None
    if action is not None and action.action != IGNORE:
        lookup = functools.partial(find_order, registry, spec.name, action)
    logged, ref = log_event(registry, event, headers, lookup)
    if logged.status in FINAL_STATUSES:
        return DeliveryResult("duplicate", logged.id, note=f"event already {logged.status}")
    return process_event(
        registry,
        session,
        tm,
        spec,
        event,
        logged.id,
        config,
        action=action,
        ref=ref,
        looked_up=lookup is not None,
    )


def process_event(
    registry,
    session: Session,
    tm,
    spec: ProviderSpec,
    event: VerifiedEvent,
    row_id: int,
    config: Mapping[str, Any],
    *,
    action: EventAction | None = None,
    ref: OrderRef | None = None,
    looked_up: bool = False,
) -> DeliveryResult:
    """Steps 3-5 for a logged, verified event, in ``session`` joined to ``tm``
    (``action``/``ref``: already interpreted / the order already looked up)."""
    recorder = FailureRecorder(registry, row_id)
    recorder.attach(tm.get())
    try:
        if action is None:
            action = spec.provider.interpret(event)
            looked_up = False
        return _act(registry, session, spec, action, row_id, config, ref, looked_up)
    except DeliveryError as exc:
        recorder.fail(exc.event_status, str(exc), action.order_number if action else None)
        raise
    except Exception as exc:
        recorder.fail(
            "error", f"{type(exc).__name__}: {exc}", action.order_number if action else None
        )
        raise


def find_order(
    registry, provider: str, action: EventAction, session: Session | None = None
) -> OrderRef | None:
    """The order an event is about: by our number, else the provider's checkout object,
    else the payment reference (refunds and disputes). A read in ``session`` or, without
    one, in a short transaction of its own."""
    if session is None:
        with own_transaction(registry) as own:
            return find_order(registry, provider, action, own)
    order = None
    if action.order_number:
        order = session.scalar(select(Order).where(Order.number == action.order_number[:64]))
    if order is None and action.provider_object_id:
        order = session.scalar(
            select(Order).where(
                Order.provider == provider,
                Order.provider_checkout_id == action.provider_object_id,
            )
        )
    if order is None and action.payment_reference:
        order = session.scalar(
            select(Order)
            .join(Fulfilment, Fulfilment.order_id == Order.id)
            .where(
                Fulfilment.provider == provider,
                Fulfilment.payment_reference == action.payment_reference,
            )
        ) or session.scalar(
            select(Order).where(
                Order.provider == provider,
                Order.payment_reference == action.payment_reference,
            )
        )
    if order is None:
        return None
    fulfilled = fulfilment.fulfilment_of(session, order.id) is not None
    return OrderRef(
        order.id, order.number, order.status, fulfilled, order.provider, order.provider_checkout_id
    )


def trusts_verified_events(registry) -> bool:
    return bool(registry.settings.get("cmsshop.payments.trust_verified_events"))


def confirm_payment(
    registry, spec: ProviderSpec, action: EventAction, config: Mapping[str, Any]
) -> Confirmation:
    """The provider API's account of the payment, or the verified event's own when the
    operator trusts verified events (development; production refuses that setting)."""
    if trusts_verified_events(registry):
        return Confirmation(
            final=True,
            amount=action.amount if action.amount is not None else -1,
            currency=action.currency or "",
            order_number=action.order_number,
            payment_reference=action.payment_reference or action.provider_object_id or "",
        )
    try:
        confirmation = spec.provider.confirm(action, config)
    except (ProviderUnavailable, NotConfigured) as exc:
        raise ConfirmFailed(f"could not confirm with {spec.name}: {exc}") from None
    if not confirmation.final:
        raise PaymentNotFinal(f"{spec.name} does not report the payment as complete")
    if not confirmation.payment_reference:
        raise ConfirmFailed(f"{spec.name} reported no payment reference")
    return confirmation


EVENT_STATUS_OF_RESULT = {
    "processed": "processed",
    "needs_review": "processed",
    "duplicate": "duplicate",
    "ignored": "ignored",
}


def _act(
    registry,
    session: Session,
    spec: ProviderSpec,
    action: EventAction,
    row_id: int,
    config: Mapping[str, Any],
    ref: OrderRef | None = None,
    looked_up: bool = False,
) -> DeliveryResult:
    if action.action == IGNORE:
        claim(session, row_id)
        set_outcome(session, row_id, "ignored", action.order_number, action.reason)
        return DeliveryResult("ignored", row_id, action.order_number, action.reason)
    if not looked_up:
        ref = find_order(registry, spec.name, action)
    if ref is None:
        named = action.order_number or action.payment_reference or action.provider_object_id
        raise OrderNotFound(f"no order matches {named!r} yet")
    if action.action == CAPTURE:
        return _capture(registry, session, spec, action, row_id, config, ref)
    confirmation = None
    if (
        action.action == FULFIL
        and not ref.fulfilled
        and ref.status
        in (
            "pending",
            "failed",
            "cancelled",
        )
    ):
        confirmation = confirm_payment(registry, spec, action, config)
    claim(session, row_id)
    order = fulfilment.lock_order(session, ref.id)
    result = apply_action(session, spec.name, order, action, confirmation, row_id)
    note = result.note
    if result.status == "needs_review":
        note = f"needs review: {note}"
        log.warning("order %s needs review: %s", order.number, result.note)
    set_outcome(session, row_id, EVENT_STATUS_OF_RESULT[result.status], order.number, note)
    session.flush()
    return DeliveryResult(result.status, row_id, order.number, note)


def _capture(
    registry,
    session: Session,
    spec: ProviderSpec,
    action: EventAction,
    row_id: int,
    config: Mapping[str, Any],
    ref: OrderRef,
) -> DeliveryResult:
    """CAPTURE: ask the provider to take the money for a pending order. The provider
    call happens before this transaction's first statement (no event claim, no order
    lock, no SQLite write lock held while waiting on the network); it must be idempotent,
    because two concurrent deliveries of the same approval can both get here. The order
    is not touched: the provider's "payment completed" event fulfils it."""
    status, note = "processed", ""
    capture = getattr(spec.provider, "capture", None)
    problem = None
    if ref.status != "pending" or ref.fulfilled:
        problem = f"order is {ref.status}; not captured"
    elif ref.provider != spec.name:
        problem = f"order was placed with {ref.provider}; not captured"
    elif ref.checkout_id and action.provider_object_id != ref.checkout_id:
        problem = f"{action.provider_object_id} is not the order's checkout {ref.checkout_id}"
    elif capture is None:
        problem = f"{spec.name} has no capture step"
    if problem is not None:
        status, note = "ignored", problem
    else:
        try:
            capture(action, config)
            note = f"capture of {action.provider_object_id} requested"
        except NotConfigured as exc:
            if not trusts_verified_events(registry):
                raise CaptureFailed(f"could not capture with {spec.name}: {exc}") from None
            # Development without API credentials: the simulated payment stands in.
            status, note = "ignored", f"not captured: {exc}"
        except ProviderUnavailable as exc:
            raise CaptureFailed(f"could not capture with {spec.name}: {exc}") from None
    claim(session, row_id)
    set_outcome(session, row_id, status, ref.number, note)
    session.flush()
    log.info("%s %s for order %s: %s", spec.name, status, ref.number, note)
    return DeliveryResult(status, row_id, ref.number, note)


def apply_action(
    session: Session,
    provider: str,
    order,
    action: EventAction,
    confirmation: Confirmation | None,
    row_id: int | None,
) -> fulfilment.Result:
    """The state machine's answer to ``action`` for a locked ``order``."""
    kind = action.action
    if kind == FULFIL:
        if confirmation is None:
            # The order was already past pending when we looked: nothing to confirm.
            existing = fulfilment.fulfilment_of(session, order.id)
            same = existing is not None and existing.payment_event_id == row_id
            return fulfilment.Result(
                "processed" if same else "duplicate", f"order is {order.status}"
            )
        return fulfilment.fulfil_confirmed_payment(
            session, order, provider=provider, confirmation=confirmation, payment_event_id=row_id
        )
    if kind == FAIL:
        return fulfilment.close_order(session, order, "failed")
    if kind == CANCEL:
        return fulfilment.close_order(session, order, "cancelled")
    if kind == REFUND:
        return fulfilment.refund(session, order, amount=action.amount, currency=action.currency)
    if kind == DISPUTE_OPENED:
        return fulfilment.open_dispute(session, order)
    if kind in (DISPUTE_WON, DISPUTE_LOST):
        return fulfilment.close_dispute(session, order, won=kind == DISPUTE_WON)
    return fulfilment.Result("ignored", f"unknown action {kind!r}")


# --- reprocess (admin) -----------------------------------------------------------------------


def run_unit(registry, work: Callable[[Session, Any], DeliveryResult], attempts: int = 3):
    """Run ``work(session, tm)`` in a transaction of its own, retried like a request
    (IntegrityError and SQLite lock errors settle on a second run)."""
    for attempt in range(attempts):
        tm = transaction.TransactionManager(explicit=True)
        tm.begin()
        session = registry["cmsshop.session_factory"]()
        zope.sqlalchemy.register(session, transaction_manager=tm)
        try:
            result = work(session, tm)
            tm.commit()
            return result
        except Exception as exc:
            if _in_transaction(tm):
                tm.abort()
            retryable = isinstance(exc, IntegrityError) or is_retryable_db_error(exc)
            if not retryable or attempt == attempts - 1:
                raise
        finally:
            session.close()
    raise AssertionError("unreachable")


def _in_transaction(tm) -> bool:
    try:
        tm.get()
    except NoTransaction:
        return False
    return True


def reprocess_event(registry, row_id: int) -> DeliveryResult:
    """Process a logged event again from its stored payload, as a fresh delivery would
    be. A ``rejected`` one is first re-verified from its stored headers with the current
    secrets (the age check is skipped: the signature still proves who sent it)."""
    with own_transaction(registry) as session:
        row = session.get(PaymentEvent, row_id)
        if row is None:
            raise EventNotFound(f"no payment event {row_id}")
        provider, status = row.provider, row.status
        event_id, event_type = row.event_id, row.event_type
        payload, headers = row.payload, row.headers
    spec = find_provider(registry, provider)
    if spec is None:
        raise CannotReprocess(f"the {provider} module is not enabled")
    if status in FINAL_STATUSES:
        raise CannotReprocess(f"event {event_id} is already {status}")
    config = provider_config(registry, spec)
    if status == "rejected":
        try:
            event = spec.provider.verify(
                CaseInsensitiveDict(json.loads(headers or "{}")),
                payload.encode("utf-8"),
                {**config, "signatureTolerance": 0},
            )
        except NotConfigured as exc:
            raise WebhookNotConfigured(str(exc)) from None
        except ProviderUnavailable as exc:
            raise VerificationUnavailable(str(exc)) from None
        except SignatureInvalid as exc:
            raise CannotReprocess(f"the stored delivery still fails verification: {exc}") from None
        row_id = adopt_verified_identity(registry, row_id, event)
        if row_id is None:
            return DeliveryResult("duplicate", note="the event was delivered again and processed")
    else:
        try:
            parsed = json.loads(payload)
        except ValueError:
            raise CannotReprocess("the stored payload is not JSON") from None
        event = VerifiedEvent(provider, event_id, event_type, parsed, payload.encode("utf-8"))
        with own_transaction(registry) as session:
            session.execute(
                update(PaymentEvent)
                .where(PaymentEvent.id == row_id)
                .values(attempts=PaymentEvent.attempts + 1)
            )
    return run_unit(
        registry,
        lambda session, tm: process_event(registry, session, tm, spec, event, row_id, config),
    )


def adopt_verified_identity(registry, row_id: int, event: VerifiedEvent) -> int | None:
    """A re-verified rejected row takes the event's real id, or -- when that event was
    logged since (the provider retried after the fix) -- defers to that row. Returns
    the row to process, or None when the event is already final."""
    with own_transaction(registry) as session:
        existing = session.scalar(
            select(PaymentEvent).where(
                PaymentEvent.provider == event.provider, PaymentEvent.event_id == event.event_id
            )
        )
        row = session.get(PaymentEvent, row_id)
        if existing is not None:
            row.status = "duplicate"
            row.last_error = f"verified on reprocess; same event as log entry {existing.id}"
            row.processed_at = utcnow()
            existing.attempts += 1
            return None if existing.status in FINAL_STATUSES else existing.id
        row.event_id = event.event_id
        row.event_type = event.event_type[:100]
        row.status = "received"
        row.attempts += 1
        row.last_error = "verified on reprocess"
    return row_id


# --- reading the log (admin) -----------------------------------------------------------------


def event_summary(row: PaymentEvent) -> dict:
    return {
        "id": row.id,
        "provider": row.provider,
        "eventId": row.event_id,
        "type": row.event_type,
        "status": row.status,
        "attempts": row.attempts,
        "orderNumber": row.order_number,
        "receivedAt": isoformat_z(row.received_at),
        "processedAt": isoformat_z(row.processed_at),
        "lastError": row.last_error,
    }


def event_detail(row: PaymentEvent) -> dict:
    try:
        headers = json.loads(row.headers) if row.headers else {}
    except ValueError:
        headers = {}
    return {
        **event_summary(row),
        "payloadSha256": row.payload_sha256,
        "payload": row.payload,
        "headers": headers if isinstance(headers, dict) else {},
    }


def list_events(
    session: Session,
    *,
    provider: str | None,
    status: str | None,
    order_number: str | None,
    page: int,
    per_page: int,
) -> tuple[list[PaymentEvent], int]:
    query = select(PaymentEvent)
    if provider:
        query = query.where(PaymentEvent.provider == provider)
    if status:
        query = query.where(PaymentEvent.status == status)
    if order_number:
        query = query.where(PaymentEvent.order_number == order_number)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.scalars(
        query.order_by(PaymentEvent.received_at.desc(), PaymentEvent.id.desc())
        .offset((page - 1) * per_page)
        .limit(per_page)
    ).all()
    return list(rows), total
