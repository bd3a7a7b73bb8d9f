"""The OpenAPI part of the payments module: the payment admin area (``OPENAPI_*``, with the
settings schema of every registered provider) and each provider's webhook route
(``webhook_paths``, ``WEBHOOK_SCHEMAS``)."""

from __future__ import annotations

from cmsshop import openapi as oa
from cmsshop.models import EVENT_STATUSES, REFUND_STATUSES, SUBSCRIPTION_STATUSES
from cmsshop.views.payments.webhooks import STATUSES

# --- the payment admin area ------------------------------------------------------------


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

# Test connection (POST /api/admin/settings/payments/{provider}/test).
CONNECTION_CHECK = {
    "type": "object",
    "required": ["provider", "ok", "kind", "message", "mode", "account"],
    "properties": {
        "provider": {"type": "string"},
        "ok": {"type": "boolean"},
        "kind": {
            "enum": [
                "ok",
                "not_configured",
                "bad_credentials",
                "refused",
                "timeout",
                "unreachable",
                "unsupported",
            ]
        },
        "message": {"type": "string", "description": "What the provider said, for the seller"},
        "mode": {
            "type": ["string", "null"],
            "description": "Stripe: live/test (from the key); PayPal: live/sandbox/other",
        },
        "account": {
            "type": ["object", "null"],
            "description": "Stripe: id, name, country; PayPal: appId",
            "additionalProperties": {"type": "string"},
        },
    },
}

