"""Public documentation: published articles (no login, ETag + 304)."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop.services.docs import articles
from cmsshop.services.store import text
from cmsshop.util import isoformat_z
from cmsshop.views.shared.caching import cached_json
from cmsshop.views.shared.json import page_json_bytes, query_value, read_page_request


def article_body(article, admin: bool = False) -> dict:
    """An Article, or a row of its columns (see articles.list_articles). The public list
    has the database write it (services.docs.articles._body_sql): change both, the test
    comparing them says where they differ."""
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
    # Read outside any transaction (cmsshop.db.needs_transaction): no request.db here.
    page_request = read_page_request(request)
    engine = request.registry["cmsshop.engine"]
    # The database writes the items (article_body's JSON: a test compares them).
    filters = read_article_filters(request)
    page, items = articles.public_article_bodies(engine, page_request, **filters)
    return cached_json(request, page_json_bytes(page, items))


@view_config(route_name="docs.article", request_method="GET")
def show_article(request):
    article = articles.find_article(request.db, request.matchdict["slug"], public=True)
    return cached_json(request, article_body(article))
