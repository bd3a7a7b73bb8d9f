"""The OpenAPI part of the webhooks module: the admin routes of the endpoints, and the
events the shop sends (the document's ``webhooks``)."""

from __future__ import annotations

from cmsshop import openapi as oa
from cmsshop.models import DELIVERY_STATUSES, TEST_EVENT_TYPE, WEBHOOK_EVENT_TYPES
from cmsshop.services.webhooks.endpoints import DEFAULT_OVERLAP_HOURS, MAX_OVERLAP_HOURS
from cmsshop.views.shared.schema import DATE_TIME, ID_PARAM, body_schema, text_schema
from cmsshop.views.webhooks.admin_api import MAX_DESCRIPTION, MAX_URL

NULLABLE_TIME = {"type": ["string", "null"], "format": "date-time"}
TAGS = ["admin", "webhooks"]
EVENT_TYPES = {
    "type": "array",
    "minItems": 1,
    "uniqueItems": True,
    "items": {"enum": list(WEBHOOK_EVENT_TYPES)},
}
DELIVERY_FIELDS = {
    "id": {"type": "integer"},
    "eventId": {"type": "string", "description": "The id receivers see (evt_...)"},
    "eventType": {"type": "string"},
    "status": {"enum": list(DELIVERY_STATUSES)},
    "attempts": {"type": "integer"},
    "lastStatusCode": {"type": ["integer", "null"]},
    "lastAttemptAt": NULLABLE_TIME,
    "nextAttemptAt": {**NULLABLE_TIME, "description": "Null unless pending"},
    "deliveredAt": NULLABLE_TIME,
    "createdAt": DATE_TIME,
}
DELIVERY = {"type": "object", "required": list(DELIVERY_FIELDS), "properties": DELIVERY_FIELDS}
ATTEMPT_FIELDS = {
    "startedAt": DATE_TIME,
    "outcome": {"type": "string"},
    "statusCode": {"type": ["integer", "null"]},
    "latencyMs": {"type": "integer"},
    "responseExcerpt": {"type": "string"},
    "error": {"type": ["string", "null"]},
    "manual": {"type": "boolean", "description": "A redelivery asked for"},
}
DELIVERY_WITH_LOG = {
    "allOf": [
        oa.ref("WebhookDelivery"),
        {
            "type": "object",
            "required": ["attemptLog"],
            "properties": {
                "attemptLog": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": list(ATTEMPT_FIELDS),
                        "properties": ATTEMPT_FIELDS,
                    },
                }
            },
        },
    ]
}
ENDPOINT_FIELDS = {
    "id": {"type": "integer"},
    "url": {"type": "string"},
    "description": {"type": "string"},
    "eventTypes": EVENT_TYPES,
    "enabled": {"type": "boolean"},
    "secretHint": {"type": "string", "description": "The secret masked: whsec_…last 4"},
    "previousSecretExpiresAt": {
        **NULLABLE_TIME,
        "description": "Until then the previous secret signs too (a rotation's overlap)",
    },
    "createdAt": DATE_TIME,
    "failingSince": NULLABLE_TIME,
    "disabledAt": NULLABLE_TIME,
    "disabledReason": {"type": ["string", "null"]},
    "lastDelivery": {"oneOf": [oa.ref("WebhookDelivery"), {"type": "null"}]},
}
ENDPOINT = {"type": "object", "required": list(ENDPOINT_FIELDS), "properties": ENDPOINT_FIELDS}
WITH_SECRET = {
    "allOf": [
        oa.ref("WebhookEndpoint"),
        {
            "type": "object",
            "required": ["secret"],
            "properties": {
                "secret": {
                    "type": "string",
                    "description": "The signing secret, in this answer only: store it now",
                }
            },
        },
    ]
}
ENDPOINT_BODY = {
    "url": {**text_schema(MAX_URL, min_length=1), "format": "uri"},
    "description": text_schema(MAX_DESCRIPTION),
    "eventTypes": EVENT_TYPES,
    "enabled": {"type": "boolean", "default": True},
}
DELIVERY_PARAM = oa.path_param(
    "delivery_id", {"type": "integer", "minimum": 1, "maximum": 2**31 - 1}
)
EMPTY_BODY = {"type": "object", "additionalProperties": False, "properties": {}}

