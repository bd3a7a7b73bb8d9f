"""Reprocess (admin): run a logged event again from its stored payload, in a unit of
work of its own retried like a request."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import transaction
from requests.structures import CaseInsensitiveDict
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from transaction.interfaces import NoTransaction

from cmsshop.db import is_retryable_db_error, own_transaction
from cmsshop.models import PaymentEvent
from cmsshop.services.payments.base import (
    NotConfigured,
    ProviderUnavailable,
    SignatureInvalid,
    VerifiedEvent,
)
from cmsshop.services.payments.events.delivery import process_event
from cmsshop.services.payments.events.errors import (
    CannotReprocess,
    DeliveryResult,
    EventNotFound,
    VerificationUnavailable,
    WebhookNotConfigured,
)
from cmsshop.services.payments.events.log import FINAL_STATUSES
from cmsshop.services.payments.registry import PaymentProviders
from cmsshop.services.payments.settings import provider_config
from cmsshop.util import utcnow


def run_unit(registry, work: Callable[[Session, Any], DeliveryResult], attempts: int = 3):
    """Run ``work(session, tm)`` in a transaction of its own, retried like a request
    (IntegrityError and SQLite lock errors settle on a second run)."""
    for attempt in range(attempts):
        tm = transaction.TransactionManager(explicit=True)
        tm.begin()
        session = registry["cmsshop.request_session_factory"](info={"tm": tm})
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


def reprocess_event(registry, providers: PaymentProviders, row_id: int) -> DeliveryResult:
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
    spec = providers.get(provider)
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


def load_event(registry, row_id: int) -> PaymentEvent:
    """An event row as committed now (read in a transaction of its own, so a reprocess
    that just committed is seen whatever the caller's session has read before)."""
    with own_transaction(registry) as session:
        row = session.get(PaymentEvent, row_id)
        session.expunge(row)
    return row