REFUND_LINES = {
    "type": ["array", "null"],
    "items": {
        "type": "object",
        "required": ["item", "amount"],
        "properties": {"item": {"type": "integer"}, "amount": {"type": "integer"}},
    },
}
REFUND = {
    "type": "object",
    "required": ["id", "orderNumber", "amount", "currency", "status", "provider", "full"],
    "properties": {
        "id": {"type": "integer"},
        "orderNumber": {"type": "string"},
        "amount": {"type": "integer", "minimum": 1, "description": "minor units"},
        "currency": {"type": "string"},
        "lines": REFUND_LINES,
        "reason": {"type": "string"},
        "status": {"type": "string", "enum": list(REFUND_STATUSES)},
        "provider": {"type": "string"},
        "providerRefundId": {"type": ["string", "null"]},
        "requestedBy": {
            "type": ["integer", "null"],
            "description": "the admin; null for a refund made at the provider",
        },
        "createdAt": {"type": "string", "format": "date-time"},
        "confirmedAt": {"type": ["string", "null"], "format": "date-time"},
        "error": {"type": ["string", "null"]},
        "full": {
            "type": "boolean",
            "description": "refunds what was left: downloads and licenses are revoked when "
            "the provider confirms; a partial refund holds licenses for review",
        },
        "subscription": {
            "oneOf": [
                {
                    "type": "object",
                    "required": [
                        "id",
                        "providerSubscriptionId",
                        "status",
                        "cancelled",
                        "kept",
                        "error",
                    ],
                    "properties": {
                        "id": {"type": "integer"},
                        "providerSubscriptionId": {"type": "string"},
                        "status": {"type": "string", "enum": list(SUBSCRIPTION_STATUSES)},
                        "cancelled": {
                            "type": "boolean",
                            "description": "ended at the provider: nothing more is charged",
                        },
                        "kept": {
                            "type": "boolean",
                            "description": "the refund asked to keep it running "
                            "(cancelSubscription false)",
                        },
                        "error": {
                            "type": ["string", "null"],
                            "description": "why the provider could not cancel it: the refund "
                            "stands; the reconciliation (or this request sent again) cancels it",
                        },
                    },
                },
                {"type": "null"},
            ],
            "description": "the subscription a full refund of this order ends (it bought "
            "it, or paid its latest period): cancelled at the provider unless kept; null "
            "when the refund ends none",
        },
    },
}
REFUND_SITUATION = {
    "type": "object",
    "required": ["orderNumber", "refundable", "remaining", "lines", "refunds"],
    "properties": {
        "orderNumber": {"type": "string"},
        "orderStatus": {"type": "string"},
        "currency": {"type": "string"},
        "total": {"type": "integer"},
        "refundable": {"type": "boolean"},
        "notRefundableBecause": {"type": ["string", "null"]},
        "remaining": {"type": "integer", "description": "what is left to refund"},
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "item": {"type": "integer"},
                    "name": {"type": "string"},
                    "amount": {
                        "type": "integer",
                        "description": "What the line cost, tax included (minor units)",
                    },
                    "remaining": {"type": "integer"},
                },
            },
        },
        "refunds": {"type": "array", "items": oa.ref("PaymentRefund")},
    },
}

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
    "/api/admin/settings/payments/{provider}/test": {
        "post": oa.operation(
            "Test connection: one authenticated call to the provider with the saved "
            "credentials; 200 whatever the provider answered (ok says whether it worked)",
            {**oa.ok(oa.ref("PaymentConnectionCheck")), **oa.errors(401, 403, 404)},
            params=[oa.path_param("provider", {"type": "string", "maxLength": 40})],
            csrf=True,
            tags=["admin", "payments"],
        )
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
    "/api/admin/orders/{number}/refunds": {
        "get": oa.operation(
            "The order's refunds and what is left to refund",
            {**oa.ok(oa.ref("PaymentRefundSituation")), **oa.errors(401, 403, 404)},
            params=[oa.path_param("number")],
            tags=["admin", "payments"],
        ),
        "post": oa.operation(
            "Refund an order at its provider: full, an amount, or lines (201 new; 200 the "
            "refund an Idempotency-Key already made, the provider not called again). "
            "Downloads and licenses change when the provider's refund event arrives.",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["refund", "created"],
                        "properties": {
                            "refund": oa.ref("PaymentRefund"),
                            "created": {"type": "boolean"},
                        },
                    },
                    "Created",
                    201,
                ),
                **oa.errors(401, 403, 404, 409, 415, 422, 502, 503),
            },
            body={
                "type": "object",
                "additionalProperties": False,
                "description": "exactly one of full, amount, lines",
                "properties": {
                    "full": {"type": "boolean"},
                    "amount": {"type": "integer", "minimum": 1, "description": "minor units"},
                    "lines": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["item"],
                            "additionalProperties": False,
                            "properties": {
                                "item": {"type": "integer", "description": "order item id"},
                                "amount": {
                                    "type": "integer",
                                    "minimum": 1,
                                    "description": "part of the line (default: what is left)",
                                },
                            },
                        },
                    },
                    "reason": {"type": "string", "maxLength": 2000},
                    "idempotencyKey": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 255,
                        "description": "instead of the Idempotency-Key header",
                    },
                    "cancelSubscription": {
                        "type": "boolean",
                        "default": True,
                        "description": "a full refund of an order that bought a subscription, "
                        "or paid its latest period, cancels it at the provider at once (no "
                        "further charge); false keeps it running",
                    },
                },
            },
            params=[
                oa.path_param("number"),
                {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string", "minLength": 1, "maxLength": 255},
                    "description": "the same key again answers the same refund (required "
                    "here or as idempotencyKey)",
                },
            ],
            csrf=True,
            tags=["admin", "payments"],
        ),
    },
}


OPENAPI_SCHEMAS = {
    "PaymentEventSummary": EVENT_SUMMARY,
    "PaymentEventDetail": EVENT_DETAIL,
    "PaymentFulfilment": FULFILMENT,
    "PaymentConnectionCheck": CONNECTION_CHECK,
    "PaymentRefund": REFUND,
    "PaymentRefundSituation": REFUND_SITUATION,
    **settings_schemas({}),
}


# --- webhooks ------------------------------------------------------------------------------

WEBHOOK_ACK = {
    "type": "object",
    "required": ["received", "status"],
    "properties": {
        "received": {"const": True},
        "status": {"type": "string", "enum": STATUSES},
    },
}


def webhook_paths(name: str) -> dict:
    return {
        f"/api/webhooks/{name}": {
            "post": oa.operation(
                f"Deliver a {name} event (signed by the provider; no session, no CSRF)",
                {
                    **oa.ok(oa.ref("WebhookAck"), "Handled, a duplicate, or ignored"),
                    **oa.errors(400, 409, 422, 429, 503),
                },
                body={"type": "object"},
                body_required=False,
                tags=["webhooks"],
            )
        }
    }


WEBHOOK_SCHEMAS = {"WebhookAck": WEBHOOK_ACK}
