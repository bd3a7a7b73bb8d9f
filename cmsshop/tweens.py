"""Every tween and the execution policy, in one place.

From the WSGI server inwards, a request passes:

1. the execution policy (``execution_policy``): refuses a body over the request's limit
   (``check_body``) and an upload by anyone but an admin before pyramid_retry spools it,
   runs pyramid_retry's attempts (``back_off_before_retry`` pauses between them), and
   answers JSON for whatever escapes every view;
2. the security headers tween (cmsshop.web): outermost, so every answer carries them;
3. the request log tween: one log line per request and its X-Request-ID, outside the
   cache so that cached answers are logged too;
4. the answer cache tween (cmsshop.cache, under the request log, over pyramid_tm): a hit
   opens no transaction;
5. pyramid_tm's transaction, then Pyramid's exception view tween;
6. the edge check tween (over MAIN, inside the exception view tween), so that its 400
   renders like any other error; then the view.

The cache and security-headers tweens stay beside the code they serve; this module
registers the rest.
"""

from __future__ import annotations

import json
import logging
import random
import re
import time

from pyramid.interfaces import IRoutesMapper
from pyramid.response import Response
from pyramid.tweens import MAIN
from pyramid_retry import IBeforeRetry, RetryableExecutionPolicy

from cmsshop import errors as E
from cmsshop.security import ADMIN, session_role
from cmsshop.views.errors import error_response, raw_path, request_id

log = logging.getLogger("cmsshop.request")


def request_log_tween_factory(handler, registry):
    """One log line per request with its id; the id is echoed in X-Request-ID."""

    def request_log_tween(request):
        started = time.perf_counter()
        rid = request_id(request)
        status = 500
        try:
            response = handler(request)
            status = response.status_code
            response.headers["X-Request-ID"] = rid
            return response
        finally:
            if log.isEnabledFor(logging.INFO):
                support_code = request.environ.get("cmsshop.support_code")
                # Logger.info would walk the stack for the caller's file and line (which
                # no cmsshop format shows): a third of the line's cost, per request.
                log.handle(
                    log.makeRecord(
                        log.name,
                        logging.INFO,
                        __file__,
                        0,
                        "%s %s %s %d %.1fms%s",
                        (
                            rid,
                            request.method,
                            raw_path(request)[:300],
                            status,
                            (time.perf_counter() - started) * 1000,
                            f" support={support_code}" if support_code else "",
                        ),
                        None,
                    )
                )

    return request_log_tween


# Control characters have no business in a query value or a header: NUL breaks
# PostgreSQL text and C0 controls forge log lines. Tab is allowed in headers, tab and line
# breaks in query values (a search box may send them; routes validate further). Path
# segments are left to their routes, which answer 404 or 403 for an impossible name (and
# never pass one to the database), and bodies to their parsers (StrictString refuses NUL
# and lone surrogates in JSON and forms; webhooks keep the raw bytes of what they reject).
QUERY_UNSAFE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
PATH_UNSAFE = re.compile(r"[\x00-\x1f\x7f]")
HEADER_UNSAFE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def check_request_text(request) -> None:
    """Refuse control characters in the path and headers (400 malformed_request) and in
    query values (422 validation_failed, as the routes' own checks do), whatever route
    they are for."""
    # PATH_INFO is the raw bytes as latin-1: a control byte is the same character there.
    if PATH_UNSAFE.search(request.environ.get("PATH_INFO", "")):
        raise E.MalformedRequest(
            "The path contains control characters.",
            hints=["Percent-encoded control characters (%00, %0a...) are not valid in paths."],
        )
    if not headers_are_safe(request):
        raise E.MalformedRequest(
            "A header contains control characters.",
            hints=["Send header values without control characters."],
        )
    try:
        fields = list(request.GET.items())
    except UnicodeDecodeError:
        return  # not UTF-8: the route (or the exception view) answers 400
    errors = {
        name: "must not contain control characters"
        for name, value in fields
        if QUERY_UNSAFE.search(name) or QUERY_UNSAFE.search(value)
    }
    if errors:
        raise E.ValidationFailed(errors)


def headers_are_safe(request) -> bool:
    """No control characters in any header's name or value (tab allowed in values).
    Reads the WSGI environ directly (one regex over all headers): it runs per request."""
    texts = [
        f"{key}{value}"
        for key, value in request.environ.items()
        if key.startswith("HTTP_") or key in ("CONTENT_TYPE", "CONTENT_LENGTH")
    ]
    return not HEADER_UNSAFE.search("".join(texts))


# --- body limits ---------------------------------------------------------------------------
#
# Every body is held to cmsshop.max_body_bytes, except a POST to a release-upload route
# (declared by its module with add_upload_route) whose Cookie header names an admin's
# live session: that one may reach cmsshop.max_upload_bytes. Anyone else's upload is
# answered 401 or 403 from the headers, its body unread. The WSGI server applies the same
# rule while it receives the body (cmsshop/server.py); the execution policy applies it
# again for any other server and for WebTest.


def add_upload_route(config, route_name: str) -> None:
    """Let admins' POSTs to ``route_name`` carry bodies up to cmsshop.max_upload_bytes."""
    config.registry.setdefault("cmsshop.upload_routes", []).append(route_name)


