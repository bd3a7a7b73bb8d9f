"""The dashboard module: a customer's orders, invoices, downloads (signed URLs and the
cookie-less download route), licenses and support tickets, plus the admin ticket queue."""

from __future__ import annotations

from pyramid.exceptions import ConfigurationError

from cmsshop import openapi as oa
from cmsshop.models.dashboard import DELIVERY_MODES, TICKET_STATUSES
from cmsshop.services.dashboard.downloads import (
    DownloadTokenSigner,
    IFileDelivery,
    make_file_delivery,
)
from cmsshop.services.support import tickets
from cmsshop.settings import as_int, as_str, declare

SETTINGS = {
    # Lifetime of a signed download URL, in seconds.
    "cmsshop.download_url_ttl": (as_int, 600, "CMSSHOP_DOWNLOAD_URL_TTL"),
    # stream: this app sends the file; x-accel-redirect: nginx sends it.
    "cmsshop.download_delivery": (as_str, "stream", "CMSSHOP_DOWNLOAD_DELIVERY"),
    # The nginx `internal` location that maps to cmsshop.storage_dir.
    "cmsshop.download_accel_prefix": (as_str, "/protected-files/", None),
    "cmsshop.tickets_per_hour": (as_int, 5, None),
}


def check_settings(settings: dict) -> None:
    if not 1 <= settings["cmsshop.download_url_ttl"] <= 7 * 24 * 3600:
        raise ConfigurationError("cmsshop.download_url_ttl must be 1..604800 seconds")
    if settings["cmsshop.download_delivery"] not in DELIVERY_MODES:
        raise ConfigurationError(
            f"cmsshop.download_delivery must be one of {', '.join(DELIVERY_MODES)}"
        )
    if settings["cmsshop.tickets_per_hour"] < 1:
        raise ConfigurationError("cmsshop.tickets_per_hour must be at least 1")


# --- OpenAPI -----------------------------------------------------------------------------

ID_PARAM = oa.path_param("id", {"type": "integer", "minimum": 1, "maximum": 2**31 - 1})
TIME = {"type": "string", "format": "date-time"}
NULLABLE_TIME = {"type": ["string", "null"], "format": "date-time"}
# Ticket text must contain a non-space character and no NUL (PostgreSQL cannot store
# it). Said in the descriptions, not as a `pattern`: a regular expression on a
# 20,000-character field makes schema-driven generators (schemathesis) crawl.
TEXT_RULE = "Must contain a character other than white space; NUL characters are refused."

LINE = {
    "type": "object",
    "required": ["product", "name", "amount"],
    "properties": {
        "product": {"type": "string"},
        "name": {"type": "string"},
        "amount": {"type": "integer", "description": "Minor units"},
    },
}

TICKET_PROPERTIES = {
    "id": {"type": "integer"},
    "number": {"type": "string", "pattern": "^TCK-[0-9A-Z]{6}$"},
    "subject": {"type": "string"},
    "body": {"type": "string"},
    "status": {"type": "string", "enum": list(TICKET_STATUSES)},
    "orderNumber": {"type": ["string", "null"]},
    "createdAt": TIME,
    "updatedAt": TIME,
}
TICKET_REQUIRED = ["id", "number", "subject", "body", "status", "orderNumber", "createdAt"]

