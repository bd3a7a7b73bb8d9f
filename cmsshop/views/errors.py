"""The single exception view and the error-shaping helpers it needs (the tweens that
log requests, refuse hostile input and answer what escapes every view are in
cmsshop.tweens).

Every response under /api, errors included, is JSON with code, title, message, hints and
supportCode. Outside /api (the web pages) the same error renders as a friendly HTML page
with the support code, and a page that needs a login redirects to the login page. The
view is registered for both Exception and HTTPException: with Exception alone Pyramid's
own 404/403 would still render as text.
"""

from __future__ import annotations

import functools
import html
import itertools
import json
import logging
import re
import secrets
import traceback
from urllib.parse import urlencode

from pyramid.exceptions import BadCSRFOrigin, BadCSRFToken, PredicateMismatch
from pyramid.httpexceptions import HTTPException, HTTPForbidden, HTTPNotFound
from pyramid.renderers import render_to_response
from pyramid.response import Response
from pyramid_retry import (
    is_error_retryable,
    is_last_attempt,
    mark_error_retryable,
)
from sqlalchemy.exc import OperationalError

from cmsshop import errors as E
from cmsshop.db import is_database_unavailable, is_nul_refused, is_retryable_db_error
from cmsshop.security import ScopeDenied
from cmsshop.services.support.codes import new_support_code, record_server_error
from cmsshop.views.shared.forms import see_other
from cmsshop.web import is_api_path

log = logging.getLogger("cmsshop.request")
REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


# New request ids: this process's random prefix and a counter -- unique across processes
# and restarts (64 random bits), and without a system call per request as uuid4() has.
# They name a request in the logs; they are not secrets.
_ID_PREFIX = secrets.token_hex(8)
_ID_COUNTER = itertools.count(1)


def request_id(request) -> str:
    """The X-Request-ID of the client (if sane) or a new one; stable across retries."""
    environ = request.environ
    rid = environ.get("cmsshop.request_id")
    if rid is None:
        supplied = environ.get("HTTP_X_REQUEST_ID", "")
        rid = supplied if REQUEST_ID.match(supplied) else f"{_ID_PREFIX}{next(_ID_COUNTER):016x}"
        environ["cmsshop.request_id"] = rid
    return rid