def is_upload_request(registry, environ) -> bool:
    """A POST to a release-upload route (from the method and path alone)."""
    if environ.get("REQUEST_METHOD") != "POST" or not registry.get("cmsshop.upload_routes"):
        return False
    try:
        path = environ.get("PATH_INFO", "").encode("latin-1").decode("utf-8")
    except UnicodeError:
        return False  # no route matches it: the router answers
    mapper = registry.getUtility(IRoutesMapper)
    for name in registry["cmsshop.upload_routes"]:
        route = mapper.get_route(name)
        if route is not None and route.match(path) is not None:
            return True
    return False


def body_limit(registry, environ) -> int:
    """The most body bytes this request may send; 401 or 403 for an upload by anyone but
    an admin (before a byte of its body is read)."""
    settings = registry.settings
    if is_upload_request(registry, environ):
        role = session_role(registry, environ)
        if role is None:
            raise E.NotAuthenticated()
        if role != ADMIN:
            raise E.Forbidden()
        return settings["cmsshop.max_upload_bytes"]
    return settings["cmsshop.max_body_bytes"]


def check_body(registry, environ) -> None:
    """413 for a declared Content-Length over the request's limit; a body without one
    (chunked) is read through :class:`BoundedInput`, so it fails as soon as it passes."""
    limit = body_limit(registry, environ)
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > limit:
        raise E.PayloadTooLarge(f"The body is larger than {limit} bytes.")
    if not environ.get("CONTENT_LENGTH") and environ.get("wsgi.input_terminated"):
        environ["wsgi.input"] = BoundedInput(environ["wsgi.input"], limit)


class BoundedInput:
    """``wsgi.input`` of a body of unknown length: 413 once more than ``limit`` bytes
    have been read, before the rest is read or spooled."""

    def __init__(self, stream, limit: int):
        self.stream, self.limit, self.received = stream, limit, 0

    def _count(self, data: bytes) -> bytes:
        self.received += len(data)
        if self.received > self.limit:
            raise E.PayloadTooLarge(f"The body is larger than {self.limit} bytes.")
        return data

    def read(self, size: int = -1) -> bytes:
        # Never ask for more than one byte past the limit: an unbounded read() would take
        # the whole body into memory first.
        room = self.limit - self.received + 1
        return self._count(self.stream.read(room if size is None or size < 0 else min(size, room)))

    def readline(self, size: int = -1) -> bytes:
        room = self.limit - self.received + 1
        return self._count(self.stream.readline(room if size < 0 else min(size, room)))

    def __iter__(self):
        return iter(self.readline, b"")


def edge_check_tween_factory(handler, registry):
    """Refuse hostile input before any view sees it: control characters in headers and
    query values (the body's size was checked by the execution policy, unread)."""

    def edge_check_tween(request):
        check_request_text(request)
        return handler(request)

    return edge_check_tween


LAST_RESORT_BODY = json.dumps(
    {
        "code": "internal_error",
        "title": "Internal server error",
        "message": "An unexpected error occurred.",
        "hints": ["Try again later."],
        "supportCode": None,
    }
).encode()


def execution_policy(attempts: int):
    """pyramid_retry's policy, plus a JSON answer for what escapes every view.

    Errors raised while pyramid_tm commits (after the view returned) pass no exception
    view; on the last attempt pyramid_retry re-raises them to the WSGI server, which would
    answer with a text page. Here they become the usual JSON error instead.
    """
    retry_policy = RetryableExecutionPolicy(attempts=attempts)

    def policy(environ, router):
        try:
            # Before pyramid_retry copies the body to make it seekable: an oversized
            # declared body, or an upload by anyone but an admin, is refused unread.
            check_body(router.registry, environ)
            return retry_policy(environ, router)
        except Exception as exc:  # noqa: BLE001 - last resort, logged with a support code
            try:
                with router.request_context(environ) as request:
                    response = error_response(request, exc)
                    response.headers["X-Request-ID"] = request_id(request)
                    # Outside the security headers tween: its one header for every answer.
                    response.headers["X-Content-Type-Options"] = "nosniff"
                    return response
            except Exception:  # noqa: BLE001 - even the error path failed: still JSON
                log.exception("the error path failed for %s", type(exc).__name__)
                response = Response(
                    LAST_RESORT_BODY, status=500, content_type="application/json", charset=None
                )
                response.headers["Cache-Control"] = "no-store"
                response.headers["X-Content-Type-Options"] = "nosniff"
                return response

    return policy


def back_off_before_retry(event) -> None:
    """Jittered pause before a retry, so racing requests do not collide again at once
    (on SQLite a lost write race is retried; without a pause the retries race too)."""
    attempt = event.environ.get("retry.attempt", 0)
    time.sleep(random.uniform(0, 0.02 * (2**attempt)))


def includeme(config) -> None:
    config.add_subscriber(back_off_before_retry, IBeforeRetry)
    config.add_tween("cmsshop.tweens.request_log_tween_factory")
    # Inside the exception view tween, so a 400 renders like any other error.
    config.add_tween("cmsshop.tweens.edge_check_tween_factory", over=MAIN)
    config.set_execution_policy(execution_policy(config.get_settings()["retry.attempts"]))
