"""Every tween and the execution policy, in one place.

From the WSGI server inwards, a request passes:

1. the execution policy (``execution_policy``): refuses a declared body over the limit
   before pyramid_retry spools it, runs pyramid_retry's attempts (``back_off_before_retry``
   pauses between them), and answers JSON for whatever escapes every view;
2. the security headers tween (cmsshop.web): outermost, so every answer carries them;
3. the request log tween: one log line per request and its X-Request-ID, outside the
   cache so that cached answers are logged too;
4. the answer cache tween (cmsshop.cache, under the request log, over pyramid_tm): a hit
   opens no transaction;
5. pyramid_tm's transaction, then Pyramid's exception view tween;
6. the edge check tween (over MAIN, inside the exception view tween), so that its 400 or
   413 renders like any other error; then the view.

The cache and security-headers tweens stay beside the code they serve; this module
registers the rest.
"""

from __future__ import annotations

import json
import logging
import random
import re
import time

from pyramid.response import Response
from pyramid.tweens import MAIN
from pyramid_retry import IBeforeRetry, RetryableExecutionPolicy

from cmsshop import errors as E
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


def check_body_length(settings, environ) -> None:
    """413 for a declared Content-Length over the limit: multipart uploads have
    cmsshop.max_upload_bytes, everything else cmsshop.max_body_bytes."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    is_upload = environ.get("CONTENT_TYPE", "").startswith("multipart/form-data")
    limit = settings.get("cmsshop.max_upload_bytes") if is_upload else None
    limit = limit or settings["cmsshop.max_body_bytes"]
    if length > limit:
        raise E.PayloadTooLarge(f"The body is larger than {limit} bytes.")


def edge_check_tween_factory(handler, registry):
    """Refuse hostile input before any view sees it: a declared body over the route's
    limit (413, before the body is read) and control characters in headers and query
    values."""
    settings = registry.settings

    def edge_check_tween(request):
        check_body_length(settings, request.environ)
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
            # declared body is refused unread, never spooled.
            check_body_length(router.registry.settings, environ)
            return retry_policy(environ, router)
        except Exception as exc:  # noqa: BLE001 - last resort, logged with a support code
            try:
                with router.request_context(environ) as request:
                    response = error_response(request, exc)
                    response.headers["X-Request-ID"] = request_id(request)
                    return response
            except Exception:  # noqa: BLE001 - even the error path failed: still JSON
                log.exception("the error path failed for %s", type(exc).__name__)
                return Response(
                    LAST_RESORT_BODY, status=500, content_type="application/json", charset=None
                )

    return policy


def back_off_before_retry(event) -> None:
    """Jittered pause before a retry, so racing requests do not collide again at once
    (on SQLite a lost write race is retried; without a pause the retries race too)."""
    attempt = event.environ.get("retry.attempt", 0)
    time.sleep(random.uniform(0, 0.02 * (2**attempt)))


def includeme(config) -> None:
    config.add_subscriber(back_off_before_retry, IBeforeRetry)
    config.add_tween("cmsshop.tweens.request_log_tween_factory")
    # Inside the exception view tween, so a 400 or 413 renders like any other error.
    config.add_tween("cmsshop.tweens.edge_check_tween_factory", over=MAIN)
    config.set_execution_policy(execution_policy(config.get_settings()["retry.attempts"]))
