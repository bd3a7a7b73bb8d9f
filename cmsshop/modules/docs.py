"""The docs module: published documentation articles and their content management."""

from __future__ import annotations

from cmsshop.modules.store import SETTINGS
from cmsshop.settings import declare
from cmsshop.views import admin_articles, docs


def includeme(config) -> None:
    # Shares cmsshop.public_max_age with the store (declaring twice is harmless).
    declare(config.get_settings(), {"cmsshop.public_max_age": SETTINGS["cmsshop.public_max_age"]})
    config.add_route("docs.articles", "/api/docs/articles")
    config.add_route("docs.article", "/api/docs/articles/{slug}")
    config.add_route("docs.admin_articles", "/api/admin/articles")
    config.add_route("docs.admin_article", "/api/admin/articles/{slug}")
    for views in (docs, admin_articles):
        config.add_openapi(paths=views.OPENAPI_PATHS, schemas=views.OPENAPI_SCHEMAS)
        config.scan(views.__name__)
