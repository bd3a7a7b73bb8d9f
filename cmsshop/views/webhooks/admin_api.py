"""Webhook endpoints as JSON (admin): list, create (the signing secret is in that answer
and in a rotation's, nowhere else), show, change, delete, rotate the secret, send a test
event, the delivery log and redelivering one delivery."""

from __future__ import annotations

import colander
from pyramid.view import view_config

from cmsshop.errors import Conflict
from cmsshop.models import WEBHOOK_EVENT_TYPES
from cmsshop.security import ADMIN
from cmsshop.services.webhooks import endpoints
from cmsshop.util import isoformat_z
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.json import (
    StrictMapping,
    StrictSequence,
    StrictString,
    page_json,
    parse_path_id,
    read_json,
    read_page_request,
)
from cmsshop.views.shared.schema import bool_node, int_node, optional, text_node

MAX_URL = 2048
MAX_DESCRIPTION = 500


class EventTypesSchema(colander.SequenceSchema):
    schema_type = StrictSequence
    validator = colander.Length(
        min=1, max=len(WEBHOOK_EVENT_TYPES), min_err="choose at least one event type"
    )
    event_type = colander.SchemaNode(StrictString(), validator=colander.OneOf(WEBHOOK_EVENT_TYPES))


class EndpointSchema(colander.MappingSchema):
    schema_type = StrictMapping
    url = text_node(MAX_URL, min_length=1)
    description = text_node(MAX_DESCRIPTION, missing="")
    eventTypes = EventTypesSchema()  # noqa: N815 - JSON name
    enabled = bool_node(missing=True)


class RotateSchema(colander.MappingSchema):
    schema_type = StrictMapping
    overlapHours = int_node(  # noqa: N815 - JSON name
        0, endpoints.MAX_OVERLAP_HOURS, missing=endpoints.DEFAULT_OVERLAP_HOURS
    )


class EmptySchema(colander.MappingSchema):
    schema_type = StrictMapping


def endpoint_body(request, endpoint, last=None) -> dict:
    return {
        "id": endpoint.id,
        "url": endpoint.url,
        "description": endpoint.description,
        "eventTypes": list(endpoint.event_types or []),
        "enabled": endpoint.enabled,
        "secretHint": endpoints.secret_hint(request.registry.settings, endpoint),
        "previousSecretExpiresAt": isoformat_z(endpoint.previous_secret_expires_at),
        "createdAt": isoformat_z(endpoint.created_at),
        "failingSince": isoformat_z(endpoint.failing_since),
        "disabledAt": isoformat_z(endpoint.disabled_at),
        "disabledReason": endpoint.disabled_reason,
        "lastDelivery": delivery_summary(last) if last is not None else None,
    }


def delivery_summary(delivery) -> dict:
    return {
        "id": delivery.id,
        "eventId": delivery.event.public_id,
        "eventType": delivery.event.type,
        "status": delivery.status,
        "attempts": delivery.attempts,
        "lastStatusCode": delivery.last_status_code,
        "lastAttemptAt": isoformat_z(delivery.last_attempt_at),
        "nextAttemptAt": isoformat_z(
            delivery.next_attempt_at if delivery.status == "pending" else None
        ),
        "deliveredAt": isoformat_z(delivery.delivered_at),
        "createdAt": isoformat_z(delivery.created_at),
    }


def attempt_body(attempt) -> dict:
    return {
        "startedAt": isoformat_z(attempt.started_at),
        "outcome": attempt.outcome,
        "statusCode": attempt.status_code,
        "latencyMs": attempt.latency_ms,
        "responseExcerpt": attempt.response_excerpt,
        "error": attempt.error,
        "manual": attempt.manual,
    }


def secret_answer(request) -> None:
    """An answer holding a secret: no cache of any kind keeps it."""
    request.response.cache_control = "private, no-store"


def path_endpoint(request):
    endpoint_id = parse_path_id(request.matchdict["id"])
    return endpoints.get_endpoint(request.db, endpoint_id)


def _changes(data: dict) -> dict:
    names = {"url": "url", "description": "description", "eventTypes": "event_types"}
    changes = {names[key]: value for key, value in data.items() if key in names}
    if "enabled" in data:
        changes["enabled"] = data["enabled"]
    return changes


@view_config(route_name="webhooks.admin_endpoints", request_method="GET", renderer="json",
             permission=ADMIN)  # fmt: skip
