"""The dashboard module: a customer's orders, invoices, downloads (signed URLs and the
cookie-less download route), licenses and support tickets, plus the admin ticket queue."""

from __future__ import annotations

from pyramid.exceptions import ConfigurationError

from cmsshop.models import DELIVERY_MODES
from cmsshop.services.dashboard.downloads import (
    DownloadTokenSigner,
    IFileDelivery,
    make_file_delivery,
)
from cmsshop.services.support import tickets
from cmsshop.settings import as_int, as_str, declare
from cmsshop.views import admin_tickets, dashboard, dashboard_openapi, dashboard_pages, downloads

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


ROUTES = {
    "dashboard.orders": "/api/dashboard/orders",
    "dashboard.invoices": "/api/dashboard/invoices",
    "dashboard.downloads": "/api/dashboard/downloads",
    "dashboard.signed_url": "/api/dashboard/downloads/{id}/signed-url",
    "dashboard.license": "/api/dashboard/downloads/{id}/license",
    "dashboard.activations": "/api/dashboard/licenses/{key}/activations",
    "dashboard.deactivate_activation": (
        "/api/dashboard/licenses/{key}/activations/{id}/deactivate"
    ),
    "dashboard.tickets": "/api/dashboard/tickets",
    "dashboard.download": "/api/downloads/{token}",
    "dashboard.admin_tickets": "/api/admin/tickets",
    "dashboard.admin_ticket": "/api/admin/tickets/{id}",
}


def includeme(config) -> None:
    settings = config.get_settings()
    declare(settings, SETTINGS)
    check_settings(settings)
    config.register_service(
        DownloadTokenSigner(settings["cmsshop.secret"], settings["cmsshop.download_url_ttl"]),
        DownloadTokenSigner,
    )
    # The delivery backend (stream / X-Accel-Redirect) behind one interface.
    config.register_service(make_file_delivery(settings), IFileDelivery)

    config.add_rate_policy(
        tickets.TICKET_POLICY, settings["cmsshop.tickets_per_hour"], tickets.TICKET_WINDOW
    )
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.add_openapi(
        paths=dashboard_openapi.OPENAPI_PATHS, schemas=dashboard_openapi.OPENAPI_SCHEMAS
    )
    # The customer's account pages (/account/...): the same services, as HTML.
    for name, pattern in dashboard_pages.PAGE_ROUTES.items():
        config.add_route(name, pattern)
    config.add_page_notices(dashboard_pages.NOTICES)
    for views in (dashboard, downloads, admin_tickets, dashboard_pages):
        config.scan(views.__name__)
