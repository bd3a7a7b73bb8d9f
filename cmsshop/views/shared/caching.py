"""Answer caching at the edge: public catalogue and docs answers carry an ETag and may be
kept by the answer cache; admin answers hold drafts and are never stored."""

from __future__ import annotations

from cmsshop.cache import CACHEABLE
from cmsshop.views.shared.json import json_with_etag


def cached_json(request, body: dict):
    """A public catalogue or docs answer: JSON with an ETag, cached for
    cmsshop.public_max_age seconds. The answer cache keeps it only on a route its module
    declared with ``config.add_cached_routes`` (with every query parameter the view reads)."""
    max_age = request.registry.settings["cmsshop.public_max_age"]
    request.environ[CACHEABLE] = True  # the same for every visitor: the answer cache may keep it
    return json_with_etag(request, body, max_age=max_age)


CACHE_HEADERS = {
    "ETag": {"schema": {"type": "string"}, "description": "Strong validator of the body"},
    "Cache-Control": {"schema": {"type": "string"}},
}
IF_NONE_MATCH = {
    "name": "If-None-Match",
    "in": "header",
    "required": False,
    "schema": {"type": "string"},
    "description": "An ETag from an earlier answer; a match answers 304 with no body.",
}


def cached_ok(schema: dict) -> dict:
    """200 with ETag/Cache-Control, and the 304 of a matching If-None-Match."""
    response = {
        "200": {
            "description": "OK",
            "headers": CACHE_HEADERS,
            "content": {"application/json": {"schema": schema}},
        },
        "304": {"description": "Not modified", "headers": CACHE_HEADERS},
    }
    return response


def shared_page(request) -> None:
    """This HTML page is the same for every anonymous visitor (but for the CSRF token,
    which the answer cache fills in for each): the cache may keep it, on a page route its
    module declared with ``config.add_cached_pages``, rendered for nobody in particular
    (cmsshop.cache.render_shared). A page the view renders for a logged-in visitor or
    with a flash notice is never stored: the cache does not even look those requests up."""
    request.environ[CACHEABLE] = True


def no_store(request) -> None:
    """Admin answers hold drafts: never let a shared cache keep them."""
    request.response.cache_control = "no-store"
