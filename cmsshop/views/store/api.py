"""Public catalogue: published products and enabled currencies (no login, ETag + 304)."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop.models import Currency
from cmsshop.services.store import currencies, products, text
from cmsshop.util import isoformat_z
from cmsshop.views.shared.bodies import release_body
from cmsshop.views.shared.caching import cached_json
from cmsshop.views.shared.json import page_json_bytes, query_value, read_page_request

# The largest price in minor units (the OpenAPI document and the admin schema say so).
MAX_AMOUNT = 10**15

# --- JSON bodies (shared with the admin views) -------------------------------------------


def currency_body(currency: Currency, admin: bool = False) -> dict:
    body = {
        "code": currency.code,
        "name": currency.name,
        "symbol": currency.symbol,
        "decimals": currency.decimals,
        "default": currency.is_default,
    }
    if admin:
        body["enabled"] = currency.enabled
    return body


def product_body(card: products.ProductCard, admin: bool = False) -> dict:
    """A product's JSON. The public list and a product by slug have the database write
    it (services.store.products._body_sql): change both, the test comparing them says
    where they differ."""
    product = card.product
    body = {
        "slug": product.slug,
        "name": product.name,
        "summary": product.summary,
        "description": product.description,
        "descriptionHtml": product.description_html,
        "prices": [
            {
                "currency": price.currency,
                "amount": price.amount,
                "formatted": currencies.format_amount(price.amount, price.symbol, price.decimals),
            }
            for price in card.prices
        ],
        # Sold as a subscription: charged every intervalCount interval (the product page's
        # "every month"); null when it is bought once.
        "subscription": None
        if card.subscription is None
        else {
            "interval": card.subscription.interval,
            "intervalCount": card.subscription.interval_count,
        },
        "licensing": {
            "licensed": product.licensed,
            "maxActivations": product.max_activations,
            # The public sees the limit checkout applies; the admin what was set (null:
            # the default).
            "maxQuantity": product.max_quantity if admin else products.max_quantity(product),
            "durationDays": product.duration_days,
            "features": list(product.features or []),
            "upgradeGroup": product.upgrade_group,
            "tier": product.tier,
        },
        "versionScheme": product.version_scheme,
        "latestRelease": release_body(card.latest_release),
        "updatedAt": isoformat_z(product.updated_at),
    }
    if admin:
        body["published"] = product.published
        body["archived"] = product.archived
        body["createdAt"] = isoformat_z(product.created_at)
    return body


def read_currency_param(request) -> str | None:
    """The ``currency`` query parameter: an enabled currency's code, or a 422."""
    code = currencies.parse_currency_code(query_value(request, "currency"))
    if code is not None:
        currencies.require_enabled_currency(request.db, code)
    return code


# --- views -------------------------------------------------------------------------------


@view_config(route_name="store.products", request_method="GET")
def list_products(request):
    # Read outside any transaction (cmsshop.db.needs_transaction): no request.db here.
    page_request = read_page_request(request)
    q = text.parse_search(query_value(request, "q"))
    currency = currencies.parse_currency_code(query_value(request, "currency"))
    engine = request.registry["cmsshop.engine"]
    # The database writes the items (product_body's JSON: a test compares them).
    page, items = products.public_product_bodies(engine, page_request, q=q, currency=currency)
    return cached_json(request, page_json_bytes(page, items))


@view_config(route_name="store.product", request_method="GET")
def show_product(request):
    # Read outside any transaction (cmsshop.db.needs_transaction): no request.db here.
    currency = currencies.parse_currency_code(query_value(request, "currency"))
    engine = request.registry["cmsshop.engine"]
    slug = request.matchdict["slug"]
    return cached_json(request, products.public_product_body(engine, slug, currency=currency))


@view_config(route_name="store.currencies", request_method="GET")
def list_currencies(request):
    found = currencies.list_currencies(request.db, enabled_only=True)
    return cached_json(request, {"items": [currency_body(c) for c in found]})
