"""The OpenAPI part of the API tokens: their admin routes (an admin's browser session
only; cmsshop.openapi marks them so)."""

from __future__ import annotations

from cmsshop import openapi as oa
from cmsshop.models import API_TOKEN_SCOPES
from cmsshop.services.apitokens.scopes import SCOPE_DESCRIPTIONS
from cmsshop.views.apitokens.admin_api import MAX_NAME
from cmsshop.views.shared.schema import DATE_TIME, body_schema, text_schema

NULLABLE_TIME = {"type": ["string", "null"], "format": "date-time"}
SCOPE = {
    "enum": list(API_TOKEN_SCOPES),
    "description": "; ".join(f"{name}: {text}" for name, text in SCOPE_DESCRIPTIONS.items()),
}
TOKEN_FIELDS = {
    "id": {"type": "integer"},
    "name": {"type": "string"},
    "prefix": {"type": "string", "description": "The token's first characters (cms_...)"},
    "scopes": {"type": "array", "items": SCOPE},
    "createdAt": DATE_TIME,
    "createdBy": {
        "type": "object",
        "required": ["id", "email"],
        "properties": {"id": {"type": "integer"}, "email": {"type": "string"}},
        "description": "The admin the token acts as (while still an admin)",
    },
    "expiresAt": NULLABLE_TIME,
    "lastUsedAt": NULLABLE_TIME,
    "lastUsedIp": {"type": ["string", "null"]},
    "revokedAt": NULLABLE_TIME,
    "status": {
        "enum": ["active", "revoked", "expired", "suspended"],
        "description": "suspended: its creator is no longer an admin",
    },
    "active": {"type": "boolean"},
}
TOKEN = {"type": "object", "required": list(TOKEN_FIELDS), "properties": TOKEN_FIELDS}
NEW_TOKEN = {
    "allOf": [
        oa.ref("ApiToken"),
        {
            "type": "object",
            "required": ["token"],
            "properties": {
                "token": {
                    "type": "string",
                    "description": "The token: shown in this answer only, never again",
                }
            },
        },
    ]
}
TAGS = ["admin", "api-tokens"]

ADMIN_PATHS = {
    "/api/admin/api-tokens": {
        "get": oa.operation(
            "Every API token, newest first, with its last use (admin, browser session only)",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["items"],
                        "properties": {"items": {"type": "array", "items": oa.ref("ApiToken")}},
                    }
                ),
                **oa.errors(401, 403),
            },
            tags=TAGS,
        ),
        "post": oa.operation(
            "Create an API token (admin, browser session only): the answer holds the token, "
            "which is never shown again (only its hash is kept)",
            {
                **oa.ok(NEW_TOKEN, "Created", 201),
                **oa.errors(401, 403, 415, 422),
            },
            body=body_schema(
                {
                    "name": text_schema(MAX_NAME, min_length=1),
                    "scopes": {
                        "type": "array",
                        "items": SCOPE,
                        "minItems": 1,
                        "maxItems": len(API_TOKEN_SCOPES),
                    },
                    "expiresAt": {
                        **NULLABLE_TIME,
                        "description": "Optional; in the future, at most five years ahead",
                    },
                },
                ["name", "scopes"],
            ),
            csrf=True,
            tags=TAGS,
        ),
    },
    "/api/admin/api-tokens/{id}": {
        "delete": oa.operation(
            "Revoke an API token at once (admin, browser session only); revoking a revoked "
            "token changes nothing; 404 api_token_not_found for an unknown id",
            {**oa.ok(oa.ref("ApiToken")), **oa.errors(401, 403, 404)},
            params=[oa.path_param("id", {"type": "integer", "minimum": 1})],
            csrf=True,
            tags=TAGS,
        )
    },
}

ADMIN_SCHEMAS = {"ApiToken": TOKEN}