def raw_path(request) -> str:
    """The request path as the WSGI server gave it. Unlike ``request.path`` it never
    raises: a path that is not valid UTF-8 must still get (and log) a JSON error."""
    environ = request.environ
    return (environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", ""))[:2048]


def _allowed_methods(request) -> list[str]:
    """Methods that some view of the matched route accepts (for 405 + Allow)."""
    route = getattr(request, "matched_route", None)
    if route is None:
        return []
    methods: set[str] = set()
    for intr in request.registry.introspector.get_category("views") or []:
        view = intr["introspectable"]
        if view.get("route_name") == route.name and not view.get("context"):
            view_methods = view.get("request_methods") or ()
            methods.update([view_methods] if isinstance(view_methods, str) else view_methods)
    return sorted(methods)


def to_api_error(request, exc: BaseException) -> E.ApiError:
    """Map any exception to an ApiError; unknown ones become a generic 500."""
    if isinstance(exc, E.ApiError):
        return exc
    if isinstance(exc, UnicodeDecodeError):
        return E.MalformedRequest(
            "The URL, query string or form is not valid UTF-8.",
            hints=["Percent-encode UTF-8 bytes only."],
        )
    if isinstance(exc, BadCSRFToken | BadCSRFOrigin):
        return E.CsrfFailed()
    if isinstance(exc, HTTPForbidden):
        denied = getattr(exc, "result", None)
        if isinstance(denied, ScopeDenied):
            return E.InsufficientScope(denied.scope)
        return E.NotAuthenticated() if request.user is None else E.Forbidden()
    if isinstance(exc, PredicateMismatch):
        allowed = _allowed_methods(request)
        if allowed and request.method not in allowed:
            return E.ApiError(
                f"{request.method} is not allowed here; use {', '.join(allowed)}.",
                code="method_not_allowed",
                headers={"Allow": ", ".join(allowed)},
            )
        return E.NotFound("No route matches this request.", code="not_found")
    if isinstance(exc, HTTPNotFound):
        return E.NotFound("No route matches this path.", code="not_found")
    if isinstance(exc, HTTPException):
        # Use .code as a status only for HTTPException: SQLAlchemy errors carry a
        # string .code too.
        title = exc.title or "Error"
        code = re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_") or "error"
        headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
        return E.ApiError(
            exc.explanation or title, status=exc.code, code=code, title=title, headers=headers
        )
    if is_nul_refused(exc):
        # PostgreSQL cannot hold NUL in text. Bodies never get here (StrictString refuses
        # NUL) and routes check their path segments, but one that passes a NUL through
        # must still answer as a bad request, not a 500.
        return E.MalformedRequest("The request contains a NUL character.")
    if is_database_unavailable(exc) or isinstance(exc, OperationalError):
        # A "locked" error on the last attempt lands here too: the database is too busy.
        return E.DatabaseUnavailable()
    return E.ApiError(
        "An unexpected error occurred. Quote the support code when you contact us.",
        code="internal_error",
        hints=["Try again later; if it persists, send us the support code."],
    )


PAGE_FALLBACK = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>
<body><main><h1>{title}</h1><p>{message}</p><p>Support code: <code>{code}</code></p>
<p><a href="/">Home</a></p></main></body></html>
"""


def page_error_response(request, exc: BaseException, error: E.ApiError, support_code: str):
    """The friendly HTML page of an error outside /api (never a traceback)."""
    if isinstance(exc, HTTPForbidden) and not isinstance(exc, BadCSRFToken | BadCSRFOrigin):
        user = request.__dict__.get("user")
        if user is None and request.method in ("GET", "HEAD"):
            # A page that needs a login: log in, then come back.
            query = urlencode({"next": request.path_qs[:1000]})
            return see_other(request, f"/login?{query}")
    user = request.__dict__.get("user")
    if error.status < 500 and "user" not in request.__dict__:
        # The navigation shows who is logged in; after a 5xx only a user already loaded
        # is shown, as the database may be what failed.
        try:
            user = request.user
        except Exception:  # noqa: BLE001 - the page shows no user then
            user = None
    values = {"error": error, "support_code": support_code, "user": user}
    try:
        response = render_to_response("errors/error.html", values, request=request)
    except Exception:  # noqa: BLE001 - the error page itself must never fail
        log.exception("the error page failed to render for %s", error.code)
        body = PAGE_FALLBACK.format(
            title=html.escape(error.title), message=html.escape(error.message), code=support_code
        )
        response = Response(body, content_type="text/html", charset="utf-8")
    response.status = error.status
    return response


def error_response(request, exc: BaseException) -> Response:
    """The JSON error answer for ``exc``; a 5xx is logged and stored with its support code."""
    error = to_api_error(request, exc)
    support_code = new_support_code()
    body = {
        "code": error.code,
        "title": error.title,
        "message": error.message,
        "hints": list(error.hints),
        "supportCode": support_code,
        **error.extra,
    }
    if is_api_path(request.environ.get("PATH_INFO", "")):
        response = Response(
            json.dumps(body).encode(),
            status=error.status,
            content_type="application/json",
            charset=None,
        )
    else:
        response = page_error_response(request, exc, error, support_code)
    for name, value in error.headers.items():
        response.headers[name] = value
    response.headers["Cache-Control"] = "no-store"
    request.environ["cmsshop.support_code"] = support_code
    if error.status >= 500 and error.recorded:
        tb = "".join(traceback.format_exception(exc)) if not isinstance(exc, E.ApiError) else None
        log.error(
            "server error %s %s %s -> %s (%s)",
            support_code,
            request.method,
            raw_path(request),
            error.status,
            type(exc).__name__,
            exc_info=exc if tb else None,
        )
        record = functools.partial(
            record_server_error,
            request.registry,
            support_code=support_code,
            request_id=request_id(request),
            method=request.method,
            path=raw_path(request),
            status=error.status,
            error_code=error.code,
            exception_type=f"{type(exc).__module__}.{type(exc).__qualname__}",
            traceback=tb,
        )
        # Stored once the server has taken the body: after pyramid_tm has aborted the
        # request's transaction (on SQLite its write lock would block the record's own
        # transaction), and without making the client wait when the database is the
        # failure. Every 5xx, from the exception view or the last-resort policy, passes
        # here.
        response.app_iter = _CloseHook([response.body], record)
    return response


class _CloseHook:
    """A WSGI body that calls ``on_close`` when the server closes it (PEP 3333 promises
    ``close()`` is called whether or not the body was sent in full)."""

    def __init__(self, chunks: list[bytes], on_close):
        self._chunks = chunks
        self._on_close = on_close

    def __iter__(self):
        return iter(self._chunks)

    def close(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()


def _will_retry(request, exc) -> bool:
    """Whether pyramid_retry will run this request again for ``exc``.

    This view runs inside pyramid_tm, so exceptions have not yet passed the place where
    pyramid_tm asks the transaction (and zope.sqlalchemy) whether they are transient
    (PostgreSQL serialization failures, deadlocks): ask here.
    """
    if is_last_attempt(request):
        return False
    if is_error_retryable(request, exc) or is_retryable_db_error(exc):
        return True
    try:
        return bool(request.tm.get().isRetryableError(exc))
    except Exception:  # noqa: BLE001 - no transaction: nothing to retry
        return False


def exception_view(exc, request):
    if _will_retry(request, exc):
        # pyramid_retry discards this response and runs the request again; no support
        # code and no record for an attempt nobody sees.
        mark_error_retryable(exc)
        return Response(status=500)
    if isinstance(exc, HTTPException) and exc.code < 400:
        return exc  # redirects and 304s pass through untouched
    return error_response(request, exc)


def includeme(config) -> None:
    for context in (Exception, HTTPException):
        config.add_exception_view(exception_view, context=context)
