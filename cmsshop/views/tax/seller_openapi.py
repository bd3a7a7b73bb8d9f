"""OpenAPI of the seller's settings (GET/PUT /api/admin/settings/seller)."""

from __future__ import annotations

from cmsshop import openapi as oa
from cmsshop.services.tax import seller

_TYPES = {
    "text": lambda n: {"type": "string", "maxLength": n},
    "lines": lambda n: {"type": "string", "maxLength": n},
    "bool": lambda _n: {"type": "boolean"},
    "codes": lambda _n: {"type": "array", "items": {"type": "string", "maxLength": 10}},
}
FIELD_SCHEMAS = {
    field: _TYPES[kind](longest) for field, (_i, _e, kind, longest) in seller.FIELDS.items()
}
# What the server answers may be longer than what it accepts (an ini default is checked
# at start-up, with the same caps), so the answer's strings carry no maxLength.
SHOWN_SCHEMAS = {
    field: ({"type": "string"} if schema.get("type") == "string" else schema)
    for field, schema in FIELD_SCHEMAS.items()
}

OPENAPI_SCHEMAS = {
    "SellerSettingsUpdate": {
        "type": "object",
        "additionalProperties": False,
        "properties": FIELD_SCHEMAS,
    },
    "SellerSettings": {
        "type": "object",
        "required": [*seller.FIELDS, "missing", "sources", "logoUrl"],
        "properties": {
            **SHOWN_SCHEMAS,
            "missing": {
                "type": "array",
                "items": {"type": "string", "enum": list(seller.REQUIRED)},
                "description": "What a legal invoice needs and is empty",
            },
            "sources": {
                "type": "object",
                "additionalProperties": {"type": "string", "enum": ["saved", "ini"]},
            },
            "logoUrl": {"type": ["string", "null"]},
        },
    },
}

OPENAPI_PATHS = {
    "/api/admin/settings/seller": {
        "get": oa.operation(
            "The seller's legal identity for invoices and the tax settings (saved values "
            "over the ini/environment defaults), and what a legal invoice still misses",
            {**oa.ok(oa.ref("SellerSettings")), **oa.errors(401, 403)},
            tags=["admin", "tax"],
        ),
        "put": oa.operation(
            "Update the seller's identity and tax settings (partial: a field left out "
            "keeps its value; an EU country's VAT ID is checked by format and check digits)",
            {**oa.ok(oa.ref("SellerSettings")), **oa.errors(401, 403, 415, 422)},
            body=oa.ref("SellerSettingsUpdate"),
            csrf=True,
            tags=["admin", "tax"],
        ),
    },
}
