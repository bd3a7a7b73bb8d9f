"""The OpenAPI part of the store module: the public catalogue (``OPENAPI_*``), the admin
products and releases (``ADMIN_PRODUCT_*``) and the admin currencies
(``ADMIN_CURRENCY_*``)."""

from __future__ import annotations

from cmsshop import openapi as oa
from cmsshop.models import INTERVALS, RELEASE_CHANNELS, VERSION_SCHEMES
from cmsshop.models.subscriptions import MAX_TRIAL_DAYS
from cmsshop.services.store import currencies, media, releases, text
from cmsshop.util import format_filesize
from cmsshop.views.shared.bodies import RELEASE_SCHEMA
from cmsshop.views.shared.caching import IF_NONE_MATCH, cached_ok
from cmsshop.views.shared.schema import DATE_TIME, MAX_MARKDOWN, SLUG, body_schema, text_schema
from cmsshop.views.store.admin_api import (
    MAX_ACTIVATIONS,
    MAX_DURATION_DAYS,
    MAX_PRICES,
    MAX_QUANTITY,
)
from cmsshop.views.store.api import MAX_AMOUNT

# --- the public catalogue ---------------------------------------------------------------

TEXT = {"type": "string", "pattern": text.SINGLE_LINE_PATTERN}
SLUG_SCHEMA = {"type": "string", "pattern": text.SLUG_PATTERN, "maxLength": 100}

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
        "maxQuantity",
        "durationDays",
        "features",
        "upgradeGroup",
        "tier",
    ],
    "properties": {
        "licensed": {"type": "boolean"},
        "maxActivations": {"type": ["integer", "null"], "minimum": 0},
        "maxQuantity": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_QUANTITY,
            "description": "The most one order may buy: the seller's limit, else 100 for a "
            "licensed product and 1 otherwise. Quantity q of a licensed product buys one "
            "license with q times maxActivations seats.",
        },
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
    "subscription": {
        "oneOf": [oa.ref("ProductSubscription"), {"type": "null"}],
        "description": "Sold as a subscription: charged every intervalCount interval at "
        "its price, until cancelled (what the product page says as every month); null when it "
        "is bought once.",
    },
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
    "ProductSubscription": {
        "type": "object",
        "required": ["interval", "intervalCount"],
        "properties": {
            "interval": {"type": "string", "enum": list(INTERVALS)},
            "intervalCount": {"type": "integer", "minimum": 1, "maximum": 52},
        },
    },
    "Currency": CURRENCY,
}


# --- admin products and releases -------------------------------------------------------

PRICE_INPUT = body_schema(
    {
        "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "amount": {"type": "integer", "minimum": 0, "maximum": MAX_AMOUNT},
    },
    ["currency", "amount"],
)
LICENSING_INPUT = body_schema(
    {
        "licensed": {"type": "boolean"},
        "maxActivations": {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_ACTIVATIONS},
        "maxQuantity": {
            "type": ["integer", "null"],
            "minimum": 1,
            "maximum": MAX_QUANTITY,
            "description": "The most one order may buy; null = 100 for a licensed product, "
            "1 otherwise",
        },
        "durationDays": {
            "type": ["integer", "null"],
            "minimum": 1,
            "maximum": MAX_DURATION_DAYS,
            "description": "null = perpetual",
        },
    },
    [],
)
PRODUCT_INPUT_FIELDS = {
    "slug": SLUG,
    "name": text_schema(200, min_length=1),
    "summary": text_schema(500),
    "description": {**text_schema(MAX_MARKDOWN, multiline=True), "description": "Markdown"},
    "published": {"type": "boolean"},
    "licensing": LICENSING_INPUT,
    "prices": {
        "type": "array",
        "maxItems": MAX_PRICES,
        "items": PRICE_INPUT,
        "description": "Each currency at most once; currencies must exist.",
    },
}
# The admin sees licensing.maxQuantity as stored: null when the default applies.
ADMIN_LICENSING = {
    **LICENSING,
    "properties": {
        **LICENSING["properties"],
        "maxQuantity": {
            "type": ["integer", "null"],
            "minimum": 1,
            "maximum": MAX_QUANTITY,
            "description": "As set; null = the default (100 for a licensed product, 1 "
            "otherwise), which the public catalogue shows instead.",
        },
    },
}
ADMIN_PRODUCT_FIELDS = {
    **PRODUCT_FIELDS,
    "licensing": oa.ref("AdminLicensing"),
    "published": {"type": "boolean"},
    "archived": {"type": "boolean"},
    "createdAt": {"type": "string", "format": "date-time"},
}
ADMIN_PRODUCT = {
    "type": "object",
    "required": list(ADMIN_PRODUCT_FIELDS),
    "properties": ADMIN_PRODUCT_FIELDS,
}
DELETED = {
    "type": "object",
    "required": ["slug", "deleted", "archived", "message"],
    "properties": {
        "slug": {"type": "string"},
        "deleted": {"type": "boolean"},
        "archived": {"type": "boolean"},
        "message": {"type": "string"},
    },
}
SLUG_PARAM = oa.path_param("slug", {"type": "string"})
ADMIN_TAGS = ["admin", "store"]

