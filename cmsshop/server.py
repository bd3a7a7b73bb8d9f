"""The production HTTP server: waitress, holding each body to its route's limit while
it is received.

Waitress reads a whole request body (spooling it to a temporary file past
``inbuf_overflow``) before the app sees the request, and its one
``max_request_body_size`` (the inis set it to the upload limit) applies to every route
and to chunked bodies, which declare no length. Here the parser applies the app's own
rule (cmsshop/tweens.py, body limits) as the body arrives:

- every body may have ``cmsshop.max_body_bytes``: a larger declared Content-Length is
  answered 413 JSON from the headers, and a chunked body the moment its bytes pass the
  limit -- the rest is never read;
- a POST to a release-upload route may have ``cmsshop.max_upload_bytes`` if its Cookie
  header names an admin's live session. That takes a database lookup, which runs on a
  worker thread while the connection stops reading (no body byte is read meanwhile);
  anyone else's upload goes to the app without its body and with ``Connection: close``,
  and the app answers 401 or 403 from the headers as it would for any server.

The app keeps its own check for servers that are not this one (and for WebTest).

Used from the inis' ``[server:main]`` as ``use = call:cmsshop.server:server_factory``.
"""

from __future__ import annotations

import json
import logging

import waitress
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.server import BaseWSGIServer
from waitress.utilities import Error

from cmsshop.security import ADMIN, session_role
from cmsshop.services.support.codes import new_support_code
from cmsshop.tweens import is_upload_request

log = logging.getLogger(__name__)


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
        headers = [
            ("Content-Type", "application/json"),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
        ]
        return f"{self.code} {self.reason}", headers, json.dumps(body).encode()


class BodyRule:
    """The app's body rule, asked from waitress's I/O thread (cheap checks) and from a
    worker thread (the session lookup)."""

    def __init__(self, app, json_limit: int, upload_limit: int):
        # A wrapped app (a paste filter) hides its registry: one limit for every body.
        self.registry = getattr(app, "registry", None)
        self.json_limit, self.upload_limit = json_limit, upload_limit

    def is_upload(self, environ) -> bool:
        return self.registry is not None and is_upload_request(self.registry, environ)

    def is_admin(self, environ) -> bool:
        try:
            return session_role(self.registry, environ) == ADMIN
        except Exception:  # noqa: BLE001 - the app answers (503) when it sees the request
            log.warning("the session of an upload could not be looked up", exc_info=True)
            return False


def limited_channel(rule: BodyRule) -> type[HTTPChannel]:
    """A waitress channel whose parser holds each body to the request's limit."""

    class LimitedParser(HTTPRequestParser):
        limit = rule.json_limit
        # An upload's session is being looked up: body bytes received meanwhile are held,
        # and the channel reads no more.
        checking = False
        check_started = False
        held = b""
        wanted_continue = False

        def received(self, data):
            if self.checking:
                self.held += data
                return len(data)
            had_headers = self.headers_finished
            consumed = super().received(data)
            if self.error or not self.headers_finished:
                return consumed
            if not had_headers:
                self._headers_done()
            elif self.body_rcv is not None and len(self.body_rcv) > self.limit:
                self._refuse()
            return consumed

        def _headers_done(self):
            environ = {
                "REQUEST_METHOD": self.command,
                "PATH_INFO": self.path,
                "HTTP_COOKIE": self.headers.get("COOKIE", ""),
            }
            if not self.completed and rule.is_upload(environ):
                self.checking, self.environ = True, environ
                # No 100 Continue before the session is known to be an admin's.
                self.wanted_continue, self.expect_continue = self.expect_continue, False
            elif self.content_length > self.limit:
                self._refuse()

        def _refuse(self):
            self.error = JsonPayloadTooLarge(self.limit)
            self.completed = True

        def check_done(self, admin: bool) -> bytes:
            """Apply the session check's answer; returns the body bytes held meanwhile."""
            self.checking, held, self.held = False, self.held, b""
            if admin:
                self.limit = rule.upload_limit
                self.expect_continue = self.wanted_continue
                if self.content_length > self.limit:
                    self._refuse()
                return held
            # To the app without a body (it answers 401 or 403 from the headers), then
            # the connection closes with the body unread.
            self.body_rcv = None
            self.headers["CONTENT_LENGTH"] = "0"
            self.headers["CONNECTION"] = "close"
            self.connection_close = True
            self.completed = True
            return b""

    class SessionCheck:
        """A worker-thread task: look up an upload's session, then resume the channel
        on the I/O thread."""

        def __init__(self, channel, parser):
            self.channel, self.parser = channel, parser

        def service(self):
            admin = rule.is_admin(self.parser.environ)
            self.channel.server.trigger.pull_trigger(
                lambda: self.channel.check_done(self.parser, admin)
            )

        def cancel(self):
            pass

    class LimitedChannel(HTTPChannel):
        parser_class = LimitedParser

        def readable(self):
            return super().readable() and not (self.request is not None and self.request.checking)

        def received(self, data):
            result = super().received(data)
            request = self.request
            if request is not None and request.checking and not request.check_started:
                request.check_started = True
                self.server.add_task(SessionCheck(self, request))
            return result

        def check_done(self, parser, admin: bool) -> None:
            if self.request is not parser or not self.connected:
                return  # the client went away meanwhile
            held = parser.check_done(admin)
            if parser.completed:
                with self.requests_lock:
                    self.requests.append(parser)
                    self.request = None
                    if len(self.requests) == 1:
                        self.server.add_task(self)
                return
            if parser.expect_continue and not self.requests and not self.sent_continue:
                self.send_continue()
            if held:
                self.received(held)

    return LimitedChannel


def create_server(app, json_limit: int, upload_limit: int, **adjustments):
    """waitress.create_server applying the app's body rule (see the module docstring)."""
    socket_map: dict = {}
    server = waitress.create_server(app, map=socket_map, **adjustments)
    channel = limited_channel(BodyRule(app, json_limit, upload_limit))
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
