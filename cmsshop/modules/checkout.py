"""Checkout's wiring, included by the store module (checkout sells what the store lists,
so its routes live under the store's /api/store prefix and go away with it)."""

from __future__ import annotations

from pyramid.exceptions import ConfigurationError

from cmsshop.settings import as_int, declare
from cmsshop.views.checkout import openapi

ROUTES = {
    "store.checkout": "/api/store/checkout",
    "store.checkout_sandbox": "/api/store/checkout/sandbox/{number}",
    # The buy form's target, the development sandbox and the provider's return pages.
    "pages.checkout": "/checkout",
    "pages.checkout_sandbox": "/checkout/sandbox/{number}",
    "pages.checkout_success": "/checkout/success",
    "pages.checkout_cancel": "/checkout/cancel",
}
SETTINGS = {
    # Pending orders created within the last hour a customer may hold; one more
    # checkout answers 429 (services.checkout.orders explains the count).
    "cmsshop.max_pending_orders": (as_int, 10, "CMSSHOP_MAX_PENDING_ORDERS"),
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
