"""The core module, always on: health, the OpenAPI document, the bootstrap answer, the
home page, the shop's brand and the admin console's own pages (dashboard, server-error
lookup)."""

from __future__ import annotations

from pyramid.events import BeforeRender

from cmsshop.cache import clear_with_answers
from cmsshop.content import KEPT
from cmsshop.views.core import brand, brand_openapi, openapi

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
    # The shop's brand: its console page, its JSON twin and the accent's stylesheet.
    "core.admin_brand": "/api/admin/settings/brand",
    "pages.admin_brand": "/admin/brand",
    "pages.admin_brand_logo": "/admin/brand/logo",
    "pages.admin_brand_logo_remove": "/admin/brand/logo/remove",
    "pages.admin_brand_featured": "/admin/brand/featured",
    "pages.theme_css": "/theme/{accent}.css",
    # Findability (views/core/seo.py): what crawlers read first.
    "core.robots": "/robots.txt",
    "core.sitemap": "/sitemap.xml",
}


# The home page, kept for anonymous visitors by the answer cache (cmsshop.cache).
CACHED_PAGES = {"pages.home": ()}


def includeme(config) -> None:
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.add_cached_pages(CACHED_PAGES)
    config.add_openapi(paths=openapi.OPENAPI_PATHS, schemas=openapi.OPENAPI_SCHEMAS)
    config.add_openapi(paths=brand_openapi.OPENAPI_PATHS, schemas=brand_openapi.OPENAPI_SCHEMAS)
    config.add_page_notices(brand.NOTICES)
    # After cmsshop.web's globals (included first): the seller's shop name replaces the
    # configured one on every page.
    config.add_subscriber(brand.add_brand_globals, BeforeRender)
    # The catalogue's totals and the brand, kept per content version, are emptied with the
    # answer caches (a test that empties the tables behind the triggers' back).
    clear_with_answers(KEPT)
    config.scan("cmsshop.views.core")
