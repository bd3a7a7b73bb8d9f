"""The store's pages: the product list (search, paging, currency) and a product's page
with its buy form; the same services as the JSON routes in views/store/api.py."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop.services.store import currencies, products, text
from cmsshop.views.shared.caching import shared_page
from cmsshop.views.shared.json import query_value, read_page_request
from cmsshop.views.shared.product_page import product_page_values


def optional_query(request, name: str) -> str | None:
    """A query parameter where an empty value (a form's blank choice) means "not given"."""
    value = query_value(request, name)
    return value if value else None


def read_currency(request) -> str | None:
    """The ``currency`` choice: an enabled currency's code, or a 422 page."""
    code = currencies.parse_currency_code(optional_query(request, "currency"))
    if code is not None:
        currencies.require_enabled_currency(request.db, code)
    return code


@view_config(route_name="pages.products", request_method="GET", renderer="store/products.html")
def products_page(request):
    page_request = read_page_request(request)
    q = text.parse_search(optional_query(request, "q"))
    currency = currencies.parse_currency_code(optional_query(request, "currency"))
    # The JSON list's own read (no ORM objects; 422 for a currency not enabled).
    engine = request.registry["cmsshop.engine"]
    page = products.public_products(engine, page_request, q=q, currency=currency)
    shared_page(request)
    return {
        # Each card with its first picture (the same statement).
        "page": page,
        "q": q or "",
        "currency": currency or "",
        "currencies": currencies.kept_enabled_currencies(request.db),
    }


@view_config(route_name="pages.product", request_method="GET", renderer="store/product.html")
def product_page(request):
    values = product_page_values(request, request.matchdict["slug"], read_currency(request))
    shared_page(request)  # the buy form's CSRF token is filled in for each visitor
    return values
