"""The OpenAPI part of the dashboard module: the customer dashboard and the signed download
route (views/dashboard/api.py, downloads.py).

Enumerations come from the models, so the document cannot drift from the CHECK
constraints.
"""

from __future__ import annotations

from cmsshop import openapi as oa
from cmsshop.models import DELIVERY_MODES, ENTITLEMENT_STATUSES, LICENSE_STATUSES
from cmsshop.views.shared.bodies import (
    DATE_TIME,
    NULLABLE_DATE_TIME,
    ORDER_LINE_SCHEMA,
    ORDER_SCHEMA,
    RELEASE_SCHEMA,
)
from cmsshop.views.shared.schema import ID_PARAM, list_operation

KEY_PARAM = oa.path_param(
    "key",
    {"type": "string", "minLength": 1, "maxLength": 64, "examples": ["7KQ2M-9XW4P-..."]},
)
TIME = DATE_TIME
NULLABLE_TIME = NULLABLE_DATE_TIME
ACTIVATION_PROPERTIES = {
    "id": {"type": "integer"},
    "domain": {"type": "string"},
    "fingerprint": {
        "type": "string",
        "description": "The installation's fingerprint, as its runtime sent it",
    },
    "environment": {"type": "string", "enum": ["production", "staging", "local"]},
    "active": {"type": "boolean"},
    "activatedAt": {**TIME, "description": "First seen"},
    "lastValidatedAt": {**NULLABLE_TIME, "description": "Last seen (its last validate)"},
    "deactivatedAt": NULLABLE_TIME,
    "seatHeldUntil": {
        **NULLABLE_TIME,
        "description": "Until when the seat stays taken even once deactivated: the expiry "
        "of the installation's last offline lease, which works without the shop",
    },
}
ACTIVATION_REQUIRED = list(ACTIVATION_PROPERTIES)

INVOICE_LINE_SCHEMA = {
    "type": "object",
    "required": [
        "product",
        "name",
        "quantity",
        "unitAmount",
        "discount",
        "net",
        "taxRate",
        "tax",
        "amount",
    ],
    "description": "A line as issued: net + tax = amount (an invoice from before taxes: "
    "all net at 0 %)",
    "properties": {
        **{k: v for k, v in ORDER_LINE_SCHEMA["properties"].items() if k != "gross"},
        "taxRate": {"type": "string", "description": 'Percent: "19", "25.5"'},
        "amount": {"type": "integer", "minimum": 0, "description": "The line's gross"},
    },
}
INVOICE_TAX_SCHEMA = {
    "type": ["object", "null"],
    "description": "The tax the invoice states (null: issued before taxes)",
    "required": ["regime", "country", "name", "pricesIncludeTax", "notes", "totals"],
    "properties": {
        "regime": {"type": "string"},
        "country": {"type": ["string", "null"]},
        "name": {"type": "string", "enum": ["VAT", "Tax"]},
        "pricesIncludeTax": {"type": "boolean"},
        "notes": {"type": "array", "items": {"type": "string"}},
        "totals": {
            "type": "array",
            "description": "Per rate",
            "items": {
                "type": "object",
                "required": ["rate", "net", "tax", "gross"],
                "properties": {
                    "rate": {"type": "string"},
                    "net": {"type": "integer"},
                    "tax": {"type": "integer"},
                    "gross": {"type": "integer"},
                },
            },
        },
    },
}

OPENAPI_SCHEMAS = {
    "DashboardOrder": ORDER_SCHEMA,
    "DashboardInvoice": {
        "type": "object",
        "required": ["number", "orderNumber", "issuedAt", "currency", "total", "lines", "tax"],
        "properties": {
            "number": {"type": "string", "examples": ["INV-2026-000042"]},
            "orderNumber": {"type": "string"},
            "issuedAt": TIME,
            "currency": {"type": "string"},
            "total": {"type": "integer", "description": "Minor units, tax included"},
            "lines": {"type": "array", "items": INVOICE_LINE_SCHEMA},
            "tax": INVOICE_TAX_SCHEMA,
        },
    },
    "DashboardDownload": {
        "type": "object",
        "required": [
            "id",
            "product",
            "name",
            "latestRelease",
            "licensed",
            "revoked",
            "status",
            "createdAt",
        ],
        "properties": {
            "id": {"type": "integer"},
            "product": {"type": "string", "description": "Product slug"},
            "name": {"type": "string"},
            "latestRelease": {"oneOf": [RELEASE_SCHEMA, {"type": "null"}]},
            "licensed": {"type": "boolean"},
            "revoked": {"type": "boolean"},
            "status": {"type": "string", "enum": list(ENTITLEMENT_STATUSES)},
            "createdAt": TIME,
        },
    },
    "DashboardSignedUrl": {
        "type": "object",
        "required": ["url", "expiresAt"],
        "properties": {"url": {"type": "string", "format": "uri"}, "expiresAt": TIME},
    },
    "DashboardLicense": {
        "type": "object",
        "required": ["key", "product", "status", "expiresAt", "maxActivations", "activations"],
        "properties": {
            "key": {"type": "string"},
            "product": {"type": "string", "description": "Product slug"},
            "status": {"type": "string", "enum": list(LICENSE_STATUSES)},
            "expiresAt": NULLABLE_TIME,
            "maxActivations": {"type": "integer"},
            "activations": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["domain", "fingerprint", "activatedAt", "lastValidatedAt"],
                    "properties": {
                        "domain": {"type": "string"},
                        "fingerprint": {"type": "string"},
                        "activatedAt": TIME,
                        "lastValidatedAt": NULLABLE_TIME,
                    },
                },
            },
        },
    },
    "DashboardActivation": {
        "type": "object",
        "required": ACTIVATION_REQUIRED,
        "properties": ACTIVATION_PROPERTIES,
    },
    "DashboardDeactivation": {
        "type": "object",
        "required": ["outcome", "activation", "activationsUsed", "maxActivations"],
        "properties": {
            "outcome": {
                "type": "string",
                "enum": ["deactivated", "already_inactive"],
                "description": "already_inactive: it was inactive before; nothing changed",
            },
            "activation": {
                "type": "object",
                "required": ACTIVATION_REQUIRED,
                "properties": ACTIVATION_PROPERTIES,
            },
            "activationsUsed": {
                "type": "integer",
                "description": "Production seats in use afterwards",
            },
            "maxActivations": {"type": "integer"},
        },
    },
}

