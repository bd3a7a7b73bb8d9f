"""The seller's webhook endpoints: create, change, enable or disable, rotate the signing
secret with an overlap, delete, send a test event, redeliver one delivery; and the
delivery log the console and the admin API show.

A secret is returned in clear only by ``create_endpoint`` and ``rotate_secret`` (shown
once); it is stored encrypted under the server secret (signing.encrypt_secret).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cmsshop import crypto
from cmsshop.errors import NotFound, ValidationFailed
from cmsshop.models import (
    TEST_EVENT_TYPE,
    WEBHOOK_EVENT_TYPES,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
)
from cmsshop.services.paging import Page, PageRequest, fetch_page
from cmsshop.services.webhooks import addresses, delivery, payloads, signing
from cmsshop.services.webhooks.events import emit_event
from cmsshop.services.webhooks.settings import RETRY_FOR
from cmsshop.util import utcnow

DEFAULT_OVERLAP_HOURS = 24
MAX_OVERLAP_HOURS = 7 * 24


@dataclasses.dataclass(frozen=True)
class Created:
    endpoint: WebhookEndpoint
    secret: str  # in clear: shown once


def endpoint_not_found() -> NotFound:
    return NotFound(
        "No webhook endpoint has this id.",
        code="webhook_endpoint_not_found",
        hints=["List the endpoints with GET /api/admin/webhooks."],
    )


def delivery_not_found() -> NotFound:
    return NotFound(
        "This endpoint has no delivery with this id.",
        code="webhook_delivery_not_found",
        hints=["List its deliveries with GET /api/admin/webhooks/{id}/deliveries."],
    )


def secret_hint(settings: Mapping[str, Any], endpoint: WebhookEndpoint) -> str:
    """The secret masked for display ("whsec_…x9Qa"): enough to tell two apart."""
    try:
        secret = signing.decrypt_secret(settings["cmsshop.secret"], endpoint.secret_encrypted)
    except crypto.InvalidToken:  # the server secret changed since it was stored
        return "unreadable (the server secret changed: rotate it)"
    return f"{signing.SECRET_PREFIX}…{secret[-4:]}"


def check_url(settings: Mapping[str, Any], url: str, field: str = "url") -> str:
    """The URL as saved; 422 with a field error for one production refuses. Names are
    resolved now too, but each delivery checks its DNS answers again."""
    url = url.strip()
    allow_private = bool(settings.get("cmsshop.webhooks.allow_private_addresses"))
    resolver = None if allow_private else addresses.make_resolver(settings)
    problem = addresses.url_problem(url, allow_private=allow_private, resolver=resolver)
    if problem:
        raise ValidationFailed({field: problem})
    return url


def check_event_types(values: Iterable[str], field: str = "eventTypes") -> list[str]:
    chosen = list(dict.fromkeys(values))
    unknown = [value for value in chosen if value not in WEBHOOK_EVENT_TYPES]
    if unknown:
        raise ValidationFailed({field: f"unknown event type: {unknown[0][:40]}"})
    if not chosen:
        raise ValidationFailed({field: "choose at least one event type"})
    return [value for value in WEBHOOK_EVENT_TYPES if value in chosen]


def list_endpoints(session: Session) -> list[WebhookEndpoint]:
    return list(session.scalars(select(WebhookEndpoint).order_by(WebhookEndpoint.id)))


def get_endpoint(session: Session, endpoint_id: int | None) -> WebhookEndpoint:
    endpoint = session.get(WebhookEndpoint, endpoint_id) if endpoint_id else None
    if endpoint is None:
        raise endpoint_not_found()
    return endpoint


def last_deliveries(session: Session, endpoint_ids: list[int]) -> dict[int, WebhookDelivery]:
    """Each endpoint's newest delivery (for the list's "last delivery" column)."""
    if not endpoint_ids:
        return {}
    newest = (
        select(func.max(WebhookDelivery.id))
        .where(WebhookDelivery.endpoint_id.in_(endpoint_ids))
        .group_by(WebhookDelivery.endpoint_id)
    )
    rows = session.scalars(select(WebhookDelivery).where(WebhookDelivery.id.in_(newest)))
    return {row.endpoint_id: row for row in rows}


def create_endpoint(
    session: Session,
    settings: Mapping[str, Any],
    *,
    url: str,
    event_types: Iterable[str],
    description: str = "",
    enabled: bool = True,
    created_by_id: int | None = None,
) -> Created:
    url = check_url(settings, url)
    types = check_event_types(event_types)
    secret = signing.new_secret()
    endpoint = WebhookEndpoint(
        url=url,
        description=description,
        event_types=types,
        enabled=enabled,
        secret_encrypted=signing.encrypt_secret(settings["cmsshop.secret"], secret),
        created_by_id=created_by_id,
        created_at=utcnow(),
    )
    if not enabled:
        endpoint.disabled_at = endpoint.created_at
        endpoint.disabled_reason = "Created disabled."
    session.add(endpoint)
    session.flush()
    return Created(endpoint, secret)


def set_enabled(endpoint: WebhookEndpoint, enabled: bool, reason: str = "Disabled by an admin."):
    """Enable (a fresh start: its failure history is forgotten) or disable it."""
    if enabled == endpoint.enabled:
        return
    endpoint.enabled = enabled
    if enabled:
        endpoint.failing_since = None
        endpoint.disabled_at = None
        endpoint.disabled_reason = None
    else:
        endpoint.disabled_at = utcnow()
        endpoint.disabled_reason = reason


def update_endpoint(
    session: Session, settings: Mapping[str, Any], endpoint: WebhookEndpoint, changes: dict
) -> WebhookEndpoint:
    """Apply ``changes`` (url, description, event_types, enabled; each optional)."""
    if "url" in changes:
        endpoint.url = check_url(settings, changes["url"])
    if "event_types" in changes:
        endpoint.event_types = check_event_types(changes["event_types"])
    if "description" in changes:
        endpoint.description = changes["description"]
    if "enabled" in changes:
        set_enabled(endpoint, changes["enabled"])
    session.flush()
    return endpoint


def delete_endpoint(session: Session, endpoint: WebhookEndpoint) -> None:
    """Delete it with its deliveries and their log (the events stay for the others)."""
    session.delete(endpoint)
    session.flush()


def rotate_secret(
    session: Session,
    settings: Mapping[str, Any],
    endpoint: WebhookEndpoint,
    overlap_hours: int = DEFAULT_OVERLAP_HOURS,
) -> str:
    """A new secret (returned in clear, shown once); the current one keeps signing too
    for ``overlap_hours`` (0: it stops at once), so receivers switch at their pace."""
    if not 0 <= overlap_hours <= MAX_OVERLAP_HOURS:
        raise ValidationFailed({"overlapHours": f"between 0 and {MAX_OVERLAP_HOURS} hours"})
    secret = signing.new_secret()
    now = utcnow()
    if overlap_hours:
        endpoint.previous_secret_encrypted = endpoint.secret_encrypted
        endpoint.previous_secret_expires_at = now + dt.timedelta(hours=overlap_hours)
    else:
        endpoint.previous_secret_encrypted = None
        endpoint.previous_secret_expires_at = None
    endpoint.secret_encrypted = signing.encrypt_secret(settings["cmsshop.secret"], secret)
    session.flush()
    return secret


def send_test_event(session: Session, endpoint: WebhookEndpoint) -> WebhookEvent:
    """A webhook.test event for this endpoint only (a disabled one too: see emit_event)."""
    return emit_event(
        session,
        TEST_EVENT_TYPE,
        subject=f"endpoint:{endpoint.id}",
        data={**payloads.ping_data(), "endpointId": endpoint.id},
        endpoint_ids=[endpoint.id],
    )


def get_delivery(session: Session, endpoint: WebhookEndpoint, delivery_id: int | None):
    found = session.get(WebhookDelivery, delivery_id) if delivery_id else None
    if found is None or found.endpoint_id != endpoint.id:
        raise delivery_not_found()
    return found


class RedeliveryRefused(Exception):
    """The endpoint is disabled: enable it first."""


def redeliver(
    session: Session, settings: Mapping[str, Any], delivery_row: WebhookDelivery
) -> WebhookDelivery:
    try:
        return delivery.redeliver(session, delivery_row, retry_for=settings.get(RETRY_FOR))
    except delivery.EndpointDisabled:
        raise RedeliveryRefused() from None


def list_deliveries(
    session: Session, endpoint: WebhookEndpoint, request: PageRequest
) -> Page[WebhookDelivery]:
    query = (
        select(WebhookDelivery)
        .where(WebhookDelivery.endpoint_id == endpoint.id)
        .order_by(WebhookDelivery.id.desc())
    )
    return fetch_page(session, query, request)


def attempts_of(session: Session, delivery_ids: list[int]) -> dict[int, list[WebhookAttempt]]:
    found: dict[int, list[WebhookAttempt]] = {i: [] for i in delivery_ids}
    if not delivery_ids:
        return found
    rows = session.scalars(
        select(WebhookAttempt)
        .where(WebhookAttempt.delivery_id.in_(delivery_ids))
        .order_by(WebhookAttempt.delivery_id, WebhookAttempt.id)
    )
    for row in rows:
        found[row.delivery_id].append(row)
    return found
