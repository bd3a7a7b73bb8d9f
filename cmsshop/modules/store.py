"""The store module: the public catalogue (products, currencies) and its content
management (admin products, release uploads, currencies), then checkout."""

from __future__ import annotations

from cmsshop.settings import as_int, declare
from cmsshop.views import admin_currencies, admin_products, store

MIB = 1024 * 1024
SETTINGS = {
    # Largest release file accepted; the body-limit tween (views/errors.py) applies the
    # same number to every multipart body before a view reads it.
    "cmsshop.max_upload_bytes": (as_int, 512 * MIB, "CMSSHOP_MAX_UPLOAD_BYTES"),
    # Cache-Control max-age of the public catalogue and docs answers (they carry ETags).
    "cmsshop.public_max_age": (as_int, 60, "CMSSHOP_PUBLIC_MAX_AGE"),
}


def includeme(config) -> None:
    declare(config.get_settings(), SETTINGS)
    config.add_route("store.products", "/api/store/products")
    config.add_route("store.product", "/api/store/products/{slug}")
    config.add_route("store.currencies", "/api/store/currencies")
    config.add_route("store.admin_products", "/api/admin/products")
    config.add_route("store.admin_product", "/api/admin/products/{slug}")
    config.add_route("store.admin_product_releases", "/api/admin/products/{slug}/releases")
    config.add_route("store.admin_currencies", "/api/admin/currencies")
    config.add_route("store.admin_currency", "/api/admin/currencies/{code}")
    for views in (store, admin_products, admin_currencies):
        config.add_openapi(paths=views.OPENAPI_PATHS, schemas=views.OPENAPI_SCHEMAS)
        config.scan(views.__name__)
    # Checkout belongs to the store: it sells what this module lists.
    config.include("cmsshop.modules.checkout")
