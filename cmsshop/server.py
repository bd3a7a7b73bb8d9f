"""The production HTTP server: waitress, refusing oversized bodies as soon as the headers
say so.

Waitress reads a whole request body (spooling it to a temporary file past
``inbuf_overflow``) before the app sees the request, and its one
``max_request_body_size`` applies to every route. Release uploads need hundreds of
megabytes while a JSON route needs one, so with plain waitress a client could make the
server spool up to the upload limit on any route before the app's 413. Here the parser
applies the app's own limits the moment the headers are complete -- multipart bodies
``cmsshop.max_upload_bytes``, everything else ``cmsshop.max_body_bytes`` -- and answers
413 JSON without reading a byte of the body. The app keeps its own check for servers
that are not this one (and for WebTest).

Used from the inis' ``[server:main]`` as ``use = call:cmsshop.server:server_factory``.
"""

from __future__ import annotations

import json

import waitress
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.server import BaseWSGIServer
from waitress.utilities import Error

from cmsshop.services.support.codes import new_support_code


class JsonPayloadTooLarge(Error):
    """waitress's 413, in the API's error shape."""

    code = 413
    reason = "Payload Too Large"

    def to_response(self, ident=None):
        body = {
            "code": "payload_too_large",
            "title": "Request body too large",
            "message": f"The body is larger than {self.body} bytes.",
            "hints": [],
            "supportCode": new_support_code(),
        }
        headers = [("Content-Type", "application/json"), ("Cache-Control", "no-store")]
        return f"{self.code} {self.reason}", headers, json.dumps(body).encode()


def limited_channel(json_limit: int, upload_limit: int) -> type[HTTPChannel]:
    """A waitress channel whose parser refuses a declared body over the route's limit."""

    class LimitedParser(HTTPRequestParser):
        def received(self, data):
            had_headers = self.headers_finished
            consumed = super().received(data)
            if self.headers_finished and not had_headers and not self.error:
                content_type = self.headers.get("CONTENT_TYPE", "")
                is_upload = content_type.startswith("multipart/form-data")
                limit = upload_limit if is_upload else json_limit
                if self.content_length > limit:
                    self.error = JsonPayloadTooLarge(limit)
                    self.completed = True
            return consumed

    class LimitedChannel(HTTPChannel):
        parser_class = LimitedParser

    return LimitedChannel


def create_server(app, json_limit: int, upload_limit: int, **adjustments):
    """waitress.create_server with per-kind body limits (see the module docstring)."""
    socket_map: dict = {}
    server = waitress.create_server(app, map=socket_map, **adjustments)
    channel = limited_channel(json_limit, upload_limit)
    for dispatcher in [server, *socket_map.values()]:
        if isinstance(dispatcher, BaseWSGIServer):
            dispatcher.channel_class = channel
    return server


def app_limits(app, fallback: int | None = None) -> tuple[int, int]:
    """The JSON and upload body limits of a cmsshop app's settings; ``fallback`` for both
    when ``app`` is wrapped (a paste filter) and its settings cannot be seen."""
    registry = getattr(app, "registry", None)
    if registry is None:
        limit = fallback or Adjustments.max_request_body_size
        return limit, limit
    settings = registry.settings
    json_limit = settings["cmsshop.max_body_bytes"]
    return json_limit, settings.get("cmsshop.max_upload_bytes") or json_limit


def server_factory(global_conf, **adjustments):
    """PasteDeploy server factory (``pserve``): waitress with the app's body limits."""

    def serve(app) -> None:
        fallback = Adjustments(**adjustments).max_request_body_size
        server = create_server(app, *app_limits(app, fallback), **adjustments)
        server.print_listen("Serving on http://{}:{}")
        server.run()

    return serve
