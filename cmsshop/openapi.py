"""The OpenAPI 3.1 document, assembled from the parts each module contributes.

Every includeme that adds routes calls ``config.add_openapi(paths=..., schemas=...)``
with the paths it serves, so the document always describes exactly the enabled modules.
"""

from __future__ import annotations

import copy
from typing import Any

ERROR_SCHEMA = {
    "type": "object",
    "required": ["code", "title", "message", "hints", "supportCode"],
    "properties": {
        "code": {"type": "string"},
        "title": {"type": "string"},
        "message": {"type": "string"},
        "hints": {"type": "array", "items": {"type": "string"}},
        "supportCode": {"type": "string", "pattern": "^CS-[0-9A-Z]{4}-[0-9A-Z]{4}$"},
        "errors": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}

ERROR_DESCRIPTIONS = {
    400: "Malformed request (e.g. malformed_json)",
    401: "Not logged in",
    403: "Forbidden or csrf_failed",
    404: "Not found or module_disabled",
    405: "Method not allowed",
    409: "Conflict",
    410: "Gone",
    413: "Body too large",
    415: "Unsupported media type",
    422: "Validation failed",
    429: "Rate limited",
    500: "Unexpected error",
    503: "A dependency is unavailable",
}


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def json_content(schema: dict) -> dict:
    return {"application/json": {"schema": schema}}


def ok(schema: dict, description: str = "OK", status: int = 200) -> dict:
    return {str(status): {"description": description, "content": json_content(schema)}}


def errors(*statuses: int) -> dict:
    """Error responses for ``statuses`` plus the ones any route can give."""
    result = {}
    for status in sorted(set(statuses) | {400, 405, 413, 500}):
        result[str(status)] = {
            "description": ERROR_DESCRIPTIONS.get(status, "Error"),
            "content": json_content(ref("Error")),
        }
    return result


def operation(
    summary: str,
    responses: dict,
    *,
    body: dict | None = None,
    params: list[dict] | None = None,
    tags: list[str] | None = None,
    csrf: bool = False,
    body_content_type: str = "application/json",
    body_required: bool = True,
) -> dict:
    """One operation object; ``csrf`` documents the X-CSRF-Token header."""
    op: dict[str, Any] = {"summary": summary, "responses": responses}
    if tags:
        op["tags"] = tags
    parameters = list(params or [])
    if csrf:
        parameters.append(
            {
                "name": "X-CSRF-Token",
                "in": "header",
                "required": True,
                "schema": {"type": "string"},
                "description": "The csrfToken from GET /api/auth/session.",
            }
        )
    if parameters:
        op["parameters"] = parameters
    if body is not None:
        op["requestBody"] = {
            "required": body_required,
            "content": {body_content_type: {"schema": body}},
        }
    return op


def path_param(name: str, schema: dict | None = None) -> dict:
    return {"name": name, "in": "path", "required": True, "schema": schema or {"type": "string"}}


def query_param(name: str, schema: dict, description: str = "") -> dict:
    param = {"name": name, "in": "query", "required": False, "schema": schema}
    if description:
        param["description"] = description
    return param


PAGING_PARAMS = [
    query_param("page", {"type": "integer", "minimum": 1}, "Page number, from 1."),
    query_param("perPage", {"type": "integer", "minimum": 1, "maximum": 100}, "Default 20."),
]


def page_of(item_schema: dict) -> dict:
    return {
        "type": "object",
        "required": ["items", "page", "perPage", "total"],
        "properties": {
            "items": {"type": "array", "items": item_schema},
            "page": {"type": "integer"},
            "perPage": {"type": "integer"},
            "total": {"type": "integer"},
        },
    }


def add_openapi(
    config, paths: dict | None = None, schemas: dict | None = None, webhooks: dict | None = None
) -> None:
    """Config directive: merge ``paths``, component ``schemas`` and ``webhooks`` (the
    requests the shop sends: OpenAPI 3.1's top-level webhooks) into the document."""
    spec = config.registry.setdefault("cmsshop.openapi", {"paths": {}, "schemas": {}})
    for path, operations in (paths or {}).items():
        spec["paths"].setdefault(path, {}).update(operations)
    spec["schemas"].update(schemas or {})
    spec.setdefault("webhooks", {}).update(webhooks or {})


ADMIN_PREFIX = "/api/admin/"
SECURITY_SCHEMES = {
    "session": {"type": "apiKey", "in": "cookie", "name": "cmsshop_session"},
    "apiToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "An API token (cms_...) made by an admin under /admin/api-tokens, "
        "for /api/admin routes its scopes cover (x-required-scope; 'read' covers every "
        "GET, 'all' everything); no CSRF token needed. docs/api-tokens.md.",
    },
}
SCOPE_ERRORS = {
    401: "Not logged in, or invalid_api_token (malformed, unknown, revoked or expired)",
    403: "Not an admin, csrf_failed (session), or insufficient_scope (token; names the scope)",
}


def mark_admin_security(paths: dict) -> None:
    """Every /api/admin operation: who may call it (a session, and a token with the
    scope of its area unless the area is session only) and the refusals that go with it."""
    from cmsshop.services.apitokens.scopes import area_scope  # models, loaded late

    for path, operations in paths.items():
        if not path.startswith(ADMIN_PREFIX):
            continue
        try:
            scope = area_scope(path)
        except KeyError:  # a group the scope table lacks: tests/apitokens walks for these
            continue
        for op in operations.values():
            if scope is None:
                op["security"] = [{"session": []}]
                op["x-required-scope"] = "session"
            else:
                op["security"] = [{"session": []}, {"apiToken": []}]
                op["x-required-scope"] = scope
            responses = op.setdefault("responses", {})
            for status, description in SCOPE_ERRORS.items():
                responses.setdefault(
                    str(status),
                    {"description": description, "content": json_content(ref("Error"))},
                )
                responses[str(status)]["description"] = description


def build_document(registry) -> dict:
    settings = registry.settings
    spec = registry.get("cmsshop.openapi", {"paths": {}, "schemas": {}})
    paths = copy.deepcopy(dict(sorted(spec["paths"].items())))
    mark_admin_security(paths)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": f"{settings['cmsshop.site_name']} API",
            "version": "1.0.0",
            "description": "Every error body is the Error schema; every time is ISO 8601 UTC; "
            "money is integer minor units with a currency code.",
        },
        "servers": [{"url": settings["cmsshop.base_url"]}],
        "paths": paths,
        "webhooks": copy.deepcopy(dict(sorted(spec.get("webhooks", {}).items()))),
        "components": {
            "schemas": {"Error": ERROR_SCHEMA, **copy.deepcopy(spec["schemas"])},
            "securitySchemes": copy.deepcopy(SECURITY_SCHEMES),
        },
    }


def includeme(config) -> None:
    config.add_directive("add_openapi", add_openapi)
    config.registry.setdefault("cmsshop.openapi", {"paths": {}, "schemas": {}})
