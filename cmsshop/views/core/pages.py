"""The home page: the newest products and articles of the modules that are on."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop.services.paging import PageRequest

FEATURED = 6
LATEST_ARTICLES = 5


@view_config(route_name="pages.home", request_method="GET", renderer="core/home.html")
def home(request):
    modules = request.registry.settings["cmsshop.modules"]
    products, articles = [], []
    if "store" in modules:
        from cmsshop.services.store import products as catalogue

        products = catalogue.list_products(request.db, PageRequest(1, FEATURED)).items
    if "docs" in modules:
        from cmsshop.services.docs import articles as docs

        articles = docs.list_articles(request.db, PageRequest(1, LATEST_ARTICLES)).items
    return {"products": products, "articles": articles}
