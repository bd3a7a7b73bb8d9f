"""The docs module: published documentation articles and their content management."""

from __future__ import annotations

from cmsshop.db import add_transactionless_reads
from cmsshop.modules.public_content import PUBLIC_CONTENT_SETTINGS
from cmsshop.settings import declare
from cmsshop.views.docs import admin_pages, openapi

ROUTES = {
    "docs.articles": "/api/docs/articles",
    "docs.article": "/api/docs/articles/{slug}",
    "docs.admin_articles": "/api/admin/articles",
    "docs.admin_article": "/api/admin/articles/{slug}",
    # The web pages: the public docs and the admin article editor ("new" and "preview"
    # before "{slug}").
    "pages.docs": "/docs",
    "pages.docs_article": "/docs/{slug}",
    "pages.admin_articles": "/admin/articles",
    "pages.admin_article_new": "/admin/articles/new",
    "pages.admin_article_preview": "/admin/articles/preview",
    "pages.admin_article_edit": "/admin/articles/{slug}/edit",
    "pages.admin_article_publish": "/admin/articles/{slug}/publish",
    "pages.admin_article_unpublish": "/admin/articles/{slug}/unpublish",
    "pages.admin_article_delete": "/admin/articles/{slug}/delete",
}

# The public answers the answer cache may keep, with the query parameters each view
# reads (the cache key holds these; any other parameter is left out of it).
CACHED_ROUTES = {
    "docs.articles": ("page", "perPage", "q", "category"),
    "docs.article": (),
}
# The HTML pages it may keep for anonymous visitors (cmsshop.cache), the same way.
CACHED_PAGES = {
    "pages.docs": ("page", "perPage", "q", "category"),
    "pages.docs_article": (),
}


def includeme(config) -> None:
    declare(config.get_settings(), PUBLIC_CONTENT_SETTINGS)
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    # The public article list reads outside any transaction.
    add_transactionless_reads(config, "docs.articles")
    config.add_cached_routes(CACHED_ROUTES)
    config.add_cached_pages(CACHED_PAGES)
    config.add_openapi(paths=openapi.OPENAPI_PATHS, schemas=openapi.OPENAPI_SCHEMAS)
    config.add_openapi(paths=openapi.ADMIN_PATHS, schemas=openapi.ADMIN_SCHEMAS)
    config.add_page_notices(admin_pages.NOTICES)
    config.scan("cmsshop.views.docs")
