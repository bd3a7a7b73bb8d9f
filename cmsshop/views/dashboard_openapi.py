"""The OpenAPI part of the dashboard module: the customer dashboard, the signed download
route, ticket conversations and the admin ticket queue (views/dashboard.py, downloads.py,
admin_tickets.py).

Enumerations come from the models, so the document cannot drift from the CHECK
constraints.
"""

from __future__ import annotations

from cmsshop import openapi as oa
from cmsshop.models import DELIVERY_MODES, ENTITLEMENT_STATUSES, LICENSE_STATUSES, TICKET_STATUSES
from cmsshop.views.shared.bodies import (
    DATE_TIME,
    NULLABLE_DATE_TIME,
    ORDER_LINE_SCHEMA,
    ORDER_SCHEMA,
    RELEASE_SCHEMA,
)

ID_PARAM = oa.path_param("id", {"type": "integer", "minimum": 1, "maximum": 2**31 - 1})
KEY_PARAM = oa.path_param(
    "key",
    {"type": "string", "minLength": 1, "maxLength": 64, "examples": ["7KQ2M-9XW4P-..."]},
)
TIME = DATE_TIME
NULLABLE_TIME = NULLABLE_DATE_TIME
# Ticket text must contain a non-space character and no NUL (PostgreSQL cannot store
# it). Said in the descriptions, not as a `pattern`: a regular expression on a
# 20,000-character field makes schema-driven generators (schemathesis) crawl.
TEXT_RULE = "Must contain a character other than white space; NUL characters are refused."

TICKET_PROPERTIES = {
    "id": {"type": "integer"},
    "number": {"type": "string", "pattern": "^TCK-[0-9A-Z]{6}$"},
    "subject": {"type": "string"},
    "body": {"type": "string"},
    "status": {"type": "string", "enum": list(TICKET_STATUSES)},
    "orderNumber": {"type": ["string", "null"]},
    "createdAt": TIME,
    "updatedAt": TIME,
}
TICKET_REQUIRED = ["id", "number", "subject", "body", "status", "orderNumber", "createdAt"]
PERSON = {
    "type": "object",
    "required": ["id", "email", "name"],
    "properties": {
        "id": {"type": "integer"},
        "email": {"type": "string"},
        "name": {"type": "string"},
    },
}
# A message of a conversation as the customer sees it: staff replies say "staff", never
# which admin wrote them.
CUSTOMER_MESSAGE_PROPERTIES = {
    "author": {"type": "string", "enum": ["you", "staff"]},
    "body": {"type": "string"},
    "createdAt": TIME,
}
ADMIN_MESSAGE_PROPERTIES = {
    "author": {"type": "string", "enum": ["customer", "staff"]},
    "authorEmail": {"type": "string"},
    "authorName": {"type": "string"},
    "body": {"type": "string"},
    "createdAt": TIME,
}
MESSAGE_BODY = {
    "type": "string",
    "minLength": 1,
    "maxLength": 20000,
    "description": TEXT_RULE,
}

ACTIVATION_PROPERTIES = {
    "id": {"type": "integer"},
    "domain": {"type": "string"},
    "fingerprint": {
        "type": "string",
        "description": "The installation's fingerprint, as its runtime sent it",
    },
    "environment": {"type": "string", "enum": ["production", "staging", "local"]},
    "active": {"type": "boolean"},
    "activatedAt": {**TIME, "description": "First seen"},
    "lastValidatedAt": {**NULLABLE_TIME, "description": "Last seen (its last validate)"},
    "deactivatedAt": NULLABLE_TIME,
}
ACTIVATION_REQUIRED = list(ACTIVATION_PROPERTIES)

