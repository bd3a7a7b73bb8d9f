"""Outgoing webhooks, always on: endpoints in the console and the admin API; events are
written by the features that cause them and delivered by the worker."""

from __future__ import annotations

from cmsshop.settings import as_bool, as_float, as_int, as_list, declare
from cmsshop.views.webhooks import admin_pages, openapi

ROUTES: dict[str, str] = {
    "webhooks.admin_endpoints": "/api/admin/webhooks",
    "webhooks.admin_endpoint": "/api/admin/webhooks/{id}",
    "webhooks.admin_rotate": "/api/admin/webhooks/{id}/rotate-secret",
    "webhooks.admin_test": "/api/admin/webhooks/{id}/test",
    "webhooks.admin_deliveries": "/api/admin/webhooks/{id}/deliveries",
    "webhooks.admin_redeliver": "/api/admin/webhooks/{id}/deliveries/{delivery_id}/redeliver",
    # The console.
    "pages.admin_webhooks": "/admin/webhooks",
    "pages.admin_webhook_new": "/admin/webhooks/new",
    "pages.admin_webhook": "/admin/webhooks/{id}",
    "pages.admin_webhook_edit": "/admin/webhooks/{id}/edit",
    "pages.admin_webhook_action": "/admin/webhooks/{id}/{action}",
    "pages.admin_webhook_redeliver": "/admin/webhooks/{id}/deliveries/{delivery_id}/redeliver",
}
SETTINGS = {
    # Endpoints on private, loopback and link-local addresses are refused (when saved and
    # at each delivery, against the DNS answers) unless this is on: development and
    # tests only.
    "cmsshop.webhooks.allow_private_addresses": (
        as_bool,
        False,
        "CMSSHOP_WEBHOOKS_ALLOW_PRIVATE_ADDRESSES",
    ),
    # Seconds to connect, and for the whole attempt (connect, send, read the answer).
    "cmsshop.webhooks.connect_timeout": (as_float, 5.0, "CMSSHOP_WEBHOOKS_CONNECT_TIMEOUT"),
    "cmsshop.webhooks.timeout": (as_float, 15.0, "CMSSHOP_WEBHOOKS_TIMEOUT"),
    # The most of an answer read; the rest is not (the console shows an excerpt).
    "cmsshop.webhooks.max_response_bytes": (as_int, 65536, "CMSSHOP_WEBHOOKS_MAX_RESPONSE_BYTES"),
    # Seconds a delivery is retried for (three days), and after which an endpoint that
    # failed all along is disabled and the admins are mailed.
    "cmsshop.webhooks.retry_for": (as_int, 259200, "CMSSHOP_WEBHOOKS_RETRY_FOR"),
    # Seconds between the worker's passes over due deliveries.
    "cmsshop.webhooks.worker_interval": (as_float, 2.0, "CMSSHOP_WEBHOOKS_WORKER_INTERVAL"),
    # The DNS servers endpoint names are resolved with at delivery ("10.0.0.53",
    # "[2001:db8::53]:5353", separated by spaces); empty: the system resolver.
    "cmsshop.webhooks.nameservers": (as_list, [], "CMSSHOP_WEBHOOKS_NAMESERVERS"),
}


def includeme(config) -> None:
    declare(config.get_settings(), SETTINGS)
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.add_openapi(paths=openapi.ADMIN_PATHS, schemas=openapi.ADMIN_SCHEMAS)
    config.add_page_notices(admin_pages.NOTICES)
    config.scan("cmsshop.views.webhooks")