ADMIN_PRODUCT_PATHS = {
    "/api/admin/products": {
        "get": oa.operation(
            "All products, drafts and archived ones too (admin)",
            {**oa.ok(oa.page_of(oa.ref("AdminProduct"))), **oa.errors(401, 403, 422)},
            params=[
                *oa.PAGING_PARAMS,
                oa.query_param(
                    "q",
                    text_schema(text.MAX_SEARCH_LENGTH),
                    "Case-insensitive substring of the name or summary.",
                ),
            ],
            tags=ADMIN_TAGS,
        ),
        "post": oa.operation(
            "Create a product (admin); 409 slug_taken, or product_has_no_release when "
            "published (a new product has no release yet)",
            {
                **oa.ok(oa.ref("AdminProduct"), "Created", 201),
                **oa.errors(401, 403, 409, 415, 422),
            },
            body=body_schema(PRODUCT_INPUT_FIELDS, ["slug", "name"]),
            csrf=True,
            tags=ADMIN_TAGS,
        ),
    },
    "/api/admin/products/{slug}": {
        "get": oa.operation(
            "One product (admin)",
            {**oa.ok(oa.ref("AdminProduct")), **oa.errors(401, 403, 404)},
            params=[SLUG_PARAM],
            tags=ADMIN_TAGS,
        ),
        "patch": oa.operation(
            "Change some fields of a product (admin); prices, if sent, replace all prices; "
            "409 product_has_no_release when publishing one without a stable release",
            {**oa.ok(oa.ref("AdminProduct")), **oa.errors(401, 403, 404, 409, 415, 422)},
            params=[SLUG_PARAM],
            body=body_schema(
                {**PRODUCT_INPUT_FIELDS, "archived": {"type": "boolean"}},
                [],
            ),
            csrf=True,
            tags=ADMIN_TAGS,
        ),
        "delete": oa.operation(
            "Delete a product, or archive it when orders refer to it (admin)",
            {**oa.ok(DELETED), **oa.errors(401, 403, 404)},
            params=[SLUG_PARAM],
            csrf=True,
            tags=ADMIN_TAGS,
        ),
    },
    "/api/admin/products/{slug}/releases": {
        "post": oa.operation(
            "Upload a release file (admin); the version must parse under the product's "
            "versionScheme (422); 409 version_exists for the same version, compared as "
            "versions (1.0 and 1.0.0 under PEP 440)",
            {
                **oa.ok(oa.ref("Release"), "Created", 201),
                **oa.errors(401, 403, 404, 409, 413, 415, 422),
            },
            params=[SLUG_PARAM],
            body={
                "type": "object",
                "additionalProperties": False,
                "required": ["version", "file"],
                "properties": {
                    "version": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9.+_-]{0,49}$"},
                    "channel": {"type": "string", "enum": list(RELEASE_CHANNELS)},
                    "changelog": {
                        "type": "string",
                        "maxLength": releases.MAX_CHANGELOG,
                        "description": "Markdown; rendered and sanitised as changelogHtml",
                    },
                    **{
                        name: {
                            "type": "string",
                            "pattern": r"^[0-9]{1,6}(\.[0-9]{1,6}){0,3}$",
                            "description": description,
                        }
                        for name, description in (
                            ("requires", "minimum host platform version, e.g. 6.0"),
                            ("requiresPhp", "minimum PHP version, e.g. 8.1"),
                            ("tested", "platform version tested up to, e.g. 6.7"),
                        )
                    },
                    "file": {"type": "string", "format": "binary"},
                },
            },
            body_content_type="multipart/form-data",
            csrf=True,
            tags=ADMIN_TAGS,
        ),
    },
}

