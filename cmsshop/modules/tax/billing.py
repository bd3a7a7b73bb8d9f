"""Wiring of the tax feature's billing part: the VAT ID checker (offline only, or VIES
as ``cmsshop.tax.vies_url`` says) and the buyer's billing details pages and API."""

from __future__ import annotations

import urllib.parse

from pyramid.exceptions import ConfigurationError

from cmsshop.services.tax.vies import SETTINGS, IVatIdChecker, make_vat_id_checker
from cmsshop.settings import declare
from cmsshop.views.tax import billing_openapi, billing_pages

ROUTES = {
    "tax.account_billing": "/api/account/billing",
    # Under /account (the dashboard module's prefix) yet served whether or not that module
    # is on: this module is included first, so its route matches before the stub that
    # answers module_disabled for the rest of /account (views.tax.billing_pages).
    "account.billing": "/account/billing",
}


def check_settings(settings: dict) -> None:
    url = settings["cmsshop.tax.vies_url"]
    if url:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigurationError(
                f"cmsshop.tax.vies_url must be an http(s) URL or empty, not {url!r}"
            )
    if not 0 < settings["cmsshop.tax.vies_timeout"] <= 60:
        raise ConfigurationError("cmsshop.tax.vies_timeout must be more than 0 and at most 60")


def includeme(config) -> None:
    settings = config.get_settings()
    declare(settings, SETTINGS)
    check_settings(settings)
    config.register_service(make_vat_id_checker(settings), IVatIdChecker)
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.add_openapi(paths=billing_openapi.OPENAPI_PATHS, schemas=billing_openapi.OPENAPI_SCHEMAS)
    config.add_page_notices(billing_pages.NOTICES)
    config.scan("cmsshop.views.tax.billing_api")
    config.scan("cmsshop.views.tax.billing_pages")
