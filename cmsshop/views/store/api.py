"""Public catalogue: published products and enabled currencies (no login, ETag + 304)."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop import openapi as oa
from cmsshop.models import VERSION_SCHEMES, Currency
from cmsshop.services.store import currencies, products, text
from cmsshop.util import isoformat_z
from cmsshop.views.shared.bodies import RELEASE_SCHEMA, release_body
from cmsshop.views.shared.caching import IF_NONE_MATCH, cached_json, cached_ok
from cmsshop.views.shared.json import page_json, query_value, read_page_request
from cmsshop.views.shared.schema import DATE_TIME

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
        "licensing": {
            "licensed": product.licensed,
            "maxActivations": product.max_activations,
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
    page_request = read_page_request(request)
    q = text.parse_search(query_value(request, "q"))
    currency = read_currency_param(request)
    page = products.list_products(request.db, page_request, q=q, currency=currency)
    return cached_json(request, page_json(page, product_body))


@view_config(route_name="store.product", request_method="GET")
def show_product(request):
    currency = read_currency_param(request)
    product = products.find_product(request.db, request.matchdict["slug"], public=True)
    (card,) = products.load_cards(request.db, [product], currency=currency)
    return cached_json(request, product_body(card))


@view_config(route_name="store.currencies", request_method="GET")
def list_currencies(request):
    found = currencies.list_currencies(request.db, enabled_only=True)
    return cached_json(request, {"items": [currency_body(c) for c in found]})


# --- OpenAPI -----------------------------------------------------------------------------

TEXT = {"type": "string", "pattern": text.SINGLE_LINE_PATTERN}
SLUG_SCHEMA = {"type": "string", "pattern": text.SLUG_PATTERN, "maxLength": 100}
MAX_AMOUNT = 10**15

PRICE = {
    "type": "object",
    "required": ["currency", "amount", "formatted"],
    "properties": {
        "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "amount": {"type": "integer", "minimum": 0, "description": "Minor units."},
        "formatted": {"type": "string", "examples": ["€49.00"]},
    },
}
LICENSING = {
    "type": "object",
    "required": [
        "licensed",
        "maxActivations",
        "durationDays",
        "features",
        "upgradeGroup",
        "tier",
    ],
    "properties": {
        "licensed": {"type": "boolean"},
        "maxActivations": {"type": ["integer", "null"], "minimum": 0},
        "durationDays": {
            "type": ["integer", "null"],
            "minimum": 1,
            "description": "null = perpetual",
        },
        "features": {
            "type": "array",
            "maxItems": 32,
            "items": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_.-]{0,39}$"},
            "description": "Feature flags a license of the product carries (in its leases).",
        },
        "upgradeGroup": {
            "type": ["string", "null"],
            "description": "Licenses may be upgraded to products of the same group...",
        },
        "tier": {"type": "integer", "minimum": 0, "description": "...with a higher tier."},
    },
}
PRODUCT_FIELDS = {
    "slug": {"type": "string"},
    "name": {"type": "string"},
    "summary": {"type": "string"},
    "description": {"type": "string", "description": "Markdown source"},
    "descriptionHtml": {"type": "string", "description": "Rendered, sanitised HTML"},
    "prices": {"type": "array", "items": oa.ref("Price")},
    "licensing": oa.ref("Licensing"),
    "versionScheme": {
        "type": "string",
        "enum": list(VERSION_SCHEMES),
        "description": "How release versions compare: PEP 440 or Semantic Versioning 2.0.0",
    },
    "latestRelease": {"oneOf": [oa.ref("Release"), {"type": "null"}]},
    "updatedAt": DATE_TIME,
}
PRODUCT = {"type": "object", "required": list(PRODUCT_FIELDS), "properties": PRODUCT_FIELDS}
CURRENCY_FIELDS = {
    "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
    "name": {"type": "string"},
    "symbol": {"type": "string"},
    "decimals": {"type": "integer", "minimum": 0, "maximum": currencies.MAX_DECIMALS},
    "default": {"type": "boolean"},
}
CURRENCY = {"type": "object", "required": list(CURRENCY_FIELDS), "properties": CURRENCY_FIELDS}

SEARCH_PARAM = oa.query_param(
    "q",
    {"type": "string", "maxLength": text.MAX_SEARCH_LENGTH, **TEXT},
    "Case-insensitive substring of the name/title or summary.",
)
CURRENCY_PARAM = oa.query_param(
    "currency",
    {"type": "string", "pattern": "^[A-Za-z]{3}$"},
    "Show prices in this enabled currency only (422 if it is not one).",
)


OPENAPI_PATHS = {
    "/api/store/products": {
        "get": oa.operation(
            "Published products, paged, optionally searched",
            {**cached_ok(oa.page_of(oa.ref("Product"))), **oa.errors(422)},
            params=[*oa.PAGING_PARAMS, SEARCH_PARAM, CURRENCY_PARAM, IF_NONE_MATCH],
            tags=["store"],
        )
    },
    "/api/store/products/{slug}": {
        "get": oa.operation(
            "One published product (404 product_not_found otherwise)",
            {**cached_ok(oa.ref("Product")), **oa.errors(404, 422)},
            params=[oa.path_param("slug", SLUG_SCHEMA), CURRENCY_PARAM, IF_NONE_MATCH],
            tags=["store"],
        )
    },
    "/api/store/currencies": {
        "get": oa.operation(
            "Enabled currencies, the default first",
            {
                **cached_ok(
                    {
                        "type": "object",
                        "required": ["items"],
                        "properties": {"items": {"type": "array", "items": oa.ref("Currency")}},
                    }
                ),
                **oa.errors(),
            },
            params=[IF_NONE_MATCH],
            tags=["store"],
        )
    },
}

OPENAPI_SCHEMAS = {
    "Price": PRICE,
    "Licensing": LICENSING,
    "Release": RELEASE_SCHEMA,
    "Product": PRODUCT,
    "Currency": CURRENCY,
}