ADMIN_PRODUCT_SCHEMAS = {"AdminProduct": ADMIN_PRODUCT, "AdminLicensing": ADMIN_LICENSING}


# --- admin currencies ------------------------------------------------------------------

ADMIN_CURRENCY = {
    "allOf": [
        oa.ref("Currency"),
        {"type": "object", "required": ["enabled"], "properties": {"enabled": {"type": "boolean"}}},
    ]
}
CONFLICTS = (
    "409: currency_exists, currency_is_default (the default cannot be disabled or unset; "
    "make another currency the default), currency_disabled (a disabled currency cannot be "
    "the default)."
)

ADMIN_CURRENCY_PATHS = {
    "/api/admin/currencies": {
        "get": oa.operation(
            "All currencies, disabled ones too (admin)",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["items"],
                        "properties": {
                            "items": {"type": "array", "items": oa.ref("AdminCurrency")}
                        },
                    }
                ),
                **oa.errors(401, 403),
            },
            tags=["admin", "store"],
        ),
        "post": {
            **oa.operation(
                "Add a currency (admin); default: true makes it the only default",
                {
                    **oa.ok(oa.ref("AdminCurrency"), "Created", 201),
                    **oa.errors(401, 403, 409, 415, 422),
                },
                body=body_schema(
                    {
                        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
                        "name": text_schema(100, min_length=1),
                        "symbol": text_schema(8, min_length=1),
                        "decimals": {
                            "type": "integer",
                            "minimum": 0,
                            "maximum": currencies.MAX_DECIMALS,
                        },
                        "enabled": {"type": "boolean"},
                        "default": {"type": "boolean"},
                    },
                    ["code", "name", "symbol"],
                ),
                csrf=True,
                tags=["admin", "store"],
            ),
            "description": CONFLICTS,
        },
    },
    "/api/admin/currencies/{code}": {
        "patch": {
            **oa.operation(
                "Change a currency: enable/disable, make default, rename (admin)",
                {**oa.ok(oa.ref("AdminCurrency")), **oa.errors(401, 403, 404, 409, 415, 422)},
                params=[oa.path_param("code", {"type": "string"})],
                body=body_schema(
                    {
                        "name": text_schema(100, min_length=1),
                        "symbol": text_schema(8, min_length=1),
                        "enabled": {"type": "boolean"},
                        "default": {"type": "boolean"},
                    },
                    [],
                ),
                csrf=True,
                tags=["admin", "store"],
            ),
            "description": CONFLICTS,
        },
    },
}

ADMIN_CURRENCY_SCHEMAS = {"AdminCurrency": ADMIN_CURRENCY}


# --- admin product images ---------------------------------------------------------------

