"""Scoped API tokens, always on: their console page and admin API (the Bearer check
itself is in cmsshop.security, for every /api/admin route), and the rate policy every
token's calls are counted against."""

from __future__ import annotations

from pyramid.exceptions import ConfigurationError

from cmsshop.services.apitokens.tokens import RATE_POLICY, RATE_WINDOW
from cmsshop.settings import as_int, declare
from cmsshop.views.apitokens import admin_pages, openapi

ROUTES = {
    "apitokens.admin_tokens": "/api/admin/api-tokens",
    "apitokens.admin_token": "/api/admin/api-tokens/{id}",
    # The console page, and the revoke button of each token.
    "pages.admin_api_tokens": "/admin/api-tokens",
    "pages.admin_api_token_revoke": "/admin/api-tokens/{id}/revoke",
}

SETTINGS = {
    # Calls one token may make per minute, whatever the route (429 rate_limited beyond).
    "cmsshop.api_tokens.rate_limit": (as_int, 600, "CMSSHOP_API_TOKENS_RATE_LIMIT"),
}


def includeme(config) -> None:
    settings = config.get_settings()
    declare(settings, SETTINGS)
    if settings["cmsshop.api_tokens.rate_limit"] < 1:
        raise ConfigurationError("cmsshop.api_tokens.rate_limit must be at least 1")
    config.add_rate_policy(RATE_POLICY, settings["cmsshop.api_tokens.rate_limit"], RATE_WINDOW)
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.add_openapi(paths=openapi.ADMIN_PATHS, schemas=openapi.ADMIN_SCHEMAS)
    config.add_page_notices(admin_pages.NOTICES)
    config.scan("cmsshop.views.apitokens")
