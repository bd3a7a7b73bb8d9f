"""OpenAPI of the shop's brand (GET/PUT /api/admin/settings/brand)."""

from __future__ import annotations

from cmsshop import openapi as oa
from cmsshop.services.storefront import brand

TEXT = {
    name: {"type": ["string", "null"], "maxLength": longest}
    for name, (longest, _lines) in brand.TEXT_FIELDS.items()
}

OPENAPI_SCHEMAS = {
    "BrandUpdate": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            **TEXT,
            "accent": {
                "type": ["string", "null"],
                "description": "#rrggbb, at least 4.5:1 against white text; null or empty "
                "for the default",
            },
            "featured": {
                "type": "array",
                "maxItems": brand.MAX_FEATURED,
                "items": {"type": "integer"},
                "description": "Ids of published products, in the order the home page shows them",
            },
        },
    },
    "Brand": {
        "type": "object",
        "required": [*brand.FIELDS, "logoUrl", "sources"],
        "properties": {
            "shopName": {"type": "string", "description": "Falls back to the site name"},
            "accent": {"type": ["string", "null"], "description": "null: the default"},
            "headline": {"type": "string"},
            "intro": {"type": "string"},
            "featured": {"type": "array", "items": {"type": "integer"}},
            "logoUrl": {"type": ["string", "null"]},
            "sources": {
                "type": "object",
                "additionalProperties": {"type": "string", "enum": ["saved", "default"]},
            },
        },
    },
}

OPENAPI_PATHS = {
    "/api/admin/settings/brand": {
        "get": oa.operation(
            "The shop's brand: name, accent colour, home page headline and intro, featured "
            "products and the logo's URL",
            {**oa.ok(oa.ref("Brand")), **oa.errors(401, 403)},
            tags=["admin", "core"],
        ),
        "put": oa.operation(
            "Update the brand (partial: a field left out keeps its value; null or an empty "
            "string goes back to the default; a too light accent or an unpublished product "
            "is refused with 422)",
            {**oa.ok(oa.ref("Brand")), **oa.errors(401, 403, 415, 422)},
            body=oa.ref("BrandUpdate"),
            csrf=True,
            tags=["admin", "core"],
        ),
    },
}
