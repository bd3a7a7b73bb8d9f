"""JSON bodies of the resources more than one feature shows (each written once).

A resource shown by a single feature is serialised next to that feature's views.
Services return models or dataclasses; only the view layer turns them into camelCase JSON.
"""

from __future__ import annotations

from cmsshop.models import ORDER_STATUSES, RELEASE_CHANNELS
from cmsshop.services.payments.lines import (
    discount_of,
    gross_of,
    net_of,
    quantity_of,
    tax_of,
    unit_amount_of,
)
from cmsshop.util import isoformat_z


def user_body(user) -> dict | None:
    if user is None:
        return None
    return {"id": user.id, "email": user.email, "name": user.name, "role": user.role}


def order_body(order) -> dict:
    """An Order with its items (a line placed before quantities reads as one unit at its
    amount)."""
    return {
        "number": order.number,
        "status": order.status,
        "currency": order.currency,
        "total": order.total,
        "discount": order.discount,
        "couponCode": order.coupon_code,
        "items": [
            {
                "product": item.product_slug,
                "name": item.name,
                "quantity": quantity_of(item),
                "unitAmount": unit_amount_of(item),
                "discount": discount_of(item),
                "amount": item.amount,
                "net": net_of(item),
                "tax": tax_of(item),
                "gross": gross_of(item),
            }
            for item in order.items
        ],
        "tax": order.tax,
        "taxDetails": tax_details_body(order.tax_details),
        "provider": order.provider,
        "createdAt": isoformat_z(order.created_at),
        "paidAt": isoformat_z(order.paid_at),
        # The version of the terms of sale the buyer accepted (None: none were published).
        "termsVersion": order.terms_version,
        "termsAcceptedAt": isoformat_z(order.terms_accepted_at),
    }


def tax_details_body(details) -> dict | None:
    """How the order's tax was decided (services.tax.checkout.details_of), for the buyer
    and the console; None for an order placed before taxes."""
    if not isinstance(details, dict):
        return None
    return {
        "regime": details.get("regime"),
        "country": details.get("country"),
        "rate": details.get("rate") or "0",
        "pricesIncludeTax": bool(details.get("pricesIncludeTax")),
        "notes": list(details.get("notes") or ()),
    }


def error_record_body(record) -> dict:
    """A stored 5xx record (the admin API and ``cmsshop-admin support-code``)."""
    return {
        "supportCode": record.support_code,
        "createdAt": isoformat_z(record.created_at),
        "requestId": record.request_id,
        "method": record.method,
        "path": record.path,
        "status": record.status,
        "code": record.error_code,
        "exceptionType": record.exception_type,
        "traceback": record.traceback,
    }


def release_body(release) -> dict | None:
    """A Release, or a row with its columns (see catalogue.load_cards); None stays None."""
    if release is None:
        return None
    return {
        "version": release.version,
        "fileName": release.file_name,
        "size": release.size,
        "sha256": release.sha256,
        "releasedAt": isoformat_z(release.released_at),
        "channel": release.channel,
        "changelogHtml": release.changelog_html,
    }


# --- their OpenAPI schemas, next to the code that writes them -----------------------------

DATE_TIME = {"type": "string", "format": "date-time"}
NULLABLE_DATE_TIME = {"type": ["string", "null"], "format": "date-time"}

ORDER_LINE_SCHEMA = {
    "type": "object",
    "required": [
        "product",
        "name",
        "quantity",
        "unitAmount",
        "discount",
        "amount",
        "net",
        "tax",
        "gross",
    ],
    "description": "unitAmount x quantity - discount = amount",
    "properties": {
        "product": {"type": "string", "description": "Product slug"},
        "name": {"type": "string"},
        "quantity": {
            "type": "integer",
            "minimum": 1,
            "description": "Units bought; for a licensed product, seat packs of one license",
        },
        "unitAmount": {"type": "integer", "minimum": 0, "description": "Minor units"},
        "discount": {
            "type": "integer",
            "minimum": 0,
            "description": "This line's share of the coupon's discount (minor units)",
        },
        "amount": {
            "type": "integer",
            "minimum": 0,
            "description": "unitAmount x quantity - discount, as prices are entered "
            "(with tax when the shop's prices include it, without otherwise)",
        },
        "net": {"type": "integer", "minimum": 0, "description": "The line without tax"},
        "tax": {"type": "integer", "minimum": 0, "description": "The line's tax"},
        "gross": {
            "type": "integer",
            "minimum": 0,
            "description": "net + tax: what the line adds to the order's total",
        },
    },
}
TAX_DETAILS_SCHEMA = {
    "type": ["object", "null"],
    "description": "How the tax was decided when the order was placed (null: no tax "
    "was computed, an order from before taxes)",
    "required": ["regime", "country", "rate", "pricesIncludeTax", "notes"],
    "properties": {
        "regime": {
            "type": "string",
            "enum": [
                "none",
                "domestic",
                "reverse_charge",
                "oss",
                "micro_seller",
                "outside_scope",
                "local",
                "not_registered",
            ],
        },
        "country": {"type": "string", "description": "Where the sale is taxed"},
        "rate": {"type": "string", "description": 'Percent, e.g. "19" or "25.5"'},
        "pricesIncludeTax": {"type": "boolean"},
        "notes": {"type": "array", "items": {"type": "string"}},
    },
}
ORDER_SCHEMA = {
    "type": "object",
    "required": [
        "number",
        "status",
        "currency",
        "total",
        "discount",
        "couponCode",
        "items",
        "tax",
        "taxDetails",
        "provider",
        "createdAt",
        "paidAt",
        "termsVersion",
        "termsAcceptedAt",
    ],
    "properties": {
        "number": {"type": "string"},
        "status": {"type": "string", "enum": list(ORDER_STATUSES)},
        "currency": {"type": "string"},
        "total": {
            "type": "integer",
            "description": "What the buyer pays: minor units, after the discount, tax included",
        },
        "tax": {"type": "integer", "minimum": 0, "description": "The tax included in total"},
        "taxDetails": TAX_DETAILS_SCHEMA,
        "discount": {
            "type": "integer",
            "minimum": 0,
            "description": "The coupon's discount, included in total (minor units)",
        },
        "couponCode": {"type": ["string", "null"]},
        "items": {"type": "array", "items": ORDER_LINE_SCHEMA},
        "provider": {"type": "string"},
        "createdAt": DATE_TIME,
        "paidAt": NULLABLE_DATE_TIME,
        "termsVersion": {
            "type": ["integer", "null"],
            "description": "The version of the terms of sale (/legal/terms) the buyer "
            "accepted; null when the shop published none",
        },
        "termsAcceptedAt": NULLABLE_DATE_TIME,
    },
}
RELEASE_SCHEMA = {
    "type": "object",
    "required": [
        "version",
        "fileName",
        "size",
        "sha256",
        "releasedAt",
        "channel",
        "changelogHtml",
    ],
    "properties": {
        "version": {"type": "string"},
        "fileName": {"type": "string"},
        "size": {"type": "integer", "minimum": 0},
        "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "releasedAt": DATE_TIME,
        "channel": {"type": "string", "enum": list(RELEASE_CHANNELS)},
        "changelogHtml": {"type": "string", "description": "Rendered, sanitised Markdown"},
    },
}
