"""The legal module, always on: the shop's legal pages (terms of sale, privacy policy,
legal notice, refund policy) as versioned CMS pages, their console and admin API, and
the ``legal_links`` every page's footer lists. Always on, since a shop that sells needs
its terms and notices whatever else is switched on (checkout asks for the terms)."""

from __future__ import annotations

from pyramid.events import BeforeRender

from cmsshop.views.legal import admin_pages, openapi
from cmsshop.views.legal.pages import add_legal_links

ROUTES = {
    "legal.admin_documents": "/api/admin/legal",
    "legal.admin_document": "/api/admin/legal/{kind}",
    # The web pages: the public page of each kind and its console.
    "pages.legal": "/legal/{kind}",
    "pages.admin_legal": "/admin/legal",
    "pages.admin_legal_edit": "/admin/legal/{kind}",
    "pages.admin_legal_version": "/admin/legal/{kind}/versions/{version}",
}


def includeme(config) -> None:
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.add_openapi(paths=openapi.ADMIN_PATHS, schemas=openapi.ADMIN_SCHEMAS)
    config.add_page_notices(admin_pages.NOTICES)
    config.add_subscriber(add_legal_links, BeforeRender)
    config.scan("cmsshop.views.legal")
