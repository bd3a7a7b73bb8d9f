"""Admin: payment settings, the provider event log, reprocess, manual fulfilment."""

from __future__ import annotations

import colander
from pyramid.view import view_config

from cmsshop.errors import Conflict, NotFound, ValidationFailed
from cmsshop.models import EVENT_STATUSES, PaymentEvent
from cmsshop.security import ADMIN
from cmsshop.services.payments import connect, fulfilment
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


@view_config(
    route_name="payments.admin_settings_test",
    request_method="POST",
    renderer="json",
    permission=ADMIN,
)
def test_connection(request):
    """Test connection with the saved credentials: 200 whatever the provider answered."""
    providers = request.find_service(PaymentProviders)
    spec = providers.get(request.matchdict["provider"])
    if spec is None:
        raise NotFound("No payment provider has this name.")
    config = ps.provider_config(request.registry, spec, request.db)
    return connection_body(connect.check_connection(spec.name, config))


def connection_body(check: connect.ConnectionCheck) -> dict:
    return {
        "provider": check.provider,
        "ok": check.ok,
        "kind": check.kind,
        "message": check.message,
        "mode": check.mode,
        "account": check.account,
    }


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