OPENAPI_SCHEMAS = {
    "DashboardOrder": ORDER_SCHEMA,
    "DashboardInvoice": {
        "type": "object",
        "required": ["number", "orderNumber", "issuedAt", "currency", "total", "lines"],
        "properties": {
            "number": {"type": "string", "examples": ["INV-2026-000042"]},
            "orderNumber": {"type": "string"},
            "issuedAt": TIME,
            "currency": {"type": "string"},
            "total": {"type": "integer", "description": "Minor units"},
            "lines": {
                "type": "array",
                "items": {"type": "object", "properties": ORDER_LINE_SCHEMA["properties"]},
            },
        },
    },
    "DashboardDownload": {
        "type": "object",
        "required": [
            "id",
            "product",
            "name",
            "latestRelease",
            "licensed",
            "revoked",
            "status",
            "createdAt",
        ],
        "properties": {
            "id": {"type": "integer"},
            "product": {"type": "string", "description": "Product slug"},
            "name": {"type": "string"},
            "latestRelease": {"oneOf": [RELEASE_SCHEMA, {"type": "null"}]},
            "licensed": {"type": "boolean"},
            "revoked": {"type": "boolean"},
            "status": {"type": "string", "enum": list(ENTITLEMENT_STATUSES)},
            "createdAt": TIME,
        },
    },
    "DashboardSignedUrl": {
        "type": "object",
        "required": ["url", "expiresAt"],
        "properties": {"url": {"type": "string", "format": "uri"}, "expiresAt": TIME},
    },
    "DashboardLicense": {
        "type": "object",
        "required": ["key", "product", "status", "expiresAt", "maxActivations", "activations"],
        "properties": {
            "key": {"type": "string"},
            "product": {"type": "string", "description": "Product slug"},
            "status": {"type": "string", "enum": list(LICENSE_STATUSES)},
            "expiresAt": NULLABLE_TIME,
            "maxActivations": {"type": "integer"},
            "activations": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["domain", "fingerprint", "activatedAt", "lastValidatedAt"],
                    "properties": {
                        "domain": {"type": "string"},
                        "fingerprint": {"type": "string"},
                        "activatedAt": TIME,
                        "lastValidatedAt": NULLABLE_TIME,
                    },
                },
            },
        },
    },
    "DashboardActivation": {
        "type": "object",
        "required": ACTIVATION_REQUIRED,
        "properties": ACTIVATION_PROPERTIES,
    },
    "DashboardDeactivation": {
        "type": "object",
        "required": ["outcome", "activation", "activationsUsed", "maxActivations"],
        "properties": {
            "outcome": {
                "type": "string",
                "enum": ["deactivated", "already_inactive"],
                "description": "already_inactive: it was inactive before; nothing changed",
            },
            "activation": {
                "type": "object",
                "required": ACTIVATION_REQUIRED,
                "properties": ACTIVATION_PROPERTIES,
            },
            "activationsUsed": {
                "type": "integer",
                "description": "Production seats in use afterwards",
            },
            "maxActivations": {"type": "integer"},
        },
    },
    "DashboardTicket": {
        "type": "object",
        "required": TICKET_REQUIRED,
        "properties": TICKET_PROPERTIES,
    },
    "DashboardAdminTicket": {
        "type": "object",
        "required": [*TICKET_REQUIRED, "customer"],
        "properties": {**TICKET_PROPERTIES, "customer": PERSON},
    },
    "DashboardTicketMessage": {
        "type": "object",
        "required": list(CUSTOMER_MESSAGE_PROPERTIES),
        "properties": CUSTOMER_MESSAGE_PROPERTIES,
    },
    "DashboardTicketConversation": {
        "type": "object",
        "required": [*TICKET_REQUIRED, "messages"],
        "properties": {
            **TICKET_PROPERTIES,
            "messages": {
                "type": "array",
                "description": "The opening message (the ticket's body), then every reply, "
                "oldest first",
                "items": oa.ref("DashboardTicketMessage"),
            },
        },
    },
    "DashboardTicketReply": {
        "type": "object",
        "required": [*CUSTOMER_MESSAGE_PROPERTIES, "ticketStatus"],
        "properties": {
            **CUSTOMER_MESSAGE_PROPERTIES,
            "ticketStatus": {"type": "string", "enum": list(TICKET_STATUSES)},
        },
    },
    "AdminTicketMessage": {
        "type": "object",
        "required": list(ADMIN_MESSAGE_PROPERTIES),
        "properties": ADMIN_MESSAGE_PROPERTIES,
    },
    "AdminTicketConversation": {
        "type": "object",
        "required": [*TICKET_REQUIRED, "customer", "messages"],
        "properties": {
            **TICKET_PROPERTIES,
            "customer": PERSON,
            "messages": {
                "type": "array",
                "description": "The opening message, then every reply, oldest first",
                "items": oa.ref("AdminTicketMessage"),
            },
        },
    },
    "AdminTicketReply": {
        "type": "object",
        "required": [*ADMIN_MESSAGE_PROPERTIES, "ticketStatus"],
        "properties": {
            **ADMIN_MESSAGE_PROPERTIES,
            "ticketStatus": {"type": "string", "enum": list(TICKET_STATUSES)},
        },
    },
}

