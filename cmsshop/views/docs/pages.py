"""The public documentation pages: the article list (by category, searched, paged) and
one article, on the JSON routes' services and query rules (cmsshop.views.docs.api)."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop.services.docs import articles
from cmsshop.services.store import text
from cmsshop.views.shared.caching import shared_page
from cmsshop.views.shared.json import query_value, read_page_request


def read_list_filters(request) -> dict:
    """``q`` and ``category`` by the rules of the JSON list (views.docs.api.read_article_filters),
    except that an empty field means "any": the search form sends ``category=`` for
    "All categories"."""
    return {
        "q": text.parse_search(query_value(request, "q")),
        "category": text.parse_category(query_value(request, "category") or None),
    }


@view_config(route_name="pages.docs", request_method="GET", renderer="docs/index.html")
def docs_index(request):
    # A bad value is a 4xx page, as it is a 422 from GET /api/docs/articles.
    filters = read_list_filters(request)
    page = articles.list_articles(request.db, read_page_request(request), **filters)
    shared_page(request)
    return {
        "page": page,
        "q": filters["q"] or "",
        "category": filters["category"],
        "categories": articles.list_categories(request.db),
    }


@view_config(route_name="pages.docs_article", request_method="GET", renderer="docs/article.html")
def docs_article(request):
    article = articles.find_article(request.db, request.matchdict["slug"], public=True)
    shared_page(request)
    return {"article": article}
