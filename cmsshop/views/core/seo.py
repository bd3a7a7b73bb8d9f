"""Findability: /robots.txt, /sitemap.xml, and what every page's <head> needs from
services/storefront/seo.py (its canonical URL, the default meta description, a
product's JSON-LD)."""

from __future__ import annotations

from xml.sax.saxutils import escape

from pyramid.events import BeforeRender, subscriber
from pyramid.response import Response
from pyramid.view import view_config

from cmsshop.services.storefront import seo
from cmsshop.util import isoformat_z

# Search engines re-read these often; an hour keeps a new product from waiting long.
MAX_AGE = 3600


def page_canonical_url(request) -> str | None:
    """This page's canonical address; None for an error page, a refused form or a page
    robots are kept from (they should not be indexed under any address)."""
    if getattr(request, "exception", None) is not None or request.response.status_int != 200:
        return None
    path = request.path
    if seo.is_disallowed(path):
        return None
    try:
        query = request.GET
    except UnicodeDecodeError:
        return None
    return seo.canonical_url(seo.base_url(request.registry.settings), path, query)


@subscriber(BeforeRender)
def add_seo_globals(event) -> None:
    request = event.get("request")
    if request is None or not str(event.get("renderer_name", "")).endswith(".html"):
        return
    base = seo.base_url(request.registry.settings)
    event.setdefault("canonical_url", page_canonical_url(request))
    event.setdefault("default_description", seo.default_description)
    event.setdefault("shorten", seo.shorten)
    event.setdefault(
        "product_json_ld",
        lambda product, prices, images=(): seo.product_json_ld(base, product, prices, images),
    )


def public_text(request, body: str, content_type: str) -> Response:
    response = Response(body=body.encode(), content_type=content_type, charset="utf-8")
    response.cache_control = f"public, max-age={MAX_AGE}"
    return response


@view_config(route_name="core.robots", request_method="GET")
def robots(request):
    return public_text(
        request, seo.robots_txt(seo.base_url(request.registry.settings)), "text/plain"
    )


@view_config(route_name="core.sitemap", request_method="GET")
def sitemap(request):
    base = seo.base_url(request.registry.settings)
    entries = seo.sitemap_entries(request.db, request.registry.settings["cmsshop.modules"])
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">',
    ]
    for entry in entries:
        modified = (
            f"<lastmod>{isoformat_z(entry.last_modified)}</lastmod>" if entry.last_modified else ""
        )
        lines.append(f"  <url><loc>{escape(base + entry.path)}</loc>{modified}</url>")
    lines.append("</urlset>")
    return public_text(request, "\n".join(lines) + "\n", "application/xml")