IMAGE_SIZE = {
    "type": "object",
    "required": ["webp", "fallback", "fallbackType", "width", "height"],
    "properties": {
        "webp": {"type": "string", "description": "/media/<sha256>.webp"},
        "fallback": {"type": "string", "description": "/media/<sha256>.jpg (or .png)"},
        "fallbackType": {"type": "string", "enum": ["image/jpeg", "image/png"]},
        "width": {"type": "integer", "minimum": 1},
        "height": {"type": "integer", "minimum": 1},
    },
}
ADMIN_IMAGE = {
    "type": "object",
    "required": ["id", "position", "alt", "width", "height", "sizes", "createdAt"],
    "properties": {
        "id": {"type": "integer"},
        "position": {"type": "integer", "minimum": 0, "description": "0: the card's picture"},
        "alt": {"type": "string"},
        "width": {"type": "integer", "description": "of the upload, the right way up"},
        "height": {"type": "integer"},
        "sizes": {
            "type": "object",
            "required": list(media.SIZES),
            "properties": {name: oa.ref("AdminImageSize") for name in media.SIZES},
            "description": "card: 480 wide; page: 1200 wide; og: 1200 × 630 cropped",
        },
        "createdAt": DATE_TIME,
    },
}
IMAGE_ID_PARAM = oa.path_param("image_id", {"type": "integer", "minimum": 1})
ADMIN_IMAGE_PATHS = {
    "/api/admin/products/{slug}/images": {
        "get": oa.operation(
            "A product's images in their order (admin)",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["items"],
                        "properties": {"items": {"type": "array", "items": oa.ref("AdminImage")}},
                    }
                ),
                **oa.errors(401, 403, 404),
            },
            params=[SLUG_PARAM],
            tags=ADMIN_TAGS,
        ),
        "post": oa.operation(
            "Add an image (admin): PNG, JPEG or WebP, recognised from its bytes, at most "
            f"{format_filesize(media.MAX_BYTES)} and {media.MAX_SIDE} pixels a side; "
            "stored re-encoded without metadata, in the sizes the pages use",
            {
                **oa.ok(oa.ref("AdminImage"), "Created", 201),
                **oa.errors(401, 403, 404, 413, 415, 422),
            },
            params=[SLUG_PARAM],
            body={
                "type": "object",
                "additionalProperties": False,
                "required": ["file", "alt"],
                "properties": {
                    "file": {"type": "string", "format": "binary"},
                    "alt": text_schema(media.MAX_ALT, min_length=1),
                },
            },
            body_content_type="multipart/form-data",
            csrf=True,
            tags=ADMIN_TAGS,
        ),
    },
    "/api/admin/products/{slug}/images/{image_id}": {
        "patch": oa.operation(
            "Change an image's alt text or position (admin; 0 is first, others move along)",
            {**oa.ok(oa.ref("AdminImage")), **oa.errors(401, 403, 404, 415, 422)},
            params=[SLUG_PARAM, IMAGE_ID_PARAM],
            body=body_schema(
                {
                    "alt": text_schema(media.MAX_ALT, min_length=1),
                    "position": {"type": "integer", "minimum": 0, "maximum": 1000},
                },
                [],
            ),
            csrf=True,
            tags=ADMIN_TAGS,
        ),
        "delete": oa.operation(
            "Delete an image and its stored sizes (admin)",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["id", "deleted"],
                        "properties": {"id": {"type": "integer"}, "deleted": {"type": "boolean"}},
                    }
                ),
                **oa.errors(401, 403, 404),
            },
            params=[SLUG_PARAM, IMAGE_ID_PARAM],
            csrf=True,
            tags=ADMIN_TAGS,
        ),
    },
}
ADMIN_IMAGE_SCHEMAS = {"AdminImage": ADMIN_IMAGE, "AdminImageSize": IMAGE_SIZE}


# --- a product sold as a subscription -----------------------------------------------------

TRIAL_DAYS = {
    "type": "integer",
    "minimum": 0,
    "maximum": MAX_TRIAL_DAYS,
    "description": "Days free before the first charge, for a customer's first subscription "
    "of the product only (0: none)",
}
SUBSCRIPTION_PLAN = {
    "type": "object",
    "required": ["product", "interval", "intervalCount", "active", "trialDays"],
    "properties": {
        "product": SLUG_SCHEMA,
        "interval": {"type": "string", "enum": list(INTERVALS)},
        "intervalCount": {"type": "integer", "minimum": 1, "maximum": 52},
        "active": {"type": "boolean"},
        "trialDays": TRIAL_DAYS,
    },
}
SUBSCRIPTION_PLAN_PATHS = {
    "/api/admin/products/{slug}/subscription": {
        "get": oa.operation(
            "How the product is sold as a subscription (admin); 404 "
            "subscription_plan_not_found when it is not",
            {**oa.ok(oa.ref("SubscriptionPlan")), **oa.errors(401, 403, 404)},
            params=[SLUG_PARAM],
            tags=ADMIN_TAGS,
        ),
        "put": oa.operation(
            "Sell a licensed product as a subscription billed every intervalCount interval "
            "at its own price, free for the first trialDays (0-90; one trial per customer "
            "and product), or stop (active false: the subscriptions sold go on); 422 "
            "for a product without licenses, more than three years between charges or "
            "a trial outside 0-90 days",
            {
                **oa.ok(oa.ref("SubscriptionPlan")),
                **oa.ok(oa.ref("SubscriptionPlan"), "Created", 201),
                **oa.errors(401, 403, 404, 415, 422),
            },
            params=[SLUG_PARAM],
            body=body_schema(
                {
                    "interval": {"type": "string", "enum": list(INTERVALS)},
                    "intervalCount": {"type": "integer", "minimum": 1, "maximum": 52},
                    "active": {"type": "boolean"},
                    "trialDays": TRIAL_DAYS,
                },
                ["interval"],
            ),
            csrf=True,
            tags=ADMIN_TAGS,
        ),
    },
}
SUBSCRIPTION_PLAN_SCHEMAS = {"SubscriptionPlan": SUBSCRIPTION_PLAN}
