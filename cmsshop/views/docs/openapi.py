"""The OpenAPI part of the docs module: the published articles (``OPENAPI_*``) and the
admin editor's routes (``ADMIN_*``)."""

from __future__ import annotations

from cmsshop import openapi as oa
from cmsshop.services.store import text
from cmsshop.views.docs.admin_api import MAX_BODY
from cmsshop.views.shared.caching import IF_NONE_MATCH, cached_ok
from cmsshop.views.shared.schema import DATE_TIME, SLUG, body_schema, text_schema

ARTICLE_FIELDS = {
    "slug": {"type": "string"},
    "title": {"type": "string"},
    "summary": {"type": "string"},
    "category": {"type": "string"},
    "body": {"type": "string", "description": "Markdown source"},
    "bodyHtml": {"type": "string", "description": "Rendered, sanitised HTML"},
    "publishedAt": {
        "type": ["string", "null"],
        "format": "date-time",
        "description": "First publication; null for a never-published draft",
    },
    "updatedAt": DATE_TIME,
}
ARTICLE = {"type": "object", "required": list(ARTICLE_FIELDS), "properties": ARTICLE_FIELDS}
OPENAPI_PATHS = {
    "/api/docs/articles": {
        "get": oa.operation(
            "Published articles, newest first, paged, optionally searched or by category",
            {**cached_ok(oa.page_of(oa.ref("Article"))), **oa.errors(422)},
            params=[
                *oa.PAGING_PARAMS,
                oa.query_param(
                    "q",
                    {
                        "type": "string",
                        "maxLength": text.MAX_SEARCH_LENGTH,
                        "pattern": text.SINGLE_LINE_PATTERN,
                    },
                    "Case-insensitive substring of the title or summary.",
                ),
                oa.query_param(
                    "category",
                    {"type": "string", "pattern": text.SLUG_PATTERN},
                    "Only articles of this category.",
                ),
                IF_NONE_MATCH,
            ],
            tags=["docs"],
        )
    },
    "/api/docs/articles/{slug}": {
        "get": oa.operation(
            "One published article (404 article_not_found otherwise)",
            {**cached_ok(oa.ref("Article")), **oa.errors(404)},
            params=[
                oa.path_param("slug", {"type": "string", "pattern": text.SLUG_PATTERN}),
                IF_NONE_MATCH,
            ],
            tags=["docs"],
        )
    },
}

OPENAPI_SCHEMAS = {"Article": ARTICLE}


ARTICLE_INPUT_FIELDS = {
    "slug": SLUG,
    "title": text_schema(200, min_length=1),
    "summary": text_schema(500),
    "category": {**SLUG, "description": "Default: general"},
    "body": {**text_schema(MAX_BODY, multiline=True), "description": "Markdown"},
    "published": {
        "type": "boolean",
        "description": "publishedAt is set when an article is first published.",
    },
}
ADMIN_ARTICLE = {
    "allOf": [
        oa.ref("Article"),
        {
            "type": "object",
            "required": ["published", "createdAt"],
            "properties": {
                "published": {"type": "boolean"},
                "createdAt": {"type": "string", "format": "date-time"},
            },
        },
    ]
}
SLUG_PARAM = oa.path_param("slug", {"type": "string"})
TAGS = ["admin", "docs"]

ADMIN_PATHS = {
    "/api/admin/articles": {
        "get": oa.operation(
            "All articles, drafts too, by title (admin)",
            {**oa.ok(oa.page_of(oa.ref("AdminArticle"))), **oa.errors(401, 403, 422)},
            params=[
                *oa.PAGING_PARAMS,
                oa.query_param("q", text_schema(text.MAX_SEARCH_LENGTH)),
                oa.query_param("category", {"type": "string", "pattern": text.SLUG_PATTERN}),
            ],
            tags=TAGS,
        ),
        "post": oa.operation(
            "Create an article (admin); 409 slug_taken",
            {
                **oa.ok(oa.ref("AdminArticle"), "Created", 201),
                **oa.errors(401, 403, 409, 415, 422),
            },
            body=body_schema(ARTICLE_INPUT_FIELDS, ["slug", "title"]),
            csrf=True,
            tags=TAGS,
        ),
    },
    "/api/admin/articles/{slug}": {
        "get": oa.operation(
            "One article (admin)",
            {**oa.ok(oa.ref("AdminArticle")), **oa.errors(401, 403, 404)},
            params=[SLUG_PARAM],
            tags=TAGS,
        ),
        "patch": oa.operation(
            "Change some fields of an article (admin)",
            {**oa.ok(oa.ref("AdminArticle")), **oa.errors(401, 403, 404, 409, 415, 422)},
            params=[SLUG_PARAM],
            body=body_schema(ARTICLE_INPUT_FIELDS, []),
            csrf=True,
            tags=TAGS,
        ),
        "delete": oa.operation(
            "Delete an article (admin)",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["slug", "deleted"],
                        "properties": {"slug": {"type": "string"}, "deleted": {"const": True}},
                    }
                ),
                **oa.errors(401, 403, 404),
            },
            params=[SLUG_PARAM],
            csrf=True,
            tags=TAGS,
        ),
    },
}

ADMIN_SCHEMAS = {"AdminArticle": ADMIN_ARTICLE}
