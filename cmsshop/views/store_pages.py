"""The store's pages: the product list (search, paging, currency) and a product's page
with its buy form; the same services as the JSON routes in views/store.py."""

from __future__ import annotations

import re

from pyramid.view import view_config

from cmsshop.services.payments.registry import PaymentProviders
from cmsshop.services.store import currencies, products, text
from cmsshop.views.shared.json import query_value, read_page_request

# How the buy form names a provider (its registry name otherwise).
PROVIDER_LABELS = {"cardprovider": "Card", "walletprovider": "PayPal"}
CURRENCY_CODE = re.compile(r"^[A-Z]{3}$")


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
    currency = read_currency(request)
    page = products.list_products(request.db, page_request, q=q, currency=currency)
    return {
        "page": page,
        "q": q or "",
        "currency": currency or "",
        "currencies": currencies.list_currencies(request.db, enabled_only=True),
    }


def provider_choices(request) -> list[tuple[str, str]]:
    return [
        (name, PROVIDER_LABELS.get(name, name))
        for name in request.find_service(PaymentProviders).names()
    ]


def product_page_values(
    request,
    slug: str,
    currency: str | None,
    errors: dict | None = None,
    form: dict | None = None,
) -> dict:
    """What templates/store/product.html shows: the product (404 unless published) with
    its prices (all of them for the buy form; ``currency``'s alone are shown when given)."""
    product = products.find_product(request.db, slug, public=True)
    (card,) = products.load_cards(request.db, [product])
    shown = [p for p in card.prices if p.currency == currency] if currency else card.prices
    form = dict(form or {})
    choices = [
        (p.currency, f"{p.currency} – {currencies.format_amount(p.amount, p.symbol, p.decimals)}")
        for p in card.prices
    ]
    typed = form.get("currency")
    if typed and typed not in {value for value, _ in choices} and CURRENCY_CODE.match(typed):
        # A choice the product is not (or no longer) sold in stays selected beside its error.
        choices.append((typed, f"{typed} (not available)"))
    if "currency" not in form:
        offered = [p.currency for p in card.prices]
        default = currencies.default_currency(request.db)
        chosen = currency if currency in offered else default
        form["currency"] = chosen if chosen in offered else next(iter(offered), "")
    return {
        "card": card,
        "product": product,
        "shown_prices": shown,
        "currency": currency or "",
        "currency_choices": choices,
        "provider_choices": provider_choices(request),
        "errors": errors or {},
        "form": form,
    }


@view_config(route_name="pages.product", request_method="GET", renderer="store/product.html")
def product_page(request):
    return product_page_values(request, request.matchdict["slug"], read_currency(request))
