"""Admin: payment settings, the provider event log, reprocess, manual fulfilment."""

from __future__ import annotations

import colander
from pyramid.view import view_config

from cmsshop import openapi as oa
from cmsshop.errors import Conflict, NotFound, ValidationFailed
from cmsshop.models import EVENT_STATUSES, PaymentEvent
from cmsshop.security import ADMIN
from cmsshop.services.payments import fulfilment
from cmsshop.services.payments import settings as ps
from cmsshop.services.payments.events import reading, reprocess
from cmsshop.services.payments.events.errors import DeliveryError
from cmsshop.services.payments.registry import PaymentProviders
from cmsshop.util import isoformat_z
from cmsshop.views.payments.webhooks import delivery_error
from cmsshop.views.shared.bodies import order_body
from cmsshop.views.shared.json import (
    StrictMapping,
    StrictString,
    page_json,
    parse_path_id,
    read_json,
    read_page_request,
    validate,
)

# --- bodies --------------------------------------------------------------------------------


def settings_body(shown: list[ps.ProviderSettings]) -> dict:
    """Every provider's settings (secrets already masked by the service) and sources."""
    return {item.name: {**item.values, "sources": item.sources} for item in shown}


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
        # Queued processing: when the worker takes it (again); null when it will not.
        "nextAttemptAt": isoformat_z(row.next_attempt_at),
    }


def event_detail(row: PaymentEvent) -> dict:
    return {
        **event_summary(row),
        "payloadSha256": row.payload_sha256,
        "payload": row.payload,
        "headers": reading.stored_headers(row),
    }


# --- settings ----------------------------------------------------------------------------


@view_config(
    route_name="payments.admin_settings", request_method="GET", renderer="json", permission=ADMIN
)
def get_settings(request):
    return settings_body(_masked(request))


@view_config(
    route_name="payments.admin_settings", request_method="PUT", renderer="json", permission=ADMIN
)
def put_settings(request):
    data = read_json(request)
    providers = request.find_service(PaymentProviders)
    try:
        update = ps.validate_update(providers, data)
    except ps.SettingsInvalid as exc:
        raise ValidationFailed(exc.errors) from None
    ps.save_settings(request.db, request.registry.settings, providers, update, request.user.id)
    return settings_body(_masked(request))


def _masked(request) -> list[ps.ProviderSettings]:
    providers = request.find_service(PaymentProviders)
    return ps.masked_settings(request.db, request.registry.settings, providers)


# --- the event log -----------------------------------------------------------------------


class EventFilterSchema(colander.MappingSchema):
    provider = colander.SchemaNode(
        colander.String(), missing=None, validator=colander.Length(max=40)
    )
    status = colander.SchemaNode(
        colander.String(), missing=None, validator=colander.OneOf(EVENT_STATUSES)
    )
    order = colander.SchemaNode(colander.String(), missing=None, validator=colander.Length(max=64))


def _event_id(request) -> int:
    event_id = parse_path_id(request.matchdict["id"])
    if event_id is None:
        raise NotFound("No payment event has this id.", code="payment_event_not_found")
    return event_id


@view_config(
    route_name="payments.admin_events", request_method="GET", renderer="json", permission=ADMIN
)
def list_events(request):
    paging = read_page_request(request)
    raw = {k: request.GET[k] for k in ("provider", "status", "order") if k in request.GET}
    filters = validate(EventFilterSchema(), raw)
    page = reading.list_events(
        request.db,
        paging,
        provider=filters["provider"],
        status=filters["status"],
        order_number=filters["order"],
    )
    return page_json(page, event_summary)


@view_config(
    route_name="payments.admin_event", request_method="GET", renderer="json", permission=ADMIN
)
def get_event(request):
    row = reading.find_event(request.db, _event_id(request))
    if row is None:
        raise NotFound("No payment event has this id.", code="payment_event_not_found")
    return event_detail(row)


@view_config(
    route_name="payments.admin_event_reprocess",
    request_method="POST",
    renderer="json",
    permission=ADMIN,
)
def reprocess_event(request):
    """Runs in transactions of its own, exactly like a fresh delivery (this request's
    session only reads), so its outcome is recorded even when the answer is an error."""
    row_id = _event_id(request)
    try:
        result = reprocess.reprocess_event(
            request.registry, request.find_service(PaymentProviders), row_id
        )
    except DeliveryError as exc:
        raise delivery_error(exc) from None
    row = reprocess.load_event(request.registry, result.event_log_id or row_id)
    return {"status": result.status, "event": event_summary(row)}


# --- manual fulfilment -------------------------------------------------------------------


