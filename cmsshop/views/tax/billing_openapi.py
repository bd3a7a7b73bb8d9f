"""The OpenAPI part of the buyer's billing details (views/tax/billing_api.py); the
checkout's ``billing`` object uses the same schemas (views/checkout/openapi.py)."""

from __future__ import annotations

from cmsshop import openapi as oa
from cmsshop.services.tax.billing import FIELDS, VAT_ID_CHECKS

DESCRIPTIONS = {
    "country": "ISO 3166-1 alpha-2 (either case); required: it decides the tax. An unknown "
    "code is a 422 naming `country`.",
    "region": "ISO 3166-2 subdivision of the country (`US-WA`, or `WA`), optional.",
    "company": "Required with a VAT ID.",
    "addressLine1": "Required with a VAT ID.",
    "city": "Required with a VAT ID.",
    "postalCode": "Required with a VAT ID.",
    "vatId": "An EU VAT ID of the billing country, with its prefix (EL for Greece); spaces "
    "and dots allowed, kept normalised. An invalid one is a 422 naming `vatId`: send it "
    "empty or null to buy as a consumer.",
}
TEXT_RULE = "Trimmed; one line, no control characters."


def _text(field: str, longest: int, nullable: bool = True) -> dict:
    schema = {
        "type": ["string", "null"] if nullable else "string",
        "description": f"{DESCRIPTIONS.get(field, '')} {TEXT_RULE} At most {longest} "
        "characters.".strip(),
    }
    return schema


BILLING_INPUT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["country"],
    "properties": {
        field: _text(field, longest, nullable=field != "country")
        for field, (_attr, longest) in FIELDS.items()
    },
}
BILLING_OUTPUT = {
    "type": "object",
    "required": list(FIELDS),
    "properties": {
        "country": {"type": "string", "pattern": "^[A-Z]{2}$"},
        "region": {"type": ["string", "null"]},
        "name": {"type": "string"},
        **{
            field: {"type": ["string", "null"]}
            for field in ("company", "addressLine1", "addressLine2", "city", "postalCode")
        },
        "vatId": {"type": ["string", "null"], "description": "Normalised: DE136695976."},
    },
}
VAT_ID_CHECK = {
    "type": "string",
    "enum": list(VAT_ID_CHECKS),
    "description": "none: no VAT ID; format_valid: format and check digits passed, no "
    "online check configured; vies_valid / vies_invalid: VIES's answer; vies_unavailable: "
    "VIES could not be reached (the order is flagged for review).",
}

OPENAPI_SCHEMAS = {
    "BillingDetailsInput": BILLING_INPUT,
    "BillingDetails": BILLING_OUTPUT,
}

OPENAPI_PATHS = {
    "/api/account/billing": {
        "get": oa.operation(
            "Your saved billing details (null until saved; prefilled at checkout)",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["billing"],
                        "properties": {
                            "billing": {"oneOf": [oa.ref("BillingDetails"), {"type": "null"}]}
                        },
                    }
                ),
                **oa.errors(401),
            },
            tags=["account"],
        ),
        "put": oa.operation(
            "Replace your saved billing details; the VAT ID is checked as at checkout "
            "(VIES too when configured)",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["billing", "vatIdCheck"],
                        "properties": {
                            "billing": oa.ref("BillingDetails"),
                            "vatIdCheck": VAT_ID_CHECK,
                        },
                    }
                ),
                **oa.errors(401, 403, 415, 422),
            },
            body=oa.ref("BillingDetailsInput"),
            csrf=True,
            tags=["account"],
        ),
    }
}
