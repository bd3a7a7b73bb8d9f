"""Wiring of the seller's legal identity and tax settings: the ini/environment defaults
(checked at start-up like the console form checks them), the console page with the
invoice logo, and the admin JSON API."""

from __future__ import annotations

from pyramid.exceptions import ConfigurationError

from cmsshop.services.tax import checkout as tax_checkout
from cmsshop.services.tax import seller
from cmsshop.settings import declare
from cmsshop.views.tax import seller_openapi, seller_pages

ROUTES = {
    "pages.admin_tax_settings": "/admin/tax/settings",
    "pages.admin_tax_logo": "/admin/tax/settings/logo",
    "pages.admin_tax_logo_remove": "/admin/tax/settings/logo/remove",
    "tax.admin_seller": "/api/admin/settings/seller",
}


def includeme(config) -> None:
    settings = config.get_settings()
    declare(settings, seller.settings_spec())
    declare(settings, tax_checkout.settings_spec())
    defaults = {field: settings[ini] for field, (ini, _env, _kind, _n) in seller.FIELDS.items()}
    try:
        seller.clean(defaults)
    except seller.ProfileInvalid as exc:
        problems = "; ".join(
            f"{seller.FIELDS[field][0]}: {message}" for field, message in exc.errors.items()
        )
        raise ConfigurationError(f"invalid seller settings: {problems}") from None
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.scan("cmsshop.views.tax.seller_pages")
    config.scan("cmsshop.views.tax.seller_api")
    config.add_openapi(paths=seller_openapi.OPENAPI_PATHS, schemas=seller_openapi.OPENAPI_SCHEMAS)
    config.add_page_notices(seller_pages.NOTICES)
