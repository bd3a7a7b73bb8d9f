"""Content management of documentation articles (admin role, CSRF token)."""

from __future__ import annotations

import colander
from pyramid.view import view_config

from cmsshop.security import ADMIN
from cmsshop.services.docs import articles
from cmsshop.views.docs.api import article_body, read_article_filters
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.json import StrictMapping, page_json, read_json, read_page_request
from cmsshop.views.shared.schema import (
    MAX_MARKDOWN,
    bool_node,
    optional,
    slug_node,
    text_node,
)

MAX_BODY = MAX_MARKDOWN


class ArticleSchema(colander.MappingSchema):
    schema_type = StrictMapping
    slug = slug_node()
    title = text_node(200, min_length=1)
    summary = text_node(500, missing="")
    category = slug_node(missing="general")
    body = text_node(MAX_BODY, multiline=True, missing="")
    published = bool_node(missing=False)


def admin_article_body(article) -> dict:
    return article_body(article, admin=True)


@view_config(
    route_name="docs.admin_articles", request_method="GET", renderer="json", permission=ADMIN
)
def list_articles(request):
    no_store(request)
    page_request = read_page_request(request)
    filters = read_article_filters(request)
    page = articles.list_articles(request.db, page_request, **filters, public=False)
    return page_json(page, admin_article_body)


@view_config(
    route_name="docs.admin_articles", request_method="POST", renderer="json", permission=ADMIN
)
def create_article(request):
    data = read_json(request, ArticleSchema())
    article = articles.create_article(request.db, data)
    request.response.status = 201
    return admin_article_body(article)


@view_config(
    route_name="docs.admin_article", request_method="GET", renderer="json", permission=ADMIN
)
def show_article(request):
    no_store(request)
    article = articles.find_article(request.db, request.matchdict["slug"], public=False)
    return admin_article_body(article)


@view_config(
    route_name="docs.admin_article", request_method="PATCH", renderer="json", permission=ADMIN
)
def update_article(request):
    article = articles.find_article(request.db, request.matchdict["slug"], public=False)
    changes = read_json(request, optional(ArticleSchema()))
    articles.update_article(request.db, article, changes)
    return admin_article_body(article)


@view_config(
    route_name="docs.admin_article", request_method="DELETE", renderer="json", permission=ADMIN
)
def delete_article(request):
    article = articles.find_article(request.db, request.matchdict["slug"], public=False)
    slug = article.slug
    articles.delete_article(request.db, article)
    return {"slug": slug, "deleted": True}
