"""The stored renditions of product images, at /media/<sha256>.<ext>.

The URL names the bytes, so an answer never changes: a year's public, immutable cache
and the hash as a strong ETag. ``nosniff`` because the bytes are only ever pictures
drawn by services/store/media.py, and a browser must never be talked into reading them
as anything else.
"""

from __future__ import annotations

from pyramid.httpexceptions import HTTPNotFound
from pyramid.response import Response
from pyramid.view import view_config

from cmsshop.services.store import media

CACHE_FOREVER = "public, max-age=31536000, immutable"


@view_config(route_name="media.file", request_method="GET")
def media_file(request):
    stored = media.read_media(request.db, request.matchdict["key"])
    if stored is None:
        raise HTTPNotFound("No such picture.")
    response = Response(body=stored.data, content_type=stored.content_type, charset=None)
    response.cache_control = CACHE_FOREVER
    response.etag = stored.key.partition(".")[0]
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.conditional_response = True
    return response
