"""The docs module: published documentation articles and their content management."""

from __future__ import annotations

from cmsshop.modules.public_content import PUBLIC_CONTENT_SETTINGS
from cmsshop.settings import declare
from cmsshop.views import admin_articles, docs


def includeme(config) -> None:
    declare(config.get_settings(), PUBLIC_CONTENT_SETTINGS)
    config.add_route("docs.articles", "/api/docs/articles")
    config.add_route("docs.article", "/api/docs/articles/{slug}")
    config.add_route("docs.admin_articles", "/api/admin/articles")
    config.add_route("docs.admin_article", "/api/admin/articles/{slug}")
    for views in (docs, admin_articles):
        config.add_openapi(paths=views.OPENAPI_PATHS, schemas=views.OPENAPI_SCHEMAS)
        config.scan(views.__name__)
