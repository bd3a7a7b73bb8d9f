"""Arranging outgoing webhook deliveries for the delivery tests: endpoints and events
written with the models and emit_event, as the console and the features write them."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select

from cmsshop.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from cmsshop.services.webhooks import signing
from cmsshop.services.webhooks.events import emit_event
from helpers.app import TEST_SECRET

ALL_TYPES = ["order.paid", "license.created", "license.revoked", "license.renewed"]


def add_endpoint(session, url: str, *, event_types=None, secret: str | None = None, **fields):
    """A committed endpoint; returns (endpoint, its secret in clear)."""
    secret = secret or signing.new_secret()
    endpoint = WebhookEndpoint(
        url=url,
        description="test receiver",
        event_types=list(event_types or ALL_TYPES),
        enabled=True,
        secret_encrypted=signing.encrypt_secret(TEST_SECRET, secret),
        **fields,
    )
    session.add(endpoint)
    session.commit()
    return endpoint, secret


def emit(session, event_type: str = "order.paid", subject: str = "order:CS-1", **data):
    """Emit an event and commit it (as its cause's transaction does)."""
    event = emit_event(session, event_type, subject=subject, data=data or {"n": 1})
    session.commit()
    return event


def deliveries(session) -> list[WebhookDelivery]:
    session.commit()  # ends the read snapshot: see what the workers committed
    session.expire_all()
    return list(session.scalars(select(WebhookDelivery).order_by(WebhookDelivery.id)))


def attempts(session, delivery_id: int | None = None) -> list[WebhookAttempt]:
    session.commit()  # ends the read snapshot: see what the workers committed
    session.expire_all()
    query = select(WebhookAttempt).order_by(WebhookAttempt.id)
    if delivery_id is not None:
        query = query.where(WebhookAttempt.delivery_id == delivery_id)
    return list(session.scalars(query))


def make_due(session, now: dt.datetime) -> None:
    """Every pending delivery due at ``now`` (what waiting out its back-off would do)."""
    for delivery in deliveries(session):
        if delivery.status == "pending":
            delivery.next_attempt_at = now
    session.commit()
