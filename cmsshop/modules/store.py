"""The store module: the public catalogue (products, currencies) and its content
management (admin products, release uploads, currencies), then checkout."""

from __future__ import annotations

from cmsshop.db import add_transactionless_reads
from cmsshop.modules.public_content import PUBLIC_CONTENT_SETTINGS
from cmsshop.settings import as_int, declare
from cmsshop.tweens import add_upload_route
from cmsshop.views.store import admin_media, admin_pages, openapi

MIB = 1024 * 1024
SETTINGS = {
    # Largest release file accepted; only an admin's POST to an upload route (below) may
    # send a body that large (cmsshop/tweens.py, body limits).
    "cmsshop.max_upload_bytes": (as_int, 512 * MIB, "CMSSHOP_MAX_UPLOAD_BYTES"),
    **PUBLIC_CONTENT_SETTINGS,
}


ROUTES = {
    "store.products": "/api/store/products",
    "store.product": "/api/store/products/{slug}",
    "store.currencies": "/api/store/currencies",
    "store.admin_products": "/api/admin/products",
    "store.admin_product": "/api/admin/products/{slug}",
    "store.admin_product_releases": "/api/admin/products/{slug}/releases",
    "store.admin_product_images": "/api/admin/products/{slug}/images",
    "store.admin_product_image": "/api/admin/products/{slug}/images/{image_id}",
    "store.admin_product_subscription": "/api/admin/products/{slug}/subscription",
    "store.admin_currencies": "/api/admin/currencies",
    "store.admin_currency": "/api/admin/currencies/{code}",
    # The customer's pages and the admin console's catalogue pages.
    "pages.products": "/products",
    "pages.product": "/products/{slug}",
    "pages.admin_products": "/admin/products",
    "pages.admin_product_new": "/admin/products/new",
    "pages.admin_product_edit": "/admin/products/{slug}/edit",
    "pages.admin_product_archive": "/admin/products/{slug}/archive",
    "pages.admin_product_unarchive": "/admin/products/{slug}/unarchive",
    "pages.admin_product_releases": "/admin/products/{slug}/releases",
    "pages.admin_product_images": "/admin/products/{slug}/images",
    "pages.admin_product_image": "/admin/products/{slug}/images/{image_id}",
    # Product images' stored renditions, named by their content's hash.
    "media.file": "/media/{key}",
    "pages.admin_currencies": "/admin/currencies",
    "pages.admin_currency_new": "/admin/currencies/new",
    "pages.admin_currency_edit": "/admin/currencies/{code}/edit",
}

# The public answers the answer cache may keep, with the query parameters each view
# reads (the cache key holds these; any other parameter is left out of it).
CACHED_ROUTES = {
    "store.products": ("page", "perPage", "q", "currency"),
    "store.product": ("currency",),
    "store.currencies": (),
}
# The HTML pages it may keep for anonymous visitors (cmsshop.cache), the same way.
CACHED_PAGES = {
    "pages.products": ("page", "perPage", "q", "currency"),
    "pages.product": ("currency",),
}


UPLOAD_ROUTES = (
    "store.admin_product_releases",
    "pages.admin_product_releases",
    # Images: a photo is bigger than an ordinary body; services/store/media.py holds it
    # to its own limit.
    "store.admin_product_images",
    "pages.admin_product_images",
)


def includeme(config) -> None:
    declare(config.get_settings(), SETTINGS)
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    # The release uploads: the JSON route and the admin page's form.
    for name in UPLOAD_ROUTES:
        add_upload_route(config, name)
    # The public list and a product by slug read outside any transaction.
    add_transactionless_reads(config, "store.products", "store.product")
    config.add_cached_routes(CACHED_ROUTES)
    config.add_cached_pages(CACHED_PAGES)
    config.add_openapi(paths=openapi.OPENAPI_PATHS, schemas=openapi.OPENAPI_SCHEMAS)
    config.add_openapi(paths=openapi.ADMIN_PRODUCT_PATHS, schemas=openapi.ADMIN_PRODUCT_SCHEMAS)
    config.add_openapi(paths=openapi.ADMIN_IMAGE_PATHS, schemas=openapi.ADMIN_IMAGE_SCHEMAS)
    config.add_openapi(paths=openapi.ADMIN_CURRENCY_PATHS, schemas=openapi.ADMIN_CURRENCY_SCHEMAS)
    config.add_openapi(
        paths=openapi.SUBSCRIPTION_PLAN_PATHS, schemas=openapi.SUBSCRIPTION_PLAN_SCHEMAS
    )
    config.add_page_notices(admin_pages.NOTICES)
    config.add_page_notices(admin_media.NOTICES)
    config.scan("cmsshop.views.store")
    # Checkout belongs to the store: it sells what this module lists.
    config.include("cmsshop.modules.checkout")
