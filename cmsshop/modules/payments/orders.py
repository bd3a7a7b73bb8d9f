"""The admin console's order pages (/admin/orders), always on: orders exist whatever
modules are on, and an admin can fulfil one by hand without any payment provider."""

from __future__ import annotations

from cmsshop.views.payments import admin_orders_pages, admin_refund_pages

ROUTES = {
    "pages.admin_orders": "/admin/orders",
    "pages.admin_order": "/admin/orders/{number}",
    "pages.admin_order_fulfil": "/admin/orders/{number}/fulfil",
    "pages.admin_order_notes": "/admin/orders/{number}/notes",
    "pages.admin_order_refund": "/admin/orders/{number}/refund",
    "pages.admin_order_refund_confirm": "/admin/orders/{number}/refund/confirm",
    "pages.admin_order_refund_result": "/admin/orders/{number}/refunds/{id}",
}


def includeme(config) -> None:
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.add_page_notices(admin_orders_pages.NOTICES)
    # Only the order pages: the rest of views/payments comes with a payment provider.
    config.scan(admin_orders_pages.__name__)
    config.scan(admin_refund_pages.__name__)
