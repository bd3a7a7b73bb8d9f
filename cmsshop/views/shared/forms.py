"""HTML forms on the same validation as the JSON API.

A page view reads its form with the colander schema of the matching JSON route, so a
field is refused for the same reason in both; the page then re-renders with what was
typed and a message per field. Errors a service raises as ``ValidationFailed`` (a
checkout of an unknown currency, a taken email) land on their fields the same way.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, urlsplit

import colander
from pyramid.httpexceptions import HTTPSeeOther

from cmsshop.errors import ApiError, ValidationFailed
from cmsshop.views.shared.json import flatten_errors
from cmsshop.web import set_flash


class FormInvalid(Exception):
    """The form's fields did not validate: ``errors`` by field, ``form`` as typed."""

    def __init__(self, errors: dict[str, str], form: dict[str, Any]):
        super().__init__(errors)
        self.errors = errors
        self.form = form


def posted_value(request, name: str) -> str:
    """The posted value of ``name`` as typed ("" if absent; the last of a repeated one)."""
    values = request.POST.getall(name)
    return values[-1] if values else ""


def posted_fields(request, names) -> dict[str, str]:
    """The posted values of ``names`` that were sent, nothing else: csrf_token and any
    unknown field stay out of validation."""
    return {name: posted_value(request, name) for name in names if name in request.POST}


def read_form(request, schema: colander.SchemaNode) -> dict:
    """The form validated by ``schema`` (the JSON route's own); FormInvalid if not.

    An empty optional field counts as missing, as an absent key does in JSON.
    """
    typed = posted_fields(request, [node.name for node in schema.children])
    values = {
        name: value
        for name, value in typed.items()
        if value != "" or schema[name].missing is colander.required
    }
    try:
        return schema.deserialize(values)
    except colander.Invalid as exc:
        raise FormInvalid(flatten_errors(exc), typed) from None


def field_errors(exc: ApiError) -> dict[str, str]:
    """A service's refusal as per-field messages (its message as ``form`` otherwise)."""
    if isinstance(exc, ValidationFailed):
        return dict(exc.extra.get("errors") or {})
    return {"form": exc.message}


# What a Location may carry as it is (RFC 3986's unreserved and reserved characters, and
# the percent sign of an escape); everything else is percent-encoded as UTF-8.
URI_SAFE = "/:@!$&'()*+,;=?#[]~%"
STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


def encode_location(target: str) -> str:
    """``target`` as ASCII a WSGI server can write in a Location header.

    A target made from request text may hold any character: waitress can send only
    latin-1 header values (anything else is its plain-text 500), and a line break would
    start a new header. Escapes already there are kept (so encoding twice changes
    nothing); a percent sign that starts no escape becomes ``%25``.
    """
    return quote(STRAY_PERCENT.sub("%25", target), safe=URI_SAFE, errors="surrogatepass")


def safe_next(raw: str | None, default: str = "/") -> str:
    """A local path to go back to after logging in: never another site (open redirect),
    percent-encoded (see encode_location)."""
    if not raw or not raw.startswith("/") or raw.startswith("//") or "\\" in raw:
        return default
    target = encode_location(raw)
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or target.startswith("//"):
        return default
    return target


def see_other(request, location: str, notice: str | None = None) -> HTTPSeeOther:
    """Post/redirect/get: 303 to ``location`` (a path on this site), with an optional
    ``notice``: a registered key (cmsshop.web.add_page_notices) the next page shows once,
    carried by a short-lived cookie (cmsshop.web.set_flash), never in the URL and never
    text from the request. Every redirect of the pages goes through here, so every
    Location is percent-encoded, whatever it was built from."""
    if notice:
        set_flash(request, notice)
    return HTTPSeeOther(location=encode_location(location))