class ManualFulfilSchema(colander.MappingSchema):
    schema_type = StrictMapping
    reason = colander.SchemaNode(StrictString(), validator=colander.Length(min=3, max=2000))
    paymentReference = colander.SchemaNode(  # noqa: N815 - JSON name
        StrictString(), missing=None, validator=colander.Length(min=1, max=255)
    )


def fulfilment_body(item) -> dict:
    return {
        "id": item.id,
        "provider": item.provider,
        "paymentReference": item.payment_reference,
        "manual": item.manual,
        "adminId": item.admin_id,
        "reason": item.reason,
        "paymentEventId": item.payment_event_id,
        "createdAt": isoformat_z(item.created_at),
    }


def fulfil_by_hand(request, number: str, reason: str, payment_reference: str | None):
    """Manual fulfilment with its rules and answers, for this route and the admin order
    page alike: (order, fulfilment), or the ApiError to show (422 no reason, 404, 409
    already_fulfilled naming what did it, 409 order_not_fulfillable)."""
    reason = reason.strip()
    if len(reason) < 3:
        raise ValidationFailed({"reason": "say why (at least 3 characters)"})
    try:
        return fulfilment.manual_fulfil(
            request.db,
            number,
            settings=request.registry.settings,
            admin_id=request.user.id,
            reason=reason,
            payment_reference=payment_reference,
        )
    except fulfilment.OrderMissing:
        raise NotFound("No order has this number.", code="order_not_found") from None
    except fulfilment.AlreadyFulfilled as exc:
        existing, event = exc.fulfilment, exc.event
        if event is not None:
            how = f"by {event.provider} event {event.event_id} (event log entry {event.id})"
        elif existing.manual:
            how = f"manually by admin #{existing.admin_id} ({existing.reason})"
        else:
            how = f"by payment {existing.payment_reference}"
        raise Conflict(
            f"Order {number} was already fulfilled {how} at "
            f"{isoformat_z(existing.created_at)}; nothing was created.",
            code="already_fulfilled",
            title="Already fulfilled",
            extra={
                "fulfilment": fulfilment_body(existing),
                "event": event_summary(event) if event is not None else None,
            },
        ) from None
    except fulfilment.NotFulfillable as exc:
        raise Conflict(
            f"{exc}; only pending, needs_review, failed or cancelled orders can be fulfilled.",
            code="order_not_fulfillable",
            title="Order cannot be fulfilled",
        ) from None


@view_config(
    route_name="payments.admin_order_fulfil",
    request_method="POST",
    renderer="json",
    permission=ADMIN,
)
def fulfil_order(request):
    data = read_json(request, ManualFulfilSchema())
    number = request.matchdict["number"]
    order, made = fulfil_by_hand(request, number, data["reason"], data["paymentReference"])
    invoice = fulfilment.invoice_number_of(request.db, order.id)
    return {"order": order_body(order), "fulfilment": fulfilment_body(made), "invoice": invoice}


# --- OpenAPI -------------------------------------------------------------------------------


def provider_settings_schema(provider, list_fields) -> dict:
    """The settings object of one provider (GET shows it, PUT takes a part of it)."""
    properties = {}
    for field in provider.settings_fields:
        if field in list_fields:
            properties[field] = {"type": ["array", "null"], "items": {"type": "string"}}
        else:
            properties[field] = {"type": ["string", "null"]}
    return {"type": "object", "properties": properties}


def settings_schemas(per_provider: dict) -> dict:
    shown = {}
    for name, schema in per_provider.items():
        fields = list(schema["properties"])
        shown[name] = {
            "type": "object",
            "required": [*fields, "sources"],
            "properties": {
                **schema["properties"],
                "sources": {
                    "type": "object",
                    "additionalProperties": {"enum": ["admin", "ini", "unset"]},
                },
            },
        }
        schema["additionalProperties"] = False
    return {
        "PaymentSettingsUpdate": {
            "type": "object",
            "additionalProperties": False,
            "properties": per_provider,
        },
        "PaymentSettings": {"type": "object", "properties": shown},
    }


