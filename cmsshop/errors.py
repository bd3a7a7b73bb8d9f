"""The API's error vocabulary. Raise these from views and services; the single
exception view in cmsshop.views.errors turns every one into the JSON error body."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error with an HTTP status and a stable machine-readable ``code``.

    ``extra`` is merged into the body (e.g. ``errors`` for 422, ``activationsUsed``);
    ``headers`` are added to the response (e.g. ``Retry-After``).
    """

    status = 400
    code = "bad_request"
    title = "Bad request"
    message = "The request could not be processed."
    hints: tuple[str, ...] = ()

    def __init__(
        self,
        message: str | None = None,
        *,
        status: int | None = None,
        code: str | None = None,
        title: str | None = None,
        hints: list[str] | tuple[str, ...] | None = None,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ):
        self.status = status or self.status
        self.code = code or self.code
        self.title = title or self.title
        self.message = message or self.message
        self.hints = list(hints if hints is not None else self.hints)
        self.extra = dict(extra or {})
        self.headers = dict(headers or {})
        super().__init__(self.message)


class MalformedJson(ApiError):
    status, code, title = 400, "malformed_json", "Malformed JSON"
    message = "The request body is not valid UTF-8 JSON."
    hints = ("Send a JSON object encoded as UTF-8.",)


class UnsupportedMediaType(ApiError):
    status, code, title = 415, "unsupported_media_type", "Unsupported media type"
    message = "This route accepts application/json."
    hints = ("Set Content-Type: application/json.",)


class ValidationFailed(ApiError):
    status, code, title = 422, "validation_failed", "Validation failed"
    message = "Some fields are missing or invalid."
    hints = ("See `errors` for a message per field.",)

    def __init__(self, errors: dict[str, str], message: str | None = None, **kwargs):
        super().__init__(message, extra={"errors": errors}, **kwargs)


class NotAuthenticated(ApiError):
    status, code, title = 401, "not_authenticated", "Login required"
    message = "You need to be logged in to do this."
    hints = ("Log in with POST /api/auth/login and send the session cookie.",)


class Forbidden(ApiError):
    status, code, title = 403, "forbidden", "Forbidden"
    message = "Your account is not allowed to do this."


class CsrfFailed(ApiError):
    status, code, title = 403, "csrf_failed", "CSRF token missing or stale"
    message = "State-changing requests need the current CSRF token."
    hints = ("Read csrfToken from GET /api/auth/session and send it as X-CSRF-Token.",)


class NotFound(ApiError):
    status, code, title = 404, "not_found", "Not found"
    message = "Nothing is here."


class Conflict(ApiError):
    status, code, title = 409, "conflict", "Conflict"


class PayloadTooLarge(ApiError):
    status, code, title = 413, "payload_too_large", "Request body too large"
    message = "The request body is larger than this route accepts."


class RateLimited(ApiError):
    status, code, title = 429, "rate_limited", "Too many requests"
    message = "Too many requests; wait before trying again."

    def __init__(self, retry_after: int, message: str | None = None, **kwargs):
        kwargs.setdefault("hints", [f"Retry after {retry_after} seconds."])
        headers = {"Retry-After": str(max(1, int(retry_after)))}
        super().__init__(message, headers=headers, **kwargs)
        self.extra.setdefault("retryAfter", max(1, int(retry_after)))


class ServiceUnavailable(ApiError):
    status, code, title = 503, "service_unavailable", "Service unavailable"
    message = "A service this request depends on is unavailable; try again shortly."

    def __init__(self, message: str | None = None, retry_after: int | None = 30, **kwargs):
        headers = kwargs.pop("headers", {}) or {}
        if retry_after:
            headers["Retry-After"] = str(retry_after)
        super().__init__(message, headers=headers, **kwargs)
