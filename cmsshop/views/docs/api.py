"""Public documentation: published articles (no login, ETag + 304)."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop import openapi as oa
from cmsshop.services.docs import articles
from cmsshop.services.store import text
from cmsshop.util import isoformat_z
from cmsshop.views.shared.caching import IF_NONE_MATCH, cached_json, cached_ok
from cmsshop.views.shared.json import page_json, query_value, read_page_request
from cmsshop.views.shared.schema import DATE_TIME


def article_body(article, admin: bool = False) -> dict:
    """An Article, or a row of its columns (see articles.list_articles)."""
    body = {
        "slug": article.slug,
        "title": article.title,
        "summary": article.summary,
        "category": article.category,
        "body": article.body,
        "bodyHtml": article.body_html,
        "publishedAt": isoformat_z(article.published_at),
        "updatedAt": isoformat_z(article.updated_at),
    }
    if admin:
        body["published"] = article.published
        body["createdAt"] = isoformat_z(article.created_at)
    return body


def read_article_filters(request) -> dict:
    """``q`` and ``category`` of an article list (public or admin)."""
    return {
        "q": text.parse_search(query_value(request, "q")),
        "category": text.parse_category(query_value(request, "category")),
    }


@view_config(route_name="docs.articles", request_method="GET")
def list_articles(request):
    page_request = read_page_request(request)
    page = articles.list_articles(request.db, page_request, **read_article_filters(request))
    return cached_json(request, page_json(page, article_body))


@view_config(route_name="docs.article", request_method="GET")
def show_article(request):
    article = articles.find_article(request.db, request.matchdict["slug"], public=True)
    return cached_json(request, article_body(article))


# --- OpenAPI -----------------------------------------------------------------------------

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
