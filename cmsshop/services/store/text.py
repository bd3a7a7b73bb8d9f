"""Text rules of the catalogue and docs: slugs, storable text, search and filter input.

The same rules are given to the OpenAPI document as ECMA 262 patterns (``*_PATTERN``).
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.errors import Conflict, ValidationFailed

SLUG = re.compile(r"^[a-z0-9-]{1,100}\Z")
# Single-line text: no C0 controls, no DEL. Multi-line text may hold tab, LF and CR.
SINGLE_LINE_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")
MULTI_LINE_FORBIDDEN = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
# The same rules for the OpenAPI document (ECMA 262 regexes).
SINGLE_LINE_PATTERN = "^[^\\x00-\\x1f\\x7f]*$"
MULTI_LINE_PATTERN = "^[^\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f]*$"
SLUG_PATTERN = "^[a-z0-9-]{1,100}$"

MAX_SEARCH_LENGTH = 200


def is_slug(value: str) -> bool:
    return isinstance(value, str) and SLUG.match(value) is not None


def text_problem(value: str, multiline: bool = False) -> str | None:
    """Why ``value`` cannot be stored as text, or None.

    NUL cannot be stored in a PostgreSQL text column and a lone surrogate cannot be
    encoded as UTF-8 on any backend; both would otherwise surface as a 500.
    """
    forbidden = MULTI_LINE_FORBIDDEN if multiline else SINGLE_LINE_FORBIDDEN
    if forbidden.search(value):
        return "must not contain control characters" + (
            " other than tab and line breaks" if multiline else ""
        )
    return None


def parse_search(raw: str | None) -> str | None:
    """The ``q`` of a list: trimmed, at most 200 characters, no control characters."""
    if raw is None:
        return None
    problem = text_problem(raw)
    if problem or len(raw) > MAX_SEARCH_LENGTH:
        raise ValidationFailed({"q": problem or f"at most {MAX_SEARCH_LENGTH} characters"})
    raw = raw.strip()
    return raw or None


def parse_category(raw: str | None) -> str | None:
    if raw is None:
        return None
    if not is_slug(raw):
        raise ValidationFailed({"category": "letters a-z, digits and '-', 1-100 characters"})
    return raw


def like_pattern(q: str) -> str:
    """``q`` as a LIKE pattern: a % or _ typed by the visitor matches itself."""
    escaped = q.replace("/", "//").replace("%", "/%").replace("_", "/_")
    return f"%{escaped}%"


def ensure_slug_free(session: Session, model: Any, slug: str, *, owner: Any = None) -> None:
    """409 ``slug_taken`` when a ``model`` row other than ``owner`` uses ``slug``: checked
    on create and rename, so the answer is a clear conflict rather than a unique-index
    error (which still guards a race, as a retried request)."""
    query = select(model.id).where(model.slug == slug)
    if owner is not None:
        query = query.where(model.id != owner.id)
    if session.scalar(query) is not None:
        raise slug_taken(model.__name__.lower(), slug)


def slug_taken(kind: str, slug: str) -> Conflict:
    """The 409 of a create or rename onto a slug another ``kind`` already uses."""
    return Conflict(
        f"Another {kind} uses the slug {slug!r}.",
        code="slug_taken",
        title="Slug taken",
        hints=["Choose another slug; slugs are unique."],
    )