EVENT_SUMMARY = {
    "type": "object",
    "required": [
        "id",
        "provider",
        "eventId",
        "type",
        "status",
        "attempts",
        "orderNumber",
        "receivedAt",
        "processedAt",
        "lastError",
        "nextAttemptAt",
    ],
    "properties": {
        "id": {"type": "integer"},
        "provider": {"type": "string"},
        "eventId": {"type": "string"},
        "type": {"type": "string"},
        "status": {"type": "string", "enum": list(EVENT_STATUSES)},
        "attempts": {"type": "integer"},
        "orderNumber": {"type": ["string", "null"]},
        "receivedAt": {"type": "string", "format": "date-time"},
        "processedAt": {"type": ["string", "null"], "format": "date-time"},
        "lastError": {"type": ["string", "null"]},
        "nextAttemptAt": {"type": ["string", "null"], "format": "date-time"},
    },
}
EVENT_DETAIL = {
    "type": "object",
    "required": [*EVENT_SUMMARY["required"], "payloadSha256", "payload", "headers"],
    "properties": {
        **EVENT_SUMMARY["properties"],
        "payloadSha256": {"type": "string"},
        "payload": {"type": "string"},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}
FULFILMENT = {
    "type": "object",
    "required": ["id", "provider", "paymentReference", "manual", "createdAt"],
    "properties": {
        "id": {"type": "integer"},
        "provider": {"type": "string"},
        "paymentReference": {"type": "string"},
        "manual": {"type": "boolean"},
        "adminId": {"type": ["integer", "null"]},
        "reason": {"type": ["string", "null"]},
        "paymentEventId": {"type": ["integer", "null"]},
        "createdAt": {"type": "string", "format": "date-time"},
    },
}
EVENT_ID = oa.path_param("id", {"type": "integer", "minimum": 1})

OPENAPI_PATHS = {
    "/api/admin/settings/payments": {
        "get": oa.operation(
            "Payment provider settings (secrets show their last 4 characters only)",
            {**oa.ok(oa.ref("PaymentSettings")), **oa.errors(401, 403)},
            tags=["admin", "payments"],
        ),
        "put": oa.operation(
            "Update payment provider settings (partial; null restores the ini default)",
            {**oa.ok(oa.ref("PaymentSettings")), **oa.errors(401, 403, 415, 422)},
            body=oa.ref("PaymentSettingsUpdate"),
            csrf=True,
            tags=["admin", "payments"],
        ),
    },
    "/api/admin/payment-events": {
        "get": oa.operation(
            "The provider event log, newest first",
            {**oa.ok(oa.page_of(oa.ref("PaymentEventSummary"))), **oa.errors(401, 403, 422)},
            params=[
                oa.query_param("provider", {"type": "string", "maxLength": 40}),
                oa.query_param("status", {"type": "string", "enum": list(EVENT_STATUSES)}),
                oa.query_param("order", {"type": "string", "maxLength": 64}, "Order number"),
                *oa.PAGING_PARAMS,
            ],
            tags=["admin", "payments"],
        )
    },
    "/api/admin/payment-events/{id}": {
        "get": oa.operation(
            "One logged event with its payload and delivery headers",
            {**oa.ok(oa.ref("PaymentEventDetail")), **oa.errors(401, 403, 404)},
            params=[EVENT_ID],
            tags=["admin", "payments"],
        )
    },
    "/api/admin/payment-events/{id}/reprocess": {
        "post": oa.operation(
            "Process a failed event again from its stored payload (a rejected one is "
            "re-verified with the current secrets first)",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["status", "event"],
                        "properties": {
                            "status": {
                                "type": "string",
                                "enum": ["processed", "duplicate", "ignored", "needs_review"],
                            },
                            "event": oa.ref("PaymentEventSummary"),
                        },
                    }
                ),
                **oa.errors(401, 403, 404, 409, 503),
            },
            params=[EVENT_ID],
            csrf=True,
            tags=["admin", "payments"],
        )
    },
    "/api/admin/orders/{number}/fulfil": {
        "post": oa.operation(
            "Fulfil an order by hand (409 already_fulfilled names the event that did it)",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["order", "fulfilment", "invoice"],
                        "properties": {
                            "order": oa.ref("CheckoutOrder"),
                            "fulfilment": oa.ref("PaymentFulfilment"),
                            "invoice": {"type": ["string", "null"]},
                        },
                    }
                ),
                **oa.errors(401, 403, 404, 409, 415, 422),
            },
            body={
                "type": "object",
                "required": ["reason"],
                "additionalProperties": False,
                "properties": {
                    "reason": {"type": "string", "minLength": 3, "maxLength": 2000},
                    "paymentReference": {"type": "string", "minLength": 1, "maxLength": 255},
                },
            },
            params=[oa.path_param("number")],
            csrf=True,
            tags=["admin", "payments"],
        )
    },
}


OPENAPI_SCHEMAS = {
    "PaymentEventSummary": EVENT_SUMMARY,
    "PaymentEventDetail": EVENT_DETAIL,
    "PaymentFulfilment": FULFILMENT,
    **settings_schemas({}),
}