ADMIN_PATHS = {
    "/api/admin/webhooks": {
        "get": oa.operation(
            "The webhook endpoints, each with its last delivery (admin)",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["items"],
                        "properties": {
                            "items": {"type": "array", "items": oa.ref("WebhookEndpoint")}
                        },
                    }
                ),
                **oa.errors(401, 403),
            },
            tags=TAGS,
        ),
        "post": oa.operation(
            "Create a webhook endpoint (admin); the answer holds its signing secret, shown "
            "this once. In production the URL must be https on a public address (422 "
            "otherwise)",
            {**oa.ok(WITH_SECRET, "Created", 201), **oa.errors(401, 403, 415, 422)},
            body=body_schema(ENDPOINT_BODY, ["url", "eventTypes"]),
            tags=TAGS,
        ),
    },
    "/api/admin/webhooks/{id}": {
        "get": oa.operation(
            "One webhook endpoint (admin); 404 webhook_endpoint_not_found",
            {**oa.ok(oa.ref("WebhookEndpoint")), **oa.errors(401, 403, 404)},
            params=[ID_PARAM],
            tags=TAGS,
        ),
        "patch": oa.operation(
            "Change a webhook endpoint (admin): any of its fields; enabling it again "
            "forgets its failures",
            {**oa.ok(oa.ref("WebhookEndpoint")), **oa.errors(401, 403, 404, 415, 422)},
            params=[ID_PARAM],
            body=body_schema(ENDPOINT_BODY, []),
            tags=TAGS,
        ),
        "delete": oa.operation(
            "Delete a webhook endpoint with its delivery log (admin)",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["id", "deleted"],
                        "properties": {"id": {"type": "integer"}, "deleted": {"const": True}},
                    }
                ),
                **oa.errors(401, 403, 404),
            },
            params=[ID_PARAM],
            tags=TAGS,
        ),
    },
    "/api/admin/webhooks/{id}/rotate-secret": {
        "post": oa.operation(
            "A new signing secret, in this answer only (admin); the previous one keeps "
            f"signing for overlapHours (default {DEFAULT_OVERLAP_HOURS}, at most "
            f"{MAX_OVERLAP_HOURS}; 0: it stops at once)",
            {**oa.ok(WITH_SECRET), **oa.errors(401, 403, 404, 415, 422)},
            params=[ID_PARAM],
            body=body_schema(
                {
                    "overlapHours": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": MAX_OVERLAP_HOURS,
                        "default": DEFAULT_OVERLAP_HOURS,
                    }
                },
                [],
            ),
            body_required=False,
            tags=TAGS,
        )
    },
    "/api/admin/webhooks/{id}/test": {
        "post": oa.operation(
            "Send a webhook.test event to this endpoint only, enabled or not (admin)",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["eventId", "eventType"],
                        "properties": {
                            "eventId": {"type": "string"},
                            "eventType": {"const": "webhook.test"},
                        },
                    },
                    "Queued",
                    202,
                ),
                **oa.errors(401, 403, 404, 415, 422),
            },
            params=[ID_PARAM],
            body=EMPTY_BODY,
            body_required=False,
            tags=TAGS,
        )
    },
    "/api/admin/webhooks/{id}/deliveries": {
        "get": oa.operation(
            "The endpoint's deliveries, newest first, each with its attempts (admin)",
            {
                **oa.ok(oa.page_of(DELIVERY_WITH_LOG)),
                **oa.errors(401, 403, 404, 422),
            },
            params=[ID_PARAM, *oa.PAGING_PARAMS],
            tags=TAGS,
        )
    },
    "/api/admin/webhooks/{id}/deliveries/{delivery_id}/redeliver": {
        "post": oa.operation(
            "Send one delivery's event again, due now, with a fresh retry window (admin); "
            "404 webhook_delivery_not_found; 409 when the endpoint is disabled",
            {
                **oa.ok(oa.ref("WebhookDelivery"), "Queued", 202),
                **oa.errors(401, 403, 404, 409, 415, 422),
            },
            params=[ID_PARAM, DELIVERY_PARAM],
            body=EMPTY_BODY,
            body_required=False,
            tags=TAGS,
        )
    },
}
ADMIN_SCHEMAS = {"WebhookEndpoint": ENDPOINT, "WebhookDelivery": DELIVERY}

# --- the outgoing events, as OpenAPI 3.1 "webhooks": what the shop POSTs to endpoints ----

