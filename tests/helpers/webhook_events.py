"""Reading the outgoing webhook events a test's causes wrote, and the endpoints that
subscribe to them (written as the console writes them)."""

from __future__ import annotations

from sqlalchemy import select

from cmsshop.models import WEBHOOK_EVENT_TYPES, WebhookDelivery, WebhookEndpoint, WebhookEvent
from cmsshop.services.webhooks import signing
from helpers.app import TEST_SECRET


def subscribe(dbsession, url="http://127.0.0.1:9/hook", event_types=WEBHOOK_EVENT_TYPES, **kw):
    """A committed endpoint of ``event_types``; returns it."""
    endpoint = WebhookEndpoint(
        url=url,
        description="",
        event_types=list(event_types),
        enabled=kw.pop("enabled", True),
        secret_encrypted=signing.encrypt_secret(
            TEST_SECRET, kw.pop("secret", signing.new_secret())
        ),
        **kw,
    )
    dbsession.add(endpoint)
    dbsession.commit()
    return endpoint


def events(dbsession, event_type: str | None = None) -> list[WebhookEvent]:
    """The events written so far (a fresh snapshot), oldest first."""
    dbsession.rollback()
    dbsession.expire_all()
    query = select(WebhookEvent).order_by(WebhookEvent.id)
    if event_type:
        query = query.where(WebhookEvent.type == event_type)
    return list(dbsession.scalars(query))


def types_of(dbsession) -> list[str]:
    return [event.type for event in events(dbsession)]


def deliveries_to(dbsession, endpoint) -> list[WebhookDelivery]:
    dbsession.rollback()
    return list(
        dbsession.scalars(
            select(WebhookDelivery)
            .where(WebhookDelivery.endpoint_id == endpoint.id)
            .order_by(WebhookDelivery.id)
        )
    )
