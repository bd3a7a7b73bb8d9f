"""Admin JSON API of refunds: GET/POST /api/admin/orders/{number}/refunds
(services/payments/refunds.py does the work; the console's refund pages share the
error mapping below)."""

from __future__ import annotations

import colander
from pyramid.view import view_config

from cmsshop.errors import ApiError, NotFound, ValidationFailed
from cmsshop.security import ADMIN
from cmsshop.services.payments import refunds
from cmsshop.services.payments.registry import PaymentProviders
from cmsshop.util import isoformat_z
from cmsshop.views.shared.json import (
    StrictBool,
    StrictInt,
    StrictMapping,
    StrictSequence,
    StrictString,
    is_storable_text,
    read_json,
)

MAX_KEY = 255


def providers_of(request):
    """The registered payment providers (None when no payment module is on)."""
    try:
        return request.find_service(PaymentProviders)
    except LookupError:
        return None


def refund_body(view: refunds.RefundView) -> dict:
    return {
        "id": view.id,
        "orderNumber": view.order_number,
        "amount": view.amount,
        "currency": view.currency,
        "lines": view.lines,
        "reason": view.reason,
        "status": view.status,
        "provider": view.provider,
        "providerRefundId": view.provider_refund_id,
        "requestedBy": view.requested_by,
        "createdAt": isoformat_z(view.created_at),
        "confirmedAt": isoformat_z(view.confirmed_at),
        "error": view.error,
        "full": view.full,
        "subscription": subscription_body(view.subscription),
    }


def subscription_body(after) -> dict | None:
    """What a full refund did to the subscription it ends (None: it ends none)."""
    if after is None:
        return None
    return {
        "id": after.subscription_id,
        "providerSubscriptionId": after.provider_subscription_id,
        "status": after.status,
        "cancelled": after.cancelled,
        "kept": after.kept,
        "error": after.error,
    }


def refund_error(exc: Exception) -> ApiError:
    """A refusal of the refund service as the API's error (and the pages')."""
    if isinstance(exc, refunds.OrderMissing):
        return NotFound("No order has this number.", code="order_not_found")
    if isinstance(exc, refunds.RefundInvalid):
        if exc.code == "validation_failed":
            return ValidationFailed(exc.errors, exc.message)
        return ApiError(exc.message, code=exc.code, extra={"errors": exc.errors})
    if isinstance(exc, refunds.RefundFailed):
        if exc.kind == "refused":
            message = (
                f"{exc.refund.provider} refused the refund: {exc.message}. Nothing was "
                "refunded and nothing changed; you can try again."
            )
            code = "refund_refused"
        else:
            message = (
                f"{exc.refund.provider} could not be reached: {exc.message}. Nothing was "
                "refunded and nothing changed; try again shortly."
            )
            code = "refund_provider_unavailable"
        return ApiError(message, code=code, extra={"refund": refund_body(exc.refund)})
    raise exc


class RefundLineSchema(colander.MappingSchema):
    schema_type = StrictMapping
    item = colander.SchemaNode(StrictInt(), validator=colander.Range(1, 2**31 - 1))
    amount = colander.SchemaNode(StrictInt(), missing=None, validator=colander.Range(1, 10**15))


class RefundLinesSchema(colander.SequenceSchema):
    schema_type = StrictSequence
    line = RefundLineSchema()


class RefundRequestSchema(colander.MappingSchema):
    schema_type = StrictMapping
    full = colander.SchemaNode(StrictBool(), missing=False)
    amount = colander.SchemaNode(StrictInt(), missing=None)
    lines = RefundLinesSchema(missing=None, validator=colander.Length(min=1, max=100))
    reason = colander.SchemaNode(
        StrictString(), missing="", validator=colander.Length(max=refunds.MAX_REASON)
    )
    idempotencyKey = colander.SchemaNode(  # noqa: N815 - JSON name
        StrictString(), missing=None, validator=colander.Length(min=1, max=MAX_KEY)
    )
    # A full refund of an order that bought a subscription (or paid its latest period)
    # cancels it at the provider; false keeps it running.
    cancelSubscription = colander.SchemaNode(StrictBool(), missing=True)  # noqa: N815


def situation_body(situation: refunds.Refundable, views: list[refunds.RefundView]) -> dict:
    order = situation.order
    return {
        "orderNumber": order.number,
        "orderStatus": order.status,
        "currency": order.currency,
        "total": order.total,
        "refundable": situation.refundable,
        "notRefundableBecause": situation.why_not or None,
        "remaining": situation.remaining,
        "lines": [
            {
                "item": item.id,
                "name": item.name,
                "amount": item.gross,
                "remaining": max(situation.line_remaining.get(item.id, 0), 0),
            }
            for item in order.items
        ],
        "refunds": [refund_body(view) for view in views],
    }


@view_config(
    route_name="payments.admin_order_refunds",
    request_method="GET",
    renderer="json",
    permission=ADMIN,
)
def list_refunds(request):
    number = request.matchdict["number"]
    try:
        situation = refunds.refund_situation(request.db, number, providers_of(request))
    except refunds.OrderMissing as exc:
        raise refund_error(exc) from None
    views = [refunds.refund_view(request.db, number, row.id) for row in situation.refunds]
    return situation_body(situation, [v for v in views if v is not None])


@view_config(
    route_name="payments.admin_order_refunds",
    request_method="POST",
    renderer="json",
    permission=ADMIN,
)
def create_refund(request):
    """201 with the refund (``pending`` or ``succeeded`` at the provider), 200 with the
    same refund for a key seen before (the provider is not called again)."""
    data = read_json(request, RefundRequestSchema())
    number = request.matchdict["number"]
    key = request.headers.get("Idempotency-Key") or data["idempotencyKey"]
    if not key or len(key) > MAX_KEY or not is_storable_text(key):
        raise ValidationFailed(
            {"idempotencyKey": "send an Idempotency-Key header (1 to 255 characters)"}
        )
    lines = None
    if data["lines"] is not None:
        lines = {}
        for line in data["lines"]:
            if line["item"] in lines:
                raise ValidationFailed({"lines": f"item {line['item']} is named twice"})
            lines[line["item"]] = line["amount"]
    try:
        view, created = refunds.request_refund(
            request.registry,
            providers_of(request),
            number,
            token=f"api:{key}",
            reason=data["reason"],
            admin_id=request.user.id,
            full=data["full"],
            amount=data["amount"],
            lines=lines,
            cancel_subscription=data["cancelSubscription"],
        )
    except (refunds.OrderMissing, refunds.RefundInvalid, refunds.RefundFailed) as exc:
        raise refund_error(exc) from None
    request.response.status = 201 if created else 200
    return {"refund": refund_body(view), "created": created}