NEW_TICKET = {
    "type": "object",
    "required": ["subject", "body"],
    "additionalProperties": False,
    "properties": {
        "subject": {
            "type": "string",
            "minLength": 3,
            "maxLength": 200,
            "description": TEXT_RULE,
        },
        "body": {
            "type": "string",
            "minLength": 1,
            "maxLength": 20000,
            "description": TEXT_RULE,
        },
        "orderNumber": {
            "type": "string",
            "maxLength": 32,
            "description": "One of your order numbers (422 otherwise)",
        },
    },
}

BINARY = {"type": "string", "format": "binary"}
DOWNLOAD_HEADERS = {
    name: {"schema": {"type": "string"}, "description": description}
    for name, description in (
        ("Content-Disposition", "attachment with the release's file name"),
        ("ETag", "The quoted SHA-256 of the file"),
        ("X-Accel-Redirect", f"Only with cmsshop.download_delivery = {DELIVERY_MODES[1]}"),
    )
}


def _file_response(description: str) -> dict:
    return {
        "description": description,
        "headers": DOWNLOAD_HEADERS,
        "content": {"application/octet-stream": {"schema": BINARY}},
    }


def _list(
    summary: str,
    schema: str,
    params: list | None = None,
    tag: str = "dashboard",
    errors: tuple[int, ...] = (),
) -> dict:
    return oa.operation(
        summary,
        {**oa.ok(oa.page_of(oa.ref(schema))), **oa.errors(401, 403, 422, *errors)},
        params=[*(params or []), *oa.PAGING_PARAMS],
        tags=[tag],
    )