SCHEMAS = {
    "DashboardOrder": {
        "type": "object",
        "required": [
            "number",
            "status",
            "currency",
            "total",
            "items",
            "provider",
            "createdAt",
            "paidAt",
        ],
        "properties": {
            "number": {"type": "string"},
            "status": {"type": "string"},
            "currency": {"type": "string"},
            "total": {"type": "integer", "description": "Minor units"},
            "items": {"type": "array", "items": LINE},
            "provider": {"type": "string"},
            "createdAt": TIME,
            "paidAt": NULLABLE_TIME,
        },
    },
    "DashboardInvoice": {
        "type": "object",
        "required": ["number", "orderNumber", "issuedAt", "currency", "total", "lines"],
        "properties": {
            "number": {"type": "string", "examples": ["INV-2026-000042"]},
            "orderNumber": {"type": "string"},
            "issuedAt": TIME,
            "currency": {"type": "string"},
            "total": {"type": "integer", "description": "Minor units"},
            "lines": {
                "type": "array",
                "items": {"type": "object", "properties": LINE["properties"]},
            },
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
            "latestRelease": {
                "type": ["object", "null"],
                "required": ["version", "fileName", "size", "sha256", "releasedAt"],
                "properties": {
                    "version": {"type": "string"},
                    "fileName": {"type": "string"},
                    "size": {"type": "integer"},
                    "sha256": {"type": "string"},
                    "releasedAt": TIME,
                },
            },
            "licensed": {"type": "boolean"},
            "revoked": {"type": "boolean"},
            "status": {"type": "string", "enum": ["active", "on_hold", "revoked"]},
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
            "status": {"type": "string", "enum": ["active", "suspended", "revoked", "expired"]},
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
    "DashboardTicket": {
        "type": "object",
        "required": TICKET_REQUIRED,
        "properties": TICKET_PROPERTIES,
    },
    "DashboardAdminTicket": {
        "type": "object",
        "required": [*TICKET_REQUIRED, "customer"],
        "properties": {
            **TICKET_PROPERTIES,
            "customer": {
                "type": "object",
                "required": ["id", "email", "name"],
                "properties": {
                    "id": {"type": "integer"},
                    "email": {"type": "string"},
                    "name": {"type": "string"},
                },
            },
        },
    },
}

NEW_TICKET = {
    "type": "object",
    "required": ["subject", "body"],
    "additionalProperties": False,
    "properties": {
        "subject": {
            "type": "string",
            "minLength": 3,
            "maxLength": 200,
            "description": TEXT_RULE,
        },
        "body": {
            "type": "string",
            "minLength": 1,
            "maxLength": 20000,
            "description": TEXT_RULE,
        },
        "orderNumber": {
            "type": "string",
            "maxLength": 32,
            "description": "One of your order numbers (422 otherwise)",
        },
    },
}

BINARY = {"type": "string", "format": "binary"}
DOWNLOAD_HEADERS = {
    name: {"schema": {"type": "string"}, "description": description}
    for name, description in (
        ("Content-Disposition", "attachment with the release's file name"),
        ("ETag", "The quoted SHA-256 of the file"),
        ("X-Accel-Redirect", "Only with cmsshop.download_delivery = x-accel-redirect"),
    )
}


def _file_response(description: str) -> dict:
    return {
        "description": description,
        "headers": DOWNLOAD_HEADERS,
        "content": {"application/octet-stream": {"schema": BINARY}},
    }


def _list(summary: str, schema: str, params: list | None = None, tag: str = "dashboard") -> dict:
    return oa.operation(
        summary,
        {**oa.ok(oa.page_of(oa.ref(schema))), **oa.errors(401, 403, 422)},
        params=[*(params or []), *oa.PAGING_PARAMS],
        tags=[tag],
    )


PATHS = {
    "/api/dashboard/orders": {"get": _list("Your orders, newest first", "DashboardOrder")},
    "/api/dashboard/invoices": {"get": _list("Your invoices, newest first", "DashboardInvoice")},
    "/api/dashboard/downloads": {
        "get": _list("Your download entitlements, newest first", "DashboardDownload")
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
    "/api/dashboard/tickets": {
        "get": _list("Your support tickets, newest first", "DashboardTicket"),
        "post": oa.operation(
            "Open a support ticket (limited per hour: 429 with Retry-After)",
            {
                **oa.ok(oa.ref("DashboardTicket"), "Created", 201),
                **oa.errors(401, 403, 415, 422, 429),
            },
            body=NEW_TICKET,
            csrf=True,
            tags=["dashboard"],
        ),
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
    "/api/admin/tickets": {
        "get": _list(
            "Every customer's support tickets, newest first (admin)",
            "DashboardAdminTicket",
            params=[oa.query_param("status", {"type": "string", "enum": list(TICKET_STATUSES)})],
            tag="admin",
        )
    },
    "/api/admin/tickets/{id}": {
        "patch": oa.operation(
            "Change a ticket's status (admin; 404 ticket_not_found)",
            {**oa.ok(oa.ref("DashboardAdminTicket")), **oa.errors(401, 403, 404, 415, 422)},
            body={
                "type": "object",
                "required": ["status"],
                "additionalProperties": False,
                "properties": {"status": {"type": "string", "enum": list(TICKET_STATUSES)}},
            },
            params=[ID_PARAM],
            csrf=True,
            tags=["admin"],
        )
    },
}


def includeme(config) -> None:
    settings = config.get_settings()
    declare(settings, SETTINGS)
    check_settings(settings)
    config.registry["cmsshop.download_signer"] = DownloadTokenSigner(
        settings["cmsshop.secret"], settings["cmsshop.download_url_ttl"]
    )
    # The delivery backend (stream / X-Accel-Redirect) behind one interface.
    config.registry.registerUtility(make_file_delivery(settings), IFileDelivery)

    config.add_rate_policy(
        tickets.TICKET_POLICY, settings["cmsshop.tickets_per_hour"], tickets.TICKET_WINDOW
    )
    config.add_route("dashboard.orders", "/api/dashboard/orders")
    config.add_route("dashboard.invoices", "/api/dashboard/invoices")
    config.add_route("dashboard.downloads", "/api/dashboard/downloads")
    config.add_route("dashboard.signed_url", "/api/dashboard/downloads/{id}/signed-url")
    config.add_route("dashboard.license", "/api/dashboard/downloads/{id}/license")
    config.add_route("dashboard.tickets", "/api/dashboard/tickets")
    config.add_route("dashboard.download", "/api/downloads/{token}")
    config.add_route("dashboard.admin_tickets", "/api/admin/tickets")
    config.add_route("dashboard.admin_ticket", "/api/admin/tickets/{id}")
    config.add_openapi(paths=PATHS, schemas=SCHEMAS)
    config.scan("cmsshop.views.dashboard")
    config.scan("cmsshop.views.downloads")
    config.scan("cmsshop.views.admin_tickets")
