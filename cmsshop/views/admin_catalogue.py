"""Building blocks shared by the catalogue views of the store and docs modules: colander
nodes for slugs and text, nullable integers, caching and OpenAPI fragments. (Generic
helpers every view uses -- query strings, paging, JSON bodies -- are in views.common.)

No views live here, so neither module scans it; each imports what it needs.
"""

from __future__ import annotations

import colander

from cmsshop.cache import CACHEABLE
from cmsshop.services.store import text
from cmsshop.views.common import StrictBool, StrictInt, StrictString, json_with_etag

# The longest Markdown source (characters). Even written entirely as 12-byte JSON escapes
# ("\ud83d\ude00") it stays under the 1 MiB JSON body limit, so a body that its schema
# allows is never refused as too large.
MAX_MARKDOWN = 64_000

# --- colander ----------------------------------------------------------------------------


class NullableInt(StrictInt):
    """A JSON integer or null (null -> None); anything else is refused."""

    def deserialize(self, node, cstruct):
        if cstruct is None:
            return None
        return super().deserialize(node, cstruct)


def unless_none(validator):
    def check(node, value):
        if value is not None:
            validator(node, value)

    return check


def _text_rules(multiline: bool):
    def check(node, value):
        problem = text.text_problem(value, multiline=multiline)
        if problem:
            raise colander.Invalid(node, problem)

    return check


def text_node(max_length: int, *, min_length: int = 0, multiline: bool = False, **kwargs):
    return colander.SchemaNode(
        StrictString(allow_empty=True),
        validator=colander.All(
            colander.Length(min=min_length, max=max_length), _text_rules(multiline)
        ),
        **kwargs,
    )


def slug_node(**kwargs):
    return colander.SchemaNode(
        # allow_empty: "" must fail the pattern, not quietly become the default.
        StrictString(allow_empty=True),
        validator=colander.Regex(text.SLUG, "letters a-z, digits and '-', 1-100 characters"),
        **kwargs,
    )


def bool_node(**kwargs):
    return colander.SchemaNode(StrictBool(), **kwargs)


def int_node(minimum: int, maximum: int, **kwargs):
    return colander.SchemaNode(
        StrictInt(), validator=colander.Range(min=minimum, max=maximum), **kwargs
    )


def nullable_int_node(minimum: int, maximum: int, **kwargs):
    return colander.SchemaNode(
        NullableInt(), validator=unless_none(colander.Range(min=minimum, max=maximum)), **kwargs
    )


def optional(schema: colander.SchemaNode) -> colander.SchemaNode:
    """A copy of ``schema`` whose every field may be left out (for PATCH bodies)."""
    schema = schema.clone()

    def relax(node):
        for child in node.children:
            child.missing = colander.drop
            if isinstance(child.typ, colander.Mapping):
                relax(child)

    relax(schema)
    return schema


# --- OpenAPI -----------------------------------------------------------------------------


def text_schema(max_length: int, *, min_length: int = 0, multiline: bool = False) -> dict:
    return {
        "type": "string",
        "minLength": min_length,
        "maxLength": max_length,
        "pattern": text.MULTI_LINE_PATTERN if multiline else text.SINGLE_LINE_PATTERN,
    }


SLUG = {"type": "string", "pattern": text.SLUG_PATTERN, "maxLength": 100}


def body_schema(properties: dict, required: list[str]) -> dict:
    schema = {"type": "object", "additionalProperties": False, "properties": properties}
    if required:
        schema["required"] = required
    return schema


def cached_json(request, body: dict):
    """A public catalogue or docs answer: JSON with an ETag, cached for
    cmsshop.public_max_age seconds."""
    max_age = request.registry.settings["cmsshop.public_max_age"]
    request.environ[CACHEABLE] = True  # the same for every visitor: the answer cache may keep it
    return json_with_etag(request, body, max_age=max_age)


DATE_TIME = {"type": "string", "format": "date-time"}
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


def no_store(request) -> None:
    """Admin answers hold drafts: never let a shared cache keep them."""
    request.response.cache_control = "no-store"
