"""Helpers every view uses: strict JSON parsing, colander validation, paging, ETags."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

import colander
import orjson
from pyramid.response import Response

from cmsshop.errors import (
    ApiError,
    MalformedJson,
    PayloadTooLarge,
    UnsupportedMediaType,
    ValidationFailed,
)
from cmsshop.models.meta import MAX_ID
from cmsshop.services.licensing.features import (
    FeaturesInvalid,
    normalise_features,
    parse_feature_text,
)
from cmsshop.services.paging import DEFAULT_PER_PAGE, MAX_PER_PAGE, Page, PageRequest

# --- strict colander types ---------------------------------------------------------------
# colander's own String/Int/Bool coerce (123 -> "123", 1.9 -> 1, "yes" -> True). A JSON API
# should refuse a wrong type instead of guessing, so views use these.


# NUL cannot be stored by PostgreSQL and lone surrogates (JSON "\ud800") cannot be encoded
# as UTF-8: both would fail deep in a service as a 500, so text refuses them here.
UNSTORABLE_TEXT = re.compile("[\x00\ud800-\udfff]")


def is_storable_text(value: str) -> bool:
    """Whether ``value`` can be stored and encoded (no NUL, no lone surrogate)."""
    return UNSTORABLE_TEXT.search(value) is None


class StrictString(colander.String):
    def deserialize(self, node, cstruct):
        if cstruct is not colander.null and not isinstance(cstruct, str):
            raise colander.Invalid(node, "must be a string")
        if cstruct is not colander.null and not is_storable_text(cstruct):
            raise colander.Invalid(node, "must not contain NUL or unpaired surrogates")
        return super().deserialize(node, cstruct)


class StrictInt(colander.Int):
    def deserialize(self, node, cstruct):
        if cstruct is colander.null:
            return cstruct
        if isinstance(cstruct, bool) or not isinstance(cstruct, int):
            raise colander.Invalid(node, "must be an integer")
        return cstruct


class StrictBool(colander.Boolean):
    def deserialize(self, node, cstruct):
        if cstruct is colander.null:
            return cstruct
        if not isinstance(cstruct, bool):
            raise colander.Invalid(node, "must be true or false")
        return cstruct


class StrictMapping(colander.Mapping):
    """A JSON object; unknown fields are an error, not silently dropped."""

    def __init__(self, unknown="raise"):
        super().__init__(unknown=unknown)

    def _validate(self, node, value):
        if not isinstance(value, dict):
            raise colander.Invalid(node, "must be an object")
        return super()._validate(node, value)


class StrictSequence(colander.Sequence):
    def _validate(self, node, value, accept_scalar):
        if not isinstance(value, list):
            raise colander.Invalid(node, "must be an array")
        return super()._validate(node, value, accept_scalar)


def flatten_errors(exc: colander.Invalid) -> dict[str, str]:
    """colander's error dict with a readable name for whole-body errors."""
    errors = {}
    for key, message in exc.asdict().items():
        errors[key or "body"] = message
    return errors


def validate(schema: colander.SchemaNode, data: Any) -> Any:
    """Deserialize ``data`` with ``schema`` or raise a 422 with per-field errors."""
    try:
        return schema.deserialize(data)
    except colander.Invalid as exc:
        raise ValidationFailed(flatten_errors(exc)) from None


# --- bodies ------------------------------------------------------------------------------


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


def read_body(request, limit: int | None = None) -> bytes:
    """The raw body, refusing more than ``limit`` bytes even without Content-Length."""
    limit = limit or request.registry.settings["cmsshop.max_body_bytes"]
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLarge(f"The body is larger than {limit} bytes.")
    if request.is_body_seekable:
        # pyramid_retry made the body seekable once, before the first attempt; a retried
        # request must read it again from the start.
        request.body_file_raw.seek(0)
    data = request.body_file.read(limit + 1)
    if len(data) > limit:
        raise PayloadTooLarge(f"The body is larger than {limit} bytes.")
    return data


