"""The OpenAPI part of the support module: the customer's ticket conversations and the admin
ticket queue (views/support/api.py, admin_api.py).

Enumerations come from the models, so the document cannot drift from the CHECK
constraints.
"""

from __future__ import annotations

from cmsshop import openapi as oa
from cmsshop.models import TICKET_STATUSES
from cmsshop.views.shared.bodies import DATE_TIME
from cmsshop.views.shared.schema import ID_PARAM, list_operation

TIME = DATE_TIME
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

OPENAPI_SCHEMAS = {
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

OPENAPI_PATHS = {
    "/api/dashboard/tickets": {
        "get": list_operation("Your support tickets, newest first", "DashboardTicket"),
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
    "/api/admin/tickets": {
        "get": list_operation(
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
