"""Writing outgoing webhook events: the outbox side.

``emit_event`` is called by the service that makes the change (fulfilment, a refund, a
licence issued...) with that change's own session: the event and one pending delivery
per enabled endpoint subscribed to its type are written in the same transaction, so a
rolled-back change sends nothing and a committed one is never forgotten. The worker
delivers them (services/webhooks/delivery.py).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from cmsshop.models import (
    TEST_EVENT_TYPE,
    WEBHOOK_EVENT_TYPES,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
)
from cmsshop.util import utcnow


def new_event_id() -> str:
    return "evt_" + secrets.token_hex(12)


def subscribers(session: Session) -> dict[str, list[int]]:
    """Event type -> the ids of the enabled endpoints subscribed to it (one SELECT)."""
    found: dict[str, list[int]] = {}
    query = select(WebhookEndpoint.id, WebhookEndpoint.event_types).where(
        WebhookEndpoint.enabled.is_(True)
    )
    for row in session.execute(query):
        for event_type in row.event_types or ():
            found.setdefault(event_type, []).append(row.id)
    return found


def _check_type(event_type: str) -> None:
    if event_type not in WEBHOOK_EVENT_TYPES and event_type != TEST_EVENT_TYPE:
        raise ValueError(f"unknown webhook event type {event_type!r}")


def emit_event(
    session: Session,
    event_type: str,
    *,
    subject: str,
    data: Mapping[str, Any],
    endpoint_ids: list[int] | None = None,
) -> WebhookEvent | None:
    """Queue ``event_type`` about ``subject`` ("order:<number>", "license:<id>") for every
    enabled endpoint subscribed to it, in ``session``'s transaction. ``data`` is the
    body's "data" object: JSON values only, never a secret of the shop's. None when no
    endpoint wants it (nothing is written).

    ``endpoint_ids`` (the test event) names the endpoints instead, enabled or not: a
    seller fixing the server behind a disabled endpoint tests it before enabling it."""
    _check_type(event_type)
    if endpoint_ids is not None:
        targets = list(
            session.scalars(select(WebhookEndpoint.id).where(WebhookEndpoint.id.in_(endpoint_ids)))
        )
    else:
        targets = subscribers(session).get(event_type, [])
    if not targets:
        return None
    now = utcnow()
    event = WebhookEvent(
        public_id=new_event_id(), type=event_type, subject=subject, data=dict(data), created_at=now
    )
    session.add(event)
    session.flush()
    session.add_all(
        WebhookDelivery(
            event_id=event.id,
            endpoint_id=endpoint_id,
            subject=subject,
            status="pending",
            created_at=now,
            next_attempt_at=now,
        )
        for endpoint_id in sorted(set(targets))
    )
    return event


def emit_events(
    session: Session,
    events: list[tuple[str, str, Mapping[str, Any]]],
    targets: Mapping[str, list[int]],
) -> int:
    """Queue many (type, subject, data) events at once, as executemany inserts (the
    batch fulfilment's path): ``targets`` is ``subscribers(session)``, read once by the
    caller. Events in the list's order, so one subject's go out in that order. How many
    events were written."""
    now = utcnow()
    rows = []
    for event_type, subject, data in events:
        _check_type(event_type)
        if targets.get(event_type):
            rows.append(
                {
                    "public_id": new_event_id(),
                    "type": event_type,
                    "subject": subject,
                    "data": dict(data),
                    "created_at": now,
                }
            )
    if not rows:
        return 0
    session.execute(insert(WebhookEvent), rows)
    ids = dict(
        session.execute(
            select(WebhookEvent.public_id, WebhookEvent.id).where(
                WebhookEvent.public_id.in_([row["public_id"] for row in rows])
            )
        ).all()
    )
    session.execute(
        insert(WebhookDelivery),
        [
            {
                "event_id": ids[row["public_id"]],
                "endpoint_id": endpoint_id,
                "subject": row["subject"],
                "status": "pending",
                "attempts": 0,
                "created_at": now,
                "next_attempt_at": now,
            }
            for row in rows
            for endpoint_id in sorted(set(targets[row["type"]]))
        ],
    )
    return len(rows)


def event_body(event: WebhookEvent) -> dict[str, Any]:
    """The JSON body every endpoint receives for ``event`` (the same bytes on each retry)."""
    return {
        "id": event.public_id,
        "type": event.type,
        "created": event.created_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "data": event.data,
    }
