"""Core routes: bootstrap, health, the OpenAPI document, and admin error lookup."""

from __future__ import annotations

from pyramid.csrf import get_csrf_token
from pyramid.renderers import render
from pyramid.response import Response
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


OPENAPI_BODY = "cmsshop.openapi_body"  # registry key: the document's bytes


@view_config(route_name="core.openapi", request_method="GET")
def openapi_document(request):
    """The document follows from the configuration alone (the modules' routes and the
    settings), so a process writes it once, at its first request: it cost about 10 ms and
    218 KB of JSON every time. Written by the app's json renderer, as before."""
    body = request.registry.get(OPENAPI_BODY)
    if body is None:
        document = oa.build_document(request.registry)
        body = request.registry[OPENAPI_BODY] = render("json", document, request).encode()
    return Response(body=body, headerlist=[("Content-Type", "application/json")])


@view_config(route_name="core.admin_error", request_method="GET", renderer="json", permission=ADMIN)
def admin_error(request):
    record = find_error_record(request.db, request.matchdict["support_code"])
    if record is None:
        raise NotFound(
            "No server error was recorded with this support code.", code="support_code_not_found"
        )
    return error_record_body(record)
