"""The home page: the brand's hero, the featured products (the seller's choice, else the
first products by name) and the newest articles, of the modules that are on."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop.services.paging import PageRequest
from cmsshop.services.storefront import brand as brands
from cmsshop.views.core.brand import current_brand
from cmsshop.views.shared.caching import shared_page

FEATURED = 6
LATEST_ARTICLES = 5


@view_config(route_name="pages.home", request_method="GET", renderer="core/home.html")
def home(request):
    modules = request.registry.settings["cmsshop.modules"]
    products, articles = [], []
    if "store" in modules:
        from cmsshop.services.store import products as catalogue

        chosen = current_brand(request).featured
        if chosen:
            products = brands.featured_cards(request.db, chosen)
        else:
            cards = catalogue.list_products(request.db, PageRequest(1, FEATURED)).items
            products = brands.with_images(request.db, cards)
    if "docs" in modules:
        from cmsshop.services.docs import articles as docs

        articles = docs.list_articles(request.db, PageRequest(1, LATEST_ARTICLES)).items
    shared_page(request)
    return {"products": products, "articles": articles}
