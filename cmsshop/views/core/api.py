"""Core routes: bootstrap, health, the OpenAPI document, and admin error lookup."""

from __future__ import annotations

from pyramid.csrf import get_csrf_token
from pyramid.view import view_config

from cmsshop import openapi as oa
from cmsshop.errors import DatabaseUnavailable, NotFound
from cmsshop.security import ADMIN
from cmsshop.services.store.currencies import default_currency
from cmsshop.services.support.codes import find_error_record
from cmsshop.views.shared.bodies import error_record_body, user_body


@view_config(route_name="core.bootstrap", request_method="GET", renderer="json")
def bootstrap(request):
    settings = request.registry.settings
    return {
        "siteName": settings["cmsshop.site_name"],
        "baseUrl": settings["cmsshop.base_url"],
        "modules": sorted(settings["cmsshop.modules"]),
        "defaultCurrency": default_currency(request.db),
        "user": user_body(request.user),
        "csrfToken": get_csrf_token(request),
    }


@view_config(route_name="core.health", request_method="GET", renderer="json")
def health(request):
    try:
        request.registry["cmsshop.health_probe"].ping()
    except Exception:  # noqa: BLE001 - any failure means "not healthy"
        raise DatabaseUnavailable("The database does not answer.", retry_after=10) from None
    return {"status": "ok", "database": "ok"}


@view_config(route_name="core.openapi", request_method="GET", renderer="json")
def openapi_document(request):
    return oa.build_document(request.registry)


@view_config(route_name="core.admin_error", request_method="GET", renderer="json", permission=ADMIN)
def admin_error(request):
    record = find_error_record(request.db, request.matchdict["support_code"])
    if record is None:
        raise NotFound(
            "No server error was recorded with this support code.", code="support_code_not_found"
        )
    return error_record_body(record)


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
