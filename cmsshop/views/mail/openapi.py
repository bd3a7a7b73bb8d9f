"""The OpenAPI part of the mail module: the admin outbox routes."""

from __future__ import annotations

from cmsshop import openapi as oa
from cmsshop.models import MAIL_STATUSES

MESSAGE_SUMMARY = {
    "type": "object",
    "required": [
        "id",
        "kind",
        "to",
        "subject",
        "status",
        "attempts",
        "lastError",
        "messageId",
        "createdAt",
        "nextAttemptAt",
        "sentAt",
    ],
    "properties": {
        "id": {"type": "integer"},
        "kind": {"type": "string"},
        "to": {"type": "string"},
        "subject": {"type": "string"},
        "status": {"type": "string", "enum": list(MAIL_STATUSES)},
        "attempts": {"type": "integer"},
        "lastError": {"type": ["string", "null"]},
        "messageId": {"type": "string"},
        "createdAt": {"type": "string", "format": "date-time"},
        "nextAttemptAt": {"type": ["string", "null"], "format": "date-time"},
        "sentAt": {"type": ["string", "null"], "format": "date-time"},
    },
}

OPENAPI_PATHS = {
    "/api/admin/mail": {
        "get": oa.operation(
            "The mail outbox, newest first (bodies are on the admin page)",
            {**oa.ok(oa.page_of(oa.ref("MailMessageSummary"))), **oa.errors(401, 403, 422)},
            params=[
                oa.query_param("status", {"type": "string", "enum": list(MAIL_STATUSES)}),
                *oa.PAGING_PARAMS,
            ],
            tags=["admin", "mail"],
        )
    },
    "/api/admin/mail/{id}/resend": {
        "post": oa.operation(
            "Queue a sent or failed message again, due now with fresh attempts "
            "(409 mail_message_pending for one still queued)",
            {**oa.ok(oa.ref("MailMessageSummary")), **oa.errors(401, 403, 404, 409)},
            params=[oa.path_param("id", {"type": "integer", "minimum": 1})],
            csrf=True,
            tags=["admin", "mail"],
        )
    },
}
OPENAPI_SCHEMAS = {"MailMessageSummary": MESSAGE_SUMMARY}