def list_endpoints(request):
    no_store(request)
    found = endpoints.list_endpoints(request.db)
    last = endpoints.last_deliveries(request.db, [endpoint.id for endpoint in found])
    return {"items": [endpoint_body(request, e, last.get(e.id)) for e in found]}


@view_config(route_name="webhooks.admin_endpoints", request_method="POST", renderer="json",
             permission=ADMIN)  # fmt: skip
def create_endpoint(request):
    secret_answer(request)
    data = read_json(request, EndpointSchema())
    created = endpoints.create_endpoint(
        request.db,
        request.registry.settings,
        url=data["url"],
        event_types=data["eventTypes"],
        description=data["description"],
        enabled=data["enabled"],
        created_by_id=request.user.id if request.user else None,
    )
    request.response.status = 201
    return {**endpoint_body(request, created.endpoint), "secret": created.secret}


@view_config(route_name="webhooks.admin_endpoint", request_method="GET", renderer="json",
             permission=ADMIN)  # fmt: skip
def show_endpoint(request):
    no_store(request)
    endpoint = path_endpoint(request)
    last = endpoints.last_deliveries(request.db, [endpoint.id])
    return endpoint_body(request, endpoint, last.get(endpoint.id))


@view_config(route_name="webhooks.admin_endpoint", request_method="PATCH", renderer="json",
             permission=ADMIN)  # fmt: skip
def change_endpoint(request):
    no_store(request)
    endpoint = path_endpoint(request)
    data = read_json(request, optional(EndpointSchema()))
    endpoints.update_endpoint(request.db, request.registry.settings, endpoint, _changes(data))
    return endpoint_body(request, endpoint)


@view_config(route_name="webhooks.admin_endpoint", request_method="DELETE", renderer="json",
             permission=ADMIN)  # fmt: skip
def delete_endpoint(request):
    no_store(request)
    endpoint = path_endpoint(request)
    endpoint_id = endpoint.id
    endpoints.delete_endpoint(request.db, endpoint)
    return {"id": endpoint_id, "deleted": True}


@view_config(route_name="webhooks.admin_rotate", request_method="POST", renderer="json",
             permission=ADMIN)  # fmt: skip
def rotate_secret(request):
    secret_answer(request)
    endpoint = path_endpoint(request)
    data = read_json(request, RotateSchema()) if request.body else RotateSchema().deserialize({})
    secret = endpoints.rotate_secret(
        request.db, request.registry.settings, endpoint, data["overlapHours"]
    )
    return {**endpoint_body(request, endpoint), "secret": secret}


@view_config(route_name="webhooks.admin_test", request_method="POST", renderer="json",
             permission=ADMIN)  # fmt: skip
def send_test_event(request):
    no_store(request)
    endpoint = path_endpoint(request)
    if request.body:
        read_json(request, EmptySchema())
    event = endpoints.send_test_event(request.db, endpoint)
    request.response.status = 202
    return {"eventId": event.public_id, "eventType": event.type}


@view_config(route_name="webhooks.admin_deliveries", request_method="GET", renderer="json",
             permission=ADMIN)  # fmt: skip
def list_deliveries(request):
    no_store(request)
    endpoint = path_endpoint(request)
    page = endpoints.list_deliveries(request.db, endpoint, read_page_request(request))
    attempts = endpoints.attempts_of(request.db, [row.id for row in page.items])

    def serialise(row) -> dict:
        return {
            **delivery_summary(row),
            "attemptLog": [attempt_body(attempt) for attempt in attempts[row.id]],
        }

    return page_json(page, serialise)


@view_config(route_name="webhooks.admin_redeliver", request_method="POST", renderer="json",
             permission=ADMIN)  # fmt: skip
def redeliver(request):
    no_store(request)
    endpoint = path_endpoint(request)
    row = endpoints.get_delivery(
        request.db, endpoint, parse_path_id(request.matchdict["delivery_id"])
    )
    if request.body:
        read_json(request, EmptySchema())
    try:
        endpoints.redeliver(request.db, request.registry.settings, row)
    except endpoints.RedeliveryRefused:
        raise Conflict(
            "The endpoint is disabled: its deliveries are not attempted.",
            hints=['Enable it with PATCH /api/admin/webhooks/{id} {"enabled": true}.'],
        ) from None
    request.response.status = 202
    return delivery_summary(row)
