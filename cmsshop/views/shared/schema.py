"""Schema building blocks shared by the edge packages: colander nodes for slugs, text,
dates and nullable integers, and the OpenAPI fragments that describe them. (Strict JSON
types, query strings and paging are in views.shared.json.)

No views live here, so no module scans it; each imports what it needs.
"""

from __future__ import annotations

import datetime as dt
import re

import colander

from cmsshop import openapi as oa
from cmsshop.services.store import text
from cmsshop.views.shared.json import StrictBool, StrictInt, StrictString

# The longest Markdown source (characters). Even written entirely as 12-byte JSON escapes
# ("\ud83d\ude00") it stays under the 1 MiB JSON body limit, so a body that its schema
# allows is never refused as too large.
MAX_MARKDOWN = 64_000
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")

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


DATE_TIME = {"type": "string", "format": "date-time"}


class IsoDate(colander.SchemaType):
    """A calendar date written ``YYYY-MM-DD`` (a string in JSON, a form or a query)."""

    def deserialize(self, node, cstruct):
        if cstruct is colander.null:
            return cstruct
        if not isinstance(cstruct, str) or not _ISO_DATE.fullmatch(cstruct):
            raise colander.Invalid(node, "must be a date written YYYY-MM-DD")
        try:
            return dt.date.fromisoformat(cstruct)
        except ValueError:
            raise colander.Invalid(node, "is not a valid date") from None

    def serialize(self, node, appstruct):
        return colander.null if appstruct is colander.null else appstruct.isoformat()


def text_validator(min_length: int, max_length: int, blank_ok: bool = False):
    """Length in characters, real Unicode text (no NUL, no lone surrogates), not blank."""
    length = colander.Length(min=min_length, max=max_length)

    def validator(node, value):
        length(node, value)
        if "\x00" in value:
            raise colander.Invalid(node, "must not contain NUL characters")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise colander.Invalid(node, "must be valid Unicode text") from None
        if not blank_ok and not value.strip():
            raise colander.Invalid(node, "must not be blank")

    return validator


ID_PARAM = oa.path_param("id", {"type": "integer", "minimum": 1, "maximum": 2**31 - 1})


def list_operation(
    summary: str,
    schema: str,
    params: list | None = None,
    tag: str = "dashboard",
    errors: tuple[int, ...] = (),
) -> dict:
    """A paged GET of ``schema`` items, as every list route answers it."""
    return oa.operation(
        summary,
        {**oa.ok(oa.page_of(oa.ref(schema))), **oa.errors(401, 403, 422, *errors)},
        params=[*(params or []), *oa.PAGING_PARAMS],
        tags=[tag],
    )
