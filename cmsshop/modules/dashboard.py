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
from cmsshop.views import (
    admin_tickets,
    admin_tickets_pages,
    dashboard,
    dashboard_openapi,
    dashboard_pages,
    downloads,
    offline_activation,
    tickets_pages,
)

SETTINGS = {
    # Lifetime of a signed download URL, in seconds.
    "cmsshop.download_url_ttl": (as_int, 600, "CMSSHOP_DOWNLOAD_URL_TTL"),
    # stream: this app sends the file; x-accel-redirect: nginx sends it.
    "cmsshop.download_delivery": (as_str, "stream", "CMSSHOP_DOWNLOAD_DELIVERY"),
    # The nginx `internal` location that maps to cmsshop.storage_dir.
    "cmsshop.download_accel_prefix": (as_str, "/protected-files/", None),
    "cmsshop.tickets_per_hour": (as_int, 5, None),
    # A customer's replies to their tickets (staff replies are not limited).
    "cmsshop.ticket_replies_per_hour": (as_int, 30, None),
    # Seats a customer may free from the dashboard per license in a rolling 30 days.
    "cmsshop.license_self_deactivations_per_month": (as_int, 5, None),
    # Lifetime of a lease made by offline activation (never past the license's expiry).
    "cmsshop.license_offline_lease_days": (as_int, 365, None),
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
    if settings["cmsshop.license_self_deactivations_per_month"] < 1:
        raise ConfigurationError("cmsshop.license_self_deactivations_per_month must be at least 1")
    if not 1 <= settings["cmsshop.license_offline_lease_days"] <= 3650:
        raise ConfigurationError("cmsshop.license_offline_lease_days must be 1..3650")
    if settings["cmsshop.ticket_replies_per_hour"] < 1:
        raise ConfigurationError("cmsshop.ticket_replies_per_hour must be at least 1")


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
    "dashboard.offline_activation": "/api/dashboard/licenses/{key}/offline-activation",
    "dashboard.tickets": "/api/dashboard/tickets",
    "dashboard.ticket": "/api/dashboard/tickets/{id}",
    "dashboard.ticket_messages": "/api/dashboard/tickets/{id}/messages",
    "dashboard.download": "/api/downloads/{token}",
    "dashboard.admin_tickets": "/api/admin/tickets",
    "dashboard.admin_ticket": "/api/admin/tickets/{id}",
    "dashboard.admin_ticket_messages": "/api/admin/tickets/{id}/messages",
}

# Support ticket pages, the customer's and the admin's ("new" before "{id}").
TICKET_PAGE_ROUTES = {
    "pages.account_tickets": "/account/tickets",
    "pages.account_ticket_new": "/account/tickets/new",
    "pages.account_ticket": "/account/tickets/{id}",
    "pages.account_ticket_reply": "/account/tickets/{id}/reply",
    "pages.admin_tickets": "/admin/tickets",
    "pages.admin_ticket": "/admin/tickets/{id}",
    "pages.admin_ticket_reply": "/admin/tickets/{id}/reply",
    "pages.admin_ticket_status": "/admin/tickets/{id}/status",
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
    config.add_rate_policy(
        tickets.REPLY_POLICY, settings["cmsshop.ticket_replies_per_hour"], tickets.TICKET_WINDOW
    )
    for name, pattern in {**ROUTES, **TICKET_PAGE_ROUTES}.items():
        config.add_route(name, pattern)
    config.add_page_notices({**tickets_pages.NOTICES, **admin_tickets_pages.NOTICES})
    config.add_openapi(
        paths=dashboard_openapi.OPENAPI_PATHS, schemas=dashboard_openapi.OPENAPI_SCHEMAS
    )
    config.add_openapi(
        paths=offline_activation.OPENAPI_PATHS, schemas=offline_activation.OPENAPI_SCHEMAS
    )
    # The customer's account pages (/account/...): the same services, as HTML.
    for name, pattern in dashboard_pages.PAGE_ROUTES.items():
        config.add_route(name, pattern)
    config.add_page_notices(dashboard_pages.NOTICES)
    for views in (
        dashboard,
        downloads,
        admin_tickets,
        dashboard_pages,
        tickets_pages,
        admin_tickets_pages,
        offline_activation,
    ):
        config.scan(views.__name__)
