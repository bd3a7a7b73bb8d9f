"""The dashboard module: a customer's orders, invoices, downloads (signed URLs and the
cookie-less download route) and licenses (seats, offline activation), then support
tickets (the support module comes with it)."""

from __future__ import annotations

from pyramid.exceptions import ConfigurationError

from cmsshop.models import DELIVERY_MODES
from cmsshop.services.dashboard.downloads import (
    DownloadTokenSigner,
    IFileDelivery,
    make_file_delivery,
)
from cmsshop.settings import as_int, as_str, declare
from cmsshop.views.dashboard import openapi, pages
from cmsshop.views.licensing import offline
from cmsshop.views.licensing import openapi as licensing_openapi

SETTINGS = {
    # Lifetime of a signed download URL, in seconds.
    "cmsshop.download_url_ttl": (as_int, 600, "CMSSHOP_DOWNLOAD_URL_TTL"),
    # stream: this app sends the file; x-accel-redirect: nginx sends it.
    "cmsshop.download_delivery": (as_str, "stream", "CMSSHOP_DOWNLOAD_DELIVERY"),
    # The nginx `internal` location that maps to cmsshop.storage_dir.
    "cmsshop.download_accel_prefix": (as_str, "/protected-files/", None),
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
    if settings["cmsshop.license_self_deactivations_per_month"] < 1:
        raise ConfigurationError("cmsshop.license_self_deactivations_per_month must be at least 1")
    if not 1 <= settings["cmsshop.license_offline_lease_days"] <= 3650:
        raise ConfigurationError("cmsshop.license_offline_lease_days must be 1..3650")


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
    "dashboard.download": "/api/downloads/{token}",
    # The customer's account pages (/account/...): the same services, as HTML.
    "account.overview": "/account",
    "account.orders": "/account/orders",
    "account.order": "/account/orders/{number}",
    "account.invoices": "/account/invoices",
    # Before account.invoice, whose {number} would match "<number>.pdf" too.
    "account.invoice_pdf": "/account/invoices/{number}.pdf",
    "account.invoice": "/account/invoices/{number}",
    "account.downloads": "/account/downloads",
    "account.download": "/account/downloads/{id}",
    "account.licenses": "/account/licenses",
    "account.deactivate": "/account/licenses/{key}/activations/{id}/deactivate",
    "account.offline": "/account/licenses/{key}/offline",
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
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.add_page_notices(pages.NOTICES)
    config.add_openapi(paths=openapi.OPENAPI_PATHS, schemas=openapi.OPENAPI_SCHEMAS)
    config.scan("cmsshop.views.dashboard")
    # Support tickets belong to the customer's account, so they come with the dashboard.
    config.include("cmsshop.modules.support")
    # Offline activation is licensing's code, served from the customer's account (its
    # routes live under /api/dashboard and /account, and go away with them).
    config.add_openapi(
        paths=licensing_openapi.OFFLINE_PATHS, schemas=licensing_openapi.OFFLINE_SCHEMAS
    )
    config.scan(offline.__name__)
