"""The OpenAPI part of the audit module: the admin API's read-only log."""

from __future__ import annotations

from cmsshop import openapi as oa

ENTRY = {
    "type": "object",
    "required": [
        "id",
        "createdAt",
        "actor",
        "actorUserId",
        "actorTokenId",
        "channel",
        "via",
        "action",
        "objectType",
        "objectId",
        "summary",
        "ip",
    ],
    "properties": {
        "id": {"type": "integer"},
        "createdAt": {"type": "string", "format": "date-time"},
        "actor": {
            "type": "string",
            "description": "user:<id>, token:<id>, cli:<operating-system user> or system.",
        },
        "actorUserId": {"type": ["integer", "null"]},
        "actorTokenId": {"type": ["integer", "null"]},
        "channel": {
            "type": ["string", "null"],
            "description": "console, api, cli, account or system.",
        },
        "via": {"type": ["string", "null"], "description": "The route or command."},
        "action": {"type": "string", "description": "e.g. product.updated."},
        "objectType": {"type": "string"},
        "objectId": {"type": "string"},
        "summary": {
            "type": "object",
            "description": "The changed fields: before and after (secrets redacted).",
        },
        "ip": {"type": ["string", "null"]},
    },
}

FILTER_PARAMS = [
    oa.query_param("actor", {"type": "string", "maxLength": 120}, "e.g. user:3 or token:7."),
    oa.query_param("action", {"type": "string", "maxLength": 64}, "e.g. license.updated."),
    oa.query_param("objectType", {"type": "string", "maxLength": 32}, "e.g. order."),
    oa.query_param("objectId", {"type": "string", "maxLength": 64}),
    oa.query_param("from", {"type": "string", "format": "date"}, "First day (UTC), inclusive."),
    oa.query_param("to", {"type": "string", "format": "date"}, "Last day (UTC), inclusive."),
]

ADMIN_PATHS = {
    "/api/admin/audit": {
        "get": oa.operation(
            "The audit log, newest first: every admin change (read only)",
            {**oa.ok(oa.page_of(oa.ref("AuditEntry"))), **oa.errors(401, 403, 422)},
            params=[*FILTER_PARAMS, *oa.PAGING_PARAMS],
            tags=["admin", "audit"],
        )
    },
}
ADMIN_SCHEMAS = {"AuditEntry": ENTRY}