def decode_json(raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8")
        return json.loads(text, parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise MalformedJson() from None


def read_json(request, schema: colander.SchemaNode | None = None) -> Any:
    """Parse a JSON request body (415 for another type, 400 if malformed, 413 if too big)
    and validate it with ``schema`` (422)."""
    if not is_json_content_type(request.content_type):
        raise UnsupportedMediaType()
    data = decode_json(read_body(request))
    return validate(schema, data) if schema is not None else data


def is_json_content_type(content_type: str | None) -> bool:
    content_type = (content_type or "").lower()
    return content_type == "application/json" or (
        content_type.startswith("application/") and content_type.endswith("+json")
    )


# --- path ids ----------------------------------------------------------------------------


def parse_path_id(raw: str) -> int | None:
    """A positive 32-bit id from a path segment, or None (ASCII digits only: ``str.isdigit``
    also accepts "²", and PostgreSQL refuses integers beyond 32 bits with an error)."""
    if not raw or len(raw) > 10 or not raw.isascii() or not raw.isdigit():
        return None
    value = int(raw)
    return value if 1 <= value <= MAX_ID else None


# --- lists -------------------------------------------------------------------------------


class PagingSchema(colander.MappingSchema):
    page = colander.SchemaNode(colander.Int(), missing=1, validator=colander.Range(min=1))
    perPage = colander.SchemaNode(  # noqa: N815 - JSON name
        colander.Int(), missing=DEFAULT_PER_PAGE, validator=colander.Range(min=1, max=MAX_PER_PAGE)
    )


def query_values(request, name: str) -> list[str]:
    """Every value of a query parameter; 400 ``malformed_query`` for a query string that
    is not UTF-8 (WebOb decodes all of it on first use and raises)."""
    try:
        return request.GET.getall(name)
    except UnicodeDecodeError:
        raise ApiError(
            "The query string is not valid UTF-8.",
            code="malformed_query",
            hints=["Percent-encode UTF-8 text, e.g. é as %C3%A9."],
        ) from None


def query_value(request, name: str) -> str | None:
    """A query parameter given at most once (a repeated one is a 422, not "the last")."""
    values = query_values(request, name)
    if len(values) > 1:
        raise ValidationFailed({name: "give this parameter once"})
    return values[0] if values else None


def read_query(request, schema: colander.SchemaNode) -> tuple[dict, dict]:
    """(validated, as typed): the schema's query parameters, an empty one as absent
    (a filter form sends every field); 422 for a bad or repeated value."""
    typed = {}
    for node in schema.children:
        value = query_value(request, node.name)
        if value not in (None, ""):
            typed[node.name] = value
    return validate(schema, typed), typed


_PLAIN = re.compile(r"[1-9][0-9]{0,8}\Z")  # 1 to 999,999,999, no sign, space or zero first


def read_page_request(request) -> PageRequest:
    """``page`` (from 1) and ``perPage`` (1-100, default 20) from the query string; 422
    for a bad, empty or repeated value."""
    raw = {}
    for name in ("page", "perPage"):
        values = query_values(request, name)
        if len(values) > 1 or values == [""]:
            raise ValidationFailed({name: "must be one integer"})
        if values:
            raw[name] = values[0]
    # Plain digits in range (what links and forms send) need no schema: colander's
    # validation was a tenth of a computed list page. Anything else goes through it, for
    # its answer.
    page, per_page = raw.get("page", "1"), raw.get("perPage", str(DEFAULT_PER_PAGE))
    if _PLAIN.match(page) and _PLAIN.match(per_page) and int(per_page) <= MAX_PER_PAGE:
        return PageRequest(int(page), int(per_page))
    data = validate(PagingSchema(), raw)
    return PageRequest(data["page"], data["perPage"])


def page_json(page: Page, serialise: Callable[[Any], dict]) -> dict:
    """The JSON of every list route: its items serialised, and where the page stands."""
    return {
        "items": [serialise(item) for item in page.items],
        "page": page.page,
        "perPage": page.per_page,
        "total": page.total,
    }


def page_json_bytes(page: Page, items: bytes) -> bytes:
    """:func:`page_json`'s JSON, written around ``items``: a JSON array already written
    (by the database: services.store.products.public_product_bodies)."""
    return b'{"items":%s,"page":%d,"perPage":%d,"total":%d}' % (
        items, page.page, page.per_page, page.total
    )  # fmt: skip


# --- caching -----------------------------------------------------------------------------


def json_with_etag(request, body: Any, max_age: int = 60):
    """Render ``body`` as JSON with a strong ETag; answer 304 to a matching If-None-Match.
    ``bytes`` are JSON already written (sent as they are)."""
    # Keys in the order the body was built (the same every time: the ETag is stable).
    # orjson writes UTF-8 (no \u escapes) several times faster than json.dumps: a list
    # page of 20 products spent a sixth of its time here. It refuses integers past 64
    # bits (a page number someone typed): json writes those, in the same form.
    if isinstance(body, bytes):
        payload = body
    else:
        try:
            payload = orjson.dumps(body)
        except TypeError:
            payload = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    etag = hashlib.sha256(payload).hexdigest()[:32]
    cache_control = ("Cache-Control", f"public, max-age={max_age}")
    validator = ("ETag", f'"{etag}"')
    if etag in request.if_none_match:
        return _answer(request, [cache_control, validator], b"", not_modified=True)
    return _answer(
        request, [("Content-Type", "application/json"), cache_control, validator], payload
    )


# What _answer writes: any earlier value of these goes (a 304 has neither a Content-Type
# nor a Content-Length).
_ANSWER_HEADERS = frozenset({"content-type", "cache-control", "etag", "content-length"})


def _answer(request, headers: list[tuple[str, str]], body: bytes, not_modified: bool = False):
    """``request.response`` with ``headers`` and ``body``: a 304, or the response's own
    status (200 unless a view set another). No one touched request.response yet (the
    usual case): the answer made whole, its headers written at once, as each of webob's
    header setters scans all of them. Otherwise the response a view or subscriber
    prepared keeps its other headers (a cookie, Vary)."""
    response = request.__dict__.get("response")
    if response is None:
        # Response adds the Content-Length (none to a 304). No status given for a 200:
        # webob's status setter adds a quarter to making the response.
        response = request.__dict__["response"] = Response(
            body=body, status=304 if not_modified else None, headerlist=headers
        )
        return response
    response.app_iter = [body]  # before the headers: it drops the Content-Length
    if not_modified:
        response.status = 304
    else:
        headers.append(("Content-Length", str(len(body))))
    headerlist = response.headerlist
    headerlist[:] = [pair for pair in headerlist if pair[0].lower() not in _ANSWER_HEADERS]
    headerlist.extend(headers)
    return response


class FeatureList(colander.SchemaType):
    """Feature flags: a JSON list of names, or (``form``) one text field of names separated
    by commas or spaces; normalised (sorted, unique) by the one rule of
    services/licensing/features.py."""

    def __init__(self, form: bool = False):
        self.form = form

    def deserialize(self, node, cstruct):
        if cstruct is colander.null:
            return cstruct
        try:
            if self.form and isinstance(cstruct, str):
                return parse_feature_text(cstruct)
            if not isinstance(cstruct, list):
                raise colander.Invalid(node, "must be a list of feature names")
            return normalise_features(cstruct)
        except FeaturesInvalid as exc:
            raise colander.Invalid(node, str(exc)) from None

    def serialize(self, node, appstruct):
        return colander.null if appstruct is colander.null else list(appstruct)
