"""Outgoing webhooks, always on: endpoints in the console and the admin API; events are
written by the features that cause them and delivered by the worker."""

from __future__ import annotations

from cmsshop.services.webhooks.settings import declare_settings
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


def includeme(config) -> None:
    declare_settings(config.get_settings())
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.add_openapi(
        paths=openapi.ADMIN_PATHS, schemas=openapi.ADMIN_SCHEMAS, webhooks=openapi.WEBHOOKS
    )
    config.add_page_notices(admin_pages.NOTICES)
    config.scan("cmsshop.views.webhooks")
