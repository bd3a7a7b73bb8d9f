"""The docs module: published documentation articles and their content management."""

from __future__ import annotations

from cmsshop.modules.public_content import PUBLIC_CONTENT_SETTINGS
from cmsshop.settings import declare
from cmsshop.views import admin_articles, docs

ROUTES = {
    "docs.articles": "/api/docs/articles",
    "docs.article": "/api/docs/articles/{slug}",
    "docs.admin_articles": "/api/admin/articles",
    "docs.admin_article": "/api/admin/articles/{slug}",
}


def includeme(config) -> None:
    declare(config.get_settings(), PUBLIC_CONTENT_SETTINGS)
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    for views in (docs, admin_articles):
        config.add_openapi(paths=views.OPENAPI_PATHS, schemas=views.OPENAPI_SCHEMAS)
        config.scan(views.__name__)
