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

from sqlalchemy import select
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


def emit_event(
    session: Session,
    event_type: str,
    *,
    subject: str,
    data: Mapping[str, Any],
    endpoint_ids: list[int] | None = None,
) -> WebhookEvent | None:
    """Queue ``event_type`` about ``subject`` ("order:<number>", "license:<id>") for every
    enabled endpoint subscribed to it (or only ``endpoint_ids``: the test event), in
    ``session``'s transaction. ``data`` is the body's "data" object: JSON values only,
    never a secret of the shop's. None when no endpoint wants it (nothing is written)."""
    if event_type not in WEBHOOK_EVENT_TYPES and event_type != TEST_EVENT_TYPE:
        raise ValueError(f"unknown webhook event type {event_type!r}")
    query = select(WebhookEndpoint.id, WebhookEndpoint.event_types).where(
        WebhookEndpoint.enabled.is_(True)
    )
    if endpoint_ids is not None:
        query = query.where(WebhookEndpoint.id.in_(endpoint_ids))
    targets = [
        row.id
        for row in session.execute(query)
        if endpoint_ids is not None or event_type in (row.event_types or ())
    ]
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
        for endpoint_id in sorted(targets)
    )
    return event


def event_body(event: WebhookEvent) -> dict[str, Any]:
    """The JSON body every endpoint receives for ``event`` (the same bytes on each retry)."""
    return {
        "id": event.public_id,
        "type": event.type,
        "created": event.created_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "data": event.data,
    }
