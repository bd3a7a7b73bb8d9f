"""The admin console's order pages (/admin/orders), always on: orders exist whatever
modules are on, and an admin can fulfil one by hand without any payment provider."""

from __future__ import annotations

from cmsshop.views.payments import admin_orders_pages

ROUTES = {
    "pages.admin_orders": "/admin/orders",
    "pages.admin_order": "/admin/orders/{number}",
    "pages.admin_order_fulfil": "/admin/orders/{number}/fulfil",
    "pages.admin_order_notes": "/admin/orders/{number}/notes",
}


def includeme(config) -> None:
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.add_page_notices(admin_orders_pages.NOTICES)
    # Only the order pages: the rest of views/payments comes with a payment provider.
    config.scan(admin_orders_pages.__name__)
