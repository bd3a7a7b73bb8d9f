"""Queued webhook processing: the worker acts on logged events.

With ``cmsshop.payments.webhook_processing = queued`` (the production default) a
verified delivery is logged as ``received`` with ``next_attempt_at = now``, committed,
and answered 200 ``queued``: the webhook request never waits on the provider's API.
``cmsshop-admin worker`` then calls ``process_due_events`` in a loop; each pass:

1. takes up to ``limit`` due events in one short transaction, moving their
   ``next_attempt_at`` LEASE seconds ahead (on PostgreSQL ``FOR UPDATE SKIP LOCKED``, so
   two workers take different events; SQLite has one writer). A worker killed mid-pass
   leaves its events to be taken again when the lease ends;
2. confirms the payments of the FULFIL events with their provider (several calls at
   once; no lock is held) and fulfils the plain ones together in one transaction
   (services/payments/fulfil_batch.py: set-based, about a dozen statements a batch);
3. processes every other event -- refunds, disputes, captures, unknown orders, failed
   confirmations, anything not plain -- exactly as an inline delivery would be
   (``delivery.process_event`` in a unit of work of its own: confirm with the provider,
   claim the event row, lock the order, act). Exactly-once rests on the same claim,
   order lock and unique constraints in both paths, so a worker, a second worker and an
   admin's reprocess never fulfil twice;
4. a final outcome clears ``next_attempt_at`` (``log.set_outcome``). A failure (the order
   unknown yet, the provider down, the payment not final, any error) is written on the
   row by process_event and retried after half the event's age, between RETRY_MIN and
   RETRY_MAX; an event older than GIVE_UP_AFTER is left to an admin's reprocess, like a
   failed inline delivery.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import select, update

from cmsshop.db import own_transaction
from cmsshop.models import PaymentEvent
from cmsshop.services.payments import base as pb
from cmsshop.services.payments.base import VerifiedEvent
from cmsshop.services.payments.events.delivery import (
    confirm_payment,
    process_event,
    trusts_verified_events,
)
from cmsshop.services.payments.events.errors import DeliveryError
from cmsshop.services.payments.events.log import FINAL_STATUSES
from cmsshop.services.payments.events.reprocess import run_unit
from cmsshop.services.payments.fulfil_batch import Confirmed, fulfil_batch
from cmsshop.services.payments.registry import PaymentProviders
from cmsshop.services.payments.settings import provider_config
from cmsshop.util import utcnow

log = logging.getLogger(__name__)

# Longer than a provider call can take (their timeouts are seconds), so an event is
# taken again only when the worker that took it is gone.
LEASE = dt.timedelta(minutes=10)
RETRY_MIN = dt.timedelta(seconds=5)
RETRY_MAX = dt.timedelta(hours=1)
GIVE_UP_AFTER = dt.timedelta(days=3)
BATCH = 100
# Provider confirmations of one pass made at once (each is one HTTPS call).
CONFIRM_CALLS = 32


@dataclasses.dataclass(frozen=True)
class DueEvent:
    id: int
    provider: str
    event_id: str
    event_type: str
    payload: str
    received_at: dt.datetime


def take_due_events(registry, limit: int = BATCH, now: dt.datetime | None = None) -> list[DueEvent]:
    """Lease up to ``limit`` due events to this worker, oldest first."""
    now = now or utcnow()
    with own_transaction(registry) as session:
        # A redelivery counted while a worker finished the event can leave a final row
        # due: it is done, not retried (its outcome stays).
        session.execute(
            update(PaymentEvent)
            .where(
                PaymentEvent.next_attempt_at.is_not(None),
                PaymentEvent.status.in_(FINAL_STATUSES),
            )
            .values(next_attempt_at=None)
        )
        due = (
            select(PaymentEvent.id)
            .where(
                PaymentEvent.next_attempt_at <= now,
                PaymentEvent.status.not_in(FINAL_STATUSES),
            )
            .order_by(PaymentEvent.next_attempt_at, PaymentEvent.id)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        rows = session.execute(
            update(PaymentEvent)
            .where(PaymentEvent.id.in_(due.scalar_subquery()))
            .values(next_attempt_at=now + LEASE)
            .returning(
                PaymentEvent.id,
                PaymentEvent.provider,
                PaymentEvent.event_id,
                PaymentEvent.event_type,
                PaymentEvent.payload,
                PaymentEvent.received_at,
            )
            .execution_options(synchronize_session=False)
        ).all()
    events = [DueEvent(*row) for row in rows]
    return sorted(events, key=lambda e: (e.received_at, e.id))


def retry_at(received_at: dt.datetime, now: dt.datetime) -> dt.datetime | None:
    """When a failed event is tried again: after half its age, within RETRY_MIN ..
    RETRY_MAX; None once it is older than GIVE_UP_AFTER (an admin reprocesses it)."""
    age = now - received_at
    if age > GIVE_UP_AFTER:
        return None
    return now + min(max(age / 2, RETRY_MIN), RETRY_MAX)


def _reschedule(registry, due: DueEvent, when: dt.datetime | None) -> None:
    with own_transaction(registry) as session:
        session.execute(
            update(PaymentEvent)
            .where(PaymentEvent.id == due.id, PaymentEvent.status.not_in(FINAL_STATUSES))
            .values(next_attempt_at=when)
            .execution_options(synchronize_session=False)
        )


def _verified(due: DueEvent) -> VerifiedEvent:
    """The logged event as its verification made it (its stored payload)."""
    parsed = json.loads(due.payload)
    return VerifiedEvent(
        due.provider, due.event_id, due.event_type, parsed, due.payload.encode("utf-8")
    )


def confirm_plain(registry, providers: PaymentProviders, due: DueEvent) -> Confirmed | None:
    """The confirmed payment of a FULFIL event for a named order, or None for anything
    else or any failure (the per-event path then handles, and records, it)."""
    spec = providers.get(due.provider)
    if spec is None:
        return None
    try:
        action = spec.provider.interpret(_verified(due))
        if action.action != pb.FULFIL or not action.order_number:
            return None
        config = provider_config(registry, spec)
        confirmation = confirm_payment(registry, spec, action, config)
    except Exception:  # noqa: BLE001 - the per-event path tries again and records why
        return None
    return Confirmed(due.id, spec.name, action.order_number, confirmation)


def process_one(registry, providers: PaymentProviders, due: DueEvent) -> str:
    """Act on one leased event; the outcome's status, or the failure's event status."""
    spec = providers.get(due.provider)
    outcome = "error"
    if spec is None:
        outcome = "module_disabled"
        log.warning("payment event %s: the %s module is not enabled", due.id, due.provider)
    else:
        try:
            event = _verified(due)
            config = provider_config(registry, spec)
            result = run_unit(
                registry,
                lambda session, tm: process_event(
                    registry, session, tm, spec, event, due.id, config
                ),
            )
            return result.status
        except DeliveryError as exc:
            outcome = exc.event_status
            log.info("payment event %s not done yet (%s): %s", due.id, outcome, exc)
        except Exception:
            # Recorded on the row by process_event's failure hook when it got that far.
            log.exception("payment event %s failed; it is retried", due.id)
    now = utcnow()
    when = retry_at(due.received_at, now)
    if when is None:
        log.warning(
            "payment event %s is %s old and still %s: no more automatic retries; "
            "an admin can reprocess it",
            due.id,
            now - due.received_at,
            outcome,
        )
    _reschedule(registry, due, when)
    return outcome


def process_due_events(
    registry,
    providers: PaymentProviders,
    *,
    limit: int = BATCH,
    stop: Callable[[], bool] | None = None,
) -> Counter:
    """One pass: lease the due events and act on them. Returns the outcomes counted."""
    outcomes: Counter = Counter()
    leased = take_due_events(registry, limit)
    if not leased:
        return outcomes

    def confirm(due: DueEvent) -> Confirmed | None:
        return confirm_plain(registry, providers, due)

    if trusts_verified_events(registry):  # development: no provider call to wait on
        confirmed = [confirm(due) for due in leased]
    else:
        with ThreadPoolExecutor(max_workers=min(CONFIRM_CALLS, len(leased))) as pool:
            confirmed = list(pool.map(confirm, leased))
    done, left = fulfil_batch(registry, [c for c in confirmed if c is not None])
    if done:
        outcomes["processed"] += len(done)
    settled = set(done) | {c.row_id for c in confirmed if c is not None and c not in left}
    for due in leased:
        if due.id in settled:
            continue
        if stop is not None and stop():
            # Not started: due again at once for the next worker.
            _reschedule(registry, due, utcnow())
            continue
        outcomes[process_one(registry, providers, due)] += 1
    return outcomes
