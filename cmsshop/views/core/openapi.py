"""The OpenAPI part of the core module: health, bootstrap, the document itself and the
admin error lookup."""

from __future__ import annotations

from cmsshop import openapi as oa

USER = {
    "type": ["object", "null"],
    "required": ["id", "email", "name", "role"],
    "properties": {
        "id": {"type": "integer"},
        "email": {"type": "string"},
        "name": {"type": "string"},
        "role": {"type": "string", "enum": ["customer", "admin"]},
    },
}

OPENAPI_PATHS = {
    "/api/bootstrap": {
        "get": oa.operation(
            "Site configuration, enabled modules, current user and CSRF token",
            {**oa.ok(oa.ref("Bootstrap")), **oa.errors()},
            tags=["core"],
        )
    },
    "/api/health": {
        "get": oa.operation(
            "Liveness and database check",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "properties": {"status": {"const": "ok"}, "database": {"const": "ok"}},
                    }
                ),
                **oa.errors(503),
            },
            tags=["core"],
        )
    },
    "/api/openapi.json": {
        "get": oa.operation(
            "This document", {**oa.ok({"type": "object"}), **oa.errors()}, tags=["core"]
        )
    },
    "/api/admin/errors/{support_code}": {
        "get": oa.operation(
            "The stored record of a server error (admin)",
            {**oa.ok(oa.ref("ErrorRecord")), **oa.errors(401, 403, 404)},
            params=[oa.path_param("support_code")],
            tags=["admin"],
        )
    },
}

OPENAPI_SCHEMAS = {
    "User": USER,
    "Bootstrap": {
        "type": "object",
        "required": ["siteName", "baseUrl", "modules", "defaultCurrency", "user", "csrfToken"],
        "properties": {
            "siteName": {"type": "string"},
            "baseUrl": {"type": "string"},
            "modules": {"type": "array", "items": {"type": "string"}},
            "defaultCurrency": {"type": ["string", "null"]},
            "user": oa.ref("User"),
            "csrfToken": {"type": "string"},
        },
    },
    "ErrorRecord": {
        "type": "object",
        "required": ["supportCode", "createdAt", "method", "path", "status", "code"],
        "properties": {
            "supportCode": {"type": "string"},
            "createdAt": {"type": "string", "format": "date-time"},
            "requestId": {"type": ["string", "null"]},
            "method": {"type": "string"},
            "path": {"type": "string"},
            "status": {"type": "integer"},
            "code": {"type": "string"},
            "exceptionType": {"type": ["string", "null"]},
            "traceback": {"type": ["string", "null"]},
        },
    },
}