OPENAPI_PATHS = {
    "/api/dashboard/orders": {"get": _list("Your orders, newest first", "DashboardOrder")},
    "/api/dashboard/invoices": {"get": _list("Your invoices, newest first", "DashboardInvoice")},
    "/api/dashboard/downloads": {
        "get": _list("Your download entitlements, newest first", "DashboardDownload")
    },
    "/api/dashboard/downloads/{id}/signed-url": {
        "post": oa.operation(
            "A fresh short-lived download URL for the newest release file "
            "(404 download_not_found / release_not_available, 403 download_on_hold, "
            "410 download_revoked)",
            {**oa.ok(oa.ref("DashboardSignedUrl")), **oa.errors(401, 403, 404, 410)},
            params=[ID_PARAM],
            csrf=True,
            tags=["dashboard"],
        )
    },
    "/api/dashboard/downloads/{id}/license": {
        "post": oa.operation(
            "The license of this purchase, issued now if fulfilment has not (idempotent; "
            "404 license_not_available for an unlicensed product)",
            {**oa.ok(oa.ref("DashboardLicense")), **oa.errors(401, 403, 404, 410)},
            params=[ID_PARAM],
            csrf=True,
            tags=["dashboard"],
        )
    },
    "/api/dashboard/licenses/{key}/activations": {
        "get": _list(
            "The active activations (seats in use) of one of your licenses, most recently "
            "activated first (404 license_not_found for a key that is not yours)",
            "DashboardActivation",
            params=[KEY_PARAM],
            errors=(404,),
        )
    },
    "/api/dashboard/licenses/{key}/activations/{id}/deactivate": {
        "post": oa.operation(
            "Free the seat of an activation of your license, e.g. of a site that is gone "
            "(its next validate answers 404 activation_not_found; audited as "
            "customer_deactivate). Idempotent: an inactive one answers 200 with outcome "
            "already_inactive. 404 license_not_found for a key that is not yours, "
            "activation_not_found for an activation of another license. 429 "
            "deactivation_limit_reached (Retry-After) past "
            "cmsshop.license_self_deactivations_per_month in a rolling 30 days.",
            {**oa.ok(oa.ref("DashboardDeactivation")), **oa.errors(401, 403, 404, 429)},
            params=[KEY_PARAM, ID_PARAM],
            csrf=True,
            tags=["dashboard"],
        )
    },
    "/api/dashboard/tickets": {
        "get": _list("Your support tickets, newest first", "DashboardTicket"),
        "post": oa.operation(
            "Open a support ticket (limited per hour: 429 with Retry-After)",
            {
                **oa.ok(oa.ref("DashboardTicket"), "Created", 201),
                **oa.errors(401, 403, 415, 422, 429),
            },
            body=NEW_TICKET,
            csrf=True,
            tags=["dashboard"],
        ),
    },
    "/api/dashboard/tickets/{id}": {
        "get": oa.operation(
            "One of your tickets with its conversation (404 ticket_not_found, another "
            "customer's ticket included)",
            {**oa.ok(oa.ref("DashboardTicketConversation")), **oa.errors(401, 403, 404)},
            params=[ID_PARAM],
            tags=["dashboard"],
        )
    },
    "/api/dashboard/tickets/{id}/messages": {
        "post": oa.operation(
            "Reply to one of your tickets; a pending or closed ticket is open again "
            "(limited per hour: 429 with Retry-After)",
            {
                **oa.ok(oa.ref("DashboardTicketReply"), "Created", 201),
                **oa.errors(401, 403, 404, 413, 415, 422, 429),
            },
            body={
                "type": "object",
                "required": ["body"],
                "additionalProperties": False,
                "properties": {"body": MESSAGE_BODY},
            },
            params=[ID_PARAM],
            csrf=True,
            tags=["dashboard"],
        )
    },
    "/api/downloads/{token}": {
        "get": oa.operation(
            "Download a release file with a signed token (no cookie needed). Supports a "
            "single byte range and If-Range. 403 invalid_download_token, 410 "
            "download_link_expired / download_revoked, 416 range_not_satisfiable.",
            {
                "200": _file_response("The whole file (empty with X-Accel-Redirect)"),
                "206": _file_response("The requested byte range (Content-Range)"),
                **oa.errors(403, 404, 410, 416),
            },
            params=[
                oa.path_param("token", {"type": "string"}),
                {
                    "name": "Range",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": "One byte range, e.g. bytes=1000- (others are ignored)",
                },
                {
                    "name": "If-Range",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": "The ETag of a partial download; a mismatch sends it all",
                },
            ],
            tags=["downloads"],
        )
    },
    "/api/admin/tickets": {
        "get": _list(
            "Every customer's support tickets, newest first (admin)",
            "DashboardAdminTicket",
            params=[oa.query_param("status", {"type": "string", "enum": list(TICKET_STATUSES)})],
            tag="admin",
        )
    },
    "/api/admin/tickets/{id}": {
        "get": oa.operation(
            "Any ticket with its conversation and customer (admin; 404 ticket_not_found)",
            {**oa.ok(oa.ref("AdminTicketConversation")), **oa.errors(401, 403, 404)},
            params=[ID_PARAM],
            tags=["admin"],
        ),
        "patch": oa.operation(
            "Change a ticket's status (admin; 404 ticket_not_found)",
            {**oa.ok(oa.ref("DashboardAdminTicket")), **oa.errors(401, 403, 404, 415, 422)},
            body={
                "type": "object",
                "required": ["status"],
                "additionalProperties": False,
                "properties": {"status": {"type": "string", "enum": list(TICKET_STATUSES)}},
            },
            params=[ID_PARAM],
            csrf=True,
            tags=["admin"],
        ),
    },
    "/api/admin/tickets/{id}/messages": {
        "post": oa.operation(
            "Reply as staff (admin): the ticket becomes pending, or takes the optional "
            "status (e.g. closed) in the same step (404 ticket_not_found)",
            {
                **oa.ok(oa.ref("AdminTicketReply"), "Created", 201),
                **oa.errors(401, 403, 404, 413, 415, 422),
            },
            body={
                "type": "object",
                "required": ["body"],
                "additionalProperties": False,
                "properties": {
                    "body": MESSAGE_BODY,
                    "status": {"type": "string", "enum": list(TICKET_STATUSES)},
                },
            },
            params=[ID_PARAM],
            csrf=True,
            tags=["admin"],
        )
    },
}
