"""Checkout's wiring, included by the store module (checkout sells what the store lists,
so its routes live under the store's /api/store prefix and go away with it)."""

from __future__ import annotations

from pyramid.exceptions import ConfigurationError

from cmsshop.security import LoggedIn
from cmsshop.services.checkout import carts, expiry
from cmsshop.settings import as_int, declare
from cmsshop.views.checkout import admin_pages, openapi

ROUTES = {
    "store.checkout": "/api/store/checkout",
    "store.checkout_sandbox": "/api/store/checkout/sandbox/{number}",
    # The visitor's cart (anonymous or logged in) and checking it out, as a guest too.
    "store.carts": "/api/store/carts",
    "store.cart": "/api/store/carts/{cart}",
    "store.cart_line": "/api/store/carts/{cart}/lines/{product}",
    "store.cart_coupon": "/api/store/carts/{cart}/coupon",
    "store.cart_prices": "/api/store/carts/{cart}/accept-prices",
    "store.cart_checkout": "/api/store/carts/{cart}/checkout",
    # Coupons in the admin API and the console.
    "store.admin_coupons": "/api/admin/coupons",
    "store.admin_coupon": "/api/admin/coupons/{code}",
    "store.admin_coupon_redemptions": "/api/admin/coupons/{code}/redemptions",
    "pages.admin_coupons": "/admin/coupons",
    "pages.admin_coupon_new": "/admin/coupons/new",
    "pages.admin_coupon": "/admin/coupons/{code}",
    "pages.admin_coupon_pause": "/admin/coupons/{code}/pause",
    "pages.admin_coupon_resume": "/admin/coupons/{code}/resume",
    # The cart page and its forms.
    "pages.cart": "/cart",
    "pages.cart_add": "/cart/add",
    "pages.cart_update": "/cart/update",
    "pages.cart_coupon": "/cart/coupon",
    "pages.cart_prices": "/cart/accept-prices",
    "pages.cart_checkout": "/cart/checkout",
    # The buy form's target, the development sandbox (and its "Simulate payment"
    # button) and the provider's return pages.
    "pages.checkout": "/checkout",
    "pages.checkout_sandbox": "/checkout/sandbox/{number}",
    "pages.checkout_simulate": "/checkout/sandbox/{number}/simulate",
    "pages.checkout_success": "/checkout/success",
    "pages.checkout_cancel": "/checkout/cancel",
}
SETTINGS = {
    # Pending orders created within the last hour a customer may hold; one more
    # checkout answers 429 (services.checkout.orders explains the count).
    "cmsshop.max_pending_orders": (as_int, 10, "CMSSHOP_MAX_PENDING_ORDERS"),
    # Seconds an unpaid order stays pending; then the worker cancels it and gives its
    # coupon redemption back (services.checkout.expiry; at least an hour).
    expiry.ORDER_TTL: (expiry.as_order_ttl, expiry.DEFAULT_ORDER_TTL, "CMSSHOP_CHECKOUT_ORDER_TTL"),
}


def includeme(config) -> None:
    settings = config.get_settings()
    declare(settings, SETTINGS)
    if settings["cmsshop.max_pending_orders"] < 1:
        raise ConfigurationError("cmsshop.max_pending_orders must be at least 1")
    # The providers checkout offers (empty until a webhook module registers one).
    config.include("cmsshop.services.payments.registry")
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.add_openapi(paths=openapi.OPENAPI_PATHS, schemas=openapi.OPENAPI_SCHEMAS)
    config.scan("cmsshop.views.checkout")
    config.add_page_notices(admin_pages.NOTICES)
    # At login the visitor's cart becomes the customer's (services.checkout.carts).
    config.add_subscriber(adopt_cart_at_login, LoggedIn)


def adopt_cart_at_login(event: LoggedIn) -> None:
    if event.visitor_token:
        carts.adopt_visitor_cart(
            event.request.db, carts.visitor_hash(event.visitor_token), event.user.id
        )