STRING = {"type": "string"}
NULLABLE_STRING = {"type": ["string", "null"]}
INTEGER = {"type": "integer"}
ORDER_DATA_FIELDS = {
    "orderNumber": STRING,
    "status": STRING,
    "customerEmail": NULLABLE_STRING,
    "currency": STRING,
    "total": {**INTEGER, "description": "Minor units of currency"},
    "tax": INTEGER,
    "discount": INTEGER,
    "couponCode": NULLABLE_STRING,
    "paidAt": NULLABLE_TIME,
    "items": {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["productSlug", "name", "kind", "quantity", "amount"],
            "properties": {
                "productSlug": STRING,
                "name": STRING,
                "kind": STRING,
                "quantity": INTEGER,
                "amount": INTEGER,
            },
        },
    },
}
LICENSE_DATA_FIELDS = {
    "licenseId": INTEGER,
    "licenseKey": STRING,
    "productSlug": STRING,
    "status": STRING,
    "expiresAt": NULLABLE_TIME,
    "seats": INTEGER,
    "features": {"type": "array", "items": STRING},
    "customerEmail": NULLABLE_STRING,
    "orderNumber": NULLABLE_STRING,
}
ACTIVATION_DATA_FIELDS = {
    "activationId": INTEGER,
    "licenseId": INTEGER,
    "licenseKey": STRING,
    "fingerprint": STRING,
    "domain": STRING,
    "environment": {"enum": ["production", "staging", "local"]},
    "active": {"type": "boolean"},
    "activatedAt": NULLABLE_TIME,
    "deactivatedAt": NULLABLE_TIME,
}
TICKET_DATA_FIELDS = {
    "ticketId": INTEGER,
    "ticketNumber": STRING,
    "subject": STRING,
    "status": STRING,
    "customerEmail": NULLABLE_STRING,
    "orderNumber": NULLABLE_STRING,
    "createdAt": DATE_TIME,
}


def data_schema(fields: dict, **extra: dict) -> dict:
    return {
        "type": "object",
        "required": list(fields),
        "properties": {**fields, **extra},
    }


ORDER_REFUNDED = data_schema(
    ORDER_DATA_FIELDS, reason={"enum": ["refund", "chargeback"], "description": "Why"}
)
EVENT_DATA = {
    "order.paid": ("An order was paid and fulfilled.", data_schema(ORDER_DATA_FIELDS)),
    "order.refunded": ("An order was refunded in full or lost a chargeback.", ORDER_REFUNDED),
    "license.created": ("A licence was issued.", data_schema(LICENSE_DATA_FIELDS)),
    "license.revoked": ("A licence was revoked.", data_schema(LICENSE_DATA_FIELDS)),
    "license.renewed": ("A renewal extended a licence.", data_schema(LICENSE_DATA_FIELDS)),
    "license.upgraded": ("An upgrade changed a licence.", data_schema(LICENSE_DATA_FIELDS)),
    "activation.created": (
        "An installation took a seat.",
        data_schema(ACTIVATION_DATA_FIELDS),
    ),
    "activation.deleted": (
        "An installation gave its seat back.",
        data_schema(ACTIVATION_DATA_FIELDS),
    ),
    "ticket.created": ("A customer opened a support ticket.", data_schema(TICKET_DATA_FIELDS)),
    TEST_EVENT_TYPE: (
        "The console's or the API's test event, sent to one endpoint.",
        data_schema({"message": STRING, "endpointId": INTEGER}),
    ),
}
assert set(EVENT_DATA) == {*WEBHOOK_EVENT_TYPES, TEST_EVENT_TYPE}


def event_schema(event_type: str, data: dict) -> dict:
    """The body of one event type (inline: receivers' validators need no components)."""
    return {
        "type": "object",
        "required": ["id", "type", "created", "data"],
        "properties": {
            "id": {"type": "string", "pattern": "^evt_[0-9a-f]{24}$"},
            "type": {"const": event_type},
            "created": DATE_TIME,
            "data": data,
        },
    }


SIGNATURE_HEADERS = [
    {
        "name": "Cmsshop-Signature",
        "in": "header",
        "required": True,
        "schema": STRING,
        "description": "t=<unix time>,v1=<hex HMAC-SHA256 of '<t>.<body>'> (a v1 per valid "
        "secret during a rotation): verify with stripe.WebhookSignature.verify_header.",
    },
    {"name": "Cmsshop-Event-Id", "in": "header", "required": True, "schema": STRING},
    {"name": "Cmsshop-Event-Type", "in": "header", "required": True, "schema": STRING},
]
WEBHOOKS = {
    event_type: {
        "post": {
            "summary": summary,
            "tags": ["webhooks"],
            "parameters": SIGNATURE_HEADERS,
            "requestBody": {
                "required": True,
                "content": oa.json_content(event_schema(event_type, data)),
            },
            "responses": {
                "2XX": {"description": "Delivered. Anything else is retried for three days."}
            },
        }
    }
    for event_type, (summary, data) in EVENT_DATA.items()
}
