"""The core module, always on: health, the OpenAPI document, the bootstrap answer, the
home page and the admin console's own pages (dashboard, server-error lookup)."""

from __future__ import annotations

from cmsshop.views.core import openapi

ROUTES = {
    "core.bootstrap": "/api/bootstrap",
    "core.health": "/api/health",
    "core.openapi": "/api/openapi.json",
    "core.admin_error": "/api/admin/errors/{support_code}",
    # The web pages: the home page and the admin console's core pages.
    "pages.home": "/",
    "pages.admin": "/admin",
    "pages.admin_errors": "/admin/errors",
    "pages.admin_error": "/admin/errors/{support_code}",
}


def includeme(config) -> None:
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.add_openapi(paths=openapi.OPENAPI_PATHS, schemas=openapi.OPENAPI_SCHEMAS)
    config.scan("cmsshop.views.core")