BINARY = {"type": "string", "format": "binary"}
DOWNLOAD_HEADERS = {
    name: {"schema": {"type": "string"}, "description": description}
    for name, description in (
        ("Content-Disposition", "attachment with the release's file name"),
        ("ETag", "The quoted SHA-256 of the file"),
        ("X-Accel-Redirect", f"Only with cmsshop.download_delivery = {DELIVERY_MODES[1]}"),
    )
}


def _file_response(description: str) -> dict:
    return {
        "description": description,
        "headers": DOWNLOAD_HEADERS,
        "content": {"application/octet-stream": {"schema": BINARY}},
    }


OPENAPI_PATHS = {
    "/api/dashboard/orders": {"get": list_operation("Your orders, newest first", "DashboardOrder")},
    "/api/dashboard/invoices": {
        "get": list_operation("Your invoices, newest first", "DashboardInvoice")
    },
    "/api/dashboard/downloads": {
        "get": list_operation("Your download entitlements, newest first", "DashboardDownload")
    },
    "/api/dashboard/downloads/{id}/signed-url": {
        "post": oa.operation(
            "A fresh short-lived download URL for the newest release file "
            "(404 download_not_found / release_not_available, 403 download_on_hold, "
            "410 download_revoked)",
            {**oa.ok(oa.ref("DashboardSignedUrl")), **oa.errors(401, 403, 404, 410)},
            params=[ID_PARAM],
            csrf=True,
            tags=["dashboard"],
        )
    },
    "/api/dashboard/downloads/{id}/license": {
        "post": oa.operation(
            "The license of this purchase, issued now if fulfilment has not (idempotent; "
            "404 license_not_available for an unlicensed product)",
            {**oa.ok(oa.ref("DashboardLicense")), **oa.errors(401, 403, 404, 410)},
            params=[ID_PARAM],
            csrf=True,
            tags=["dashboard"],
        )
    },
    "/api/dashboard/licenses/{key}/activations": {
        "get": list_operation(
            "The active activations (seats in use) of one of your licenses, most recently "
            "activated first (404 license_not_found for a key that is not yours)",
            "DashboardActivation",
            params=[KEY_PARAM],
            errors=(404,),
        )
    },
    "/api/dashboard/licenses/{key}/activations/{id}/deactivate": {
        "post": oa.operation(
            "Free the seat of an activation of your license, e.g. of a site that is gone "
            "(its next validate answers 404 activation_not_found; audited as "
            "customer_deactivate). Idempotent: an inactive one answers 200 with outcome "
            "already_inactive. 404 license_not_found for a key that is not yours, "
            "activation_not_found for an activation of another license. 429 "
            "deactivation_limit_reached (Retry-After) past "
            "cmsshop.license_self_deactivations_per_month in a rolling 30 days.",
            {**oa.ok(oa.ref("DashboardDeactivation")), **oa.errors(401, 403, 404, 429)},
            params=[KEY_PARAM, ID_PARAM],
            csrf=True,
            tags=["dashboard"],
        )
    },
    "/api/downloads/{token}": {
        "get": oa.operation(
            "Download a release file with a signed token (no cookie needed). Supports a "
            "single byte range and If-Range. 403 invalid_download_token, 410 "
            "download_link_expired / download_revoked, 416 range_not_satisfiable.",
            {
                "200": _file_response("The whole file (empty with X-Accel-Redirect)"),
                "206": _file_response("The requested byte range (Content-Range)"),
                **oa.errors(403, 404, 410, 416),
            },
            params=[
                oa.path_param("token", {"type": "string"}),
                {
                    "name": "Range",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": "One byte range, e.g. bytes=1000- (others are ignored)",
                },
                {
                    "name": "If-Range",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": "The ETag of a partial download; a mismatch sends it all",
                },
            ],
            tags=["downloads"],
        )
    },
}
