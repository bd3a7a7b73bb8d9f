"""The accounts module, always on: registration, login and the mailed links (JSON and
pages), the owner's account settings (JSON and pages), and the admin console's customer
pages."""

from __future__ import annotations

from cmsshop.services.accounts import guests, login, profile, tokens
from cmsshop.views.accounts import openapi, pages, settings_openapi, settings_pages

ROUTES = {
    "auth.register": "/api/auth/register",
    "auth.password_reset": "/api/auth/password-reset",
    "auth.password_reset_confirm": "/api/auth/password-reset/confirm",
    "auth.verify_email": "/api/auth/verify-email",
    "auth.login": "/api/auth/login",
    "auth.logout": "/api/auth/logout",
    "auth.session": "/api/auth/session",
    # The web pages: log in, register, log out and the pages of the mailed links.
    "pages.login": "/login",
    "pages.register": "/register",
    "pages.logout": "/logout",
    "pages.check_email": "/check-email",
    "pages.forgot_password": "/forgot-password",
    "pages.reset_password": "/reset-password",
    "pages.set_password": "/set-password",
    "pages.verify_email": "/verify-email",
    # The owner's account settings (services.accounts.profile, .export, .erasure).
    "account.api_profile": "/api/account/profile",
    "account.api_email": "/api/account/email",
    "account.api_email_confirm": "/api/account/email/confirm",
    "account.api_password": "/api/account/password",
    "account.api_export": "/api/account/export",
    "account.api_delete": "/api/account/delete",
    # Under /account (the dashboard module's prefix) yet served whether or not that module
    # is on, like /account/billing: this module is included before the stub that answers
    # module_disabled for the rest of /account.
    "account.settings": "/account/settings",
    "account.settings_email": "/account/settings/email",
    "account.settings_email_confirm": "/account/settings/email/confirm",
    "account.settings_password": "/account/settings/password",
    "account.settings_export": "/account/settings/export",
    "account.settings_delete": "/account/settings/delete",
    # The admin console's customers.
    "pages.admin_customers": "/admin/customers",
    "pages.admin_customer": "/admin/customers/{id}",
}


def includeme(config) -> None:
    settings = config.get_settings()
    for policy in (
        *login.rate_policies(settings),
        *tokens.rate_policies(settings),
        *guests.rate_policies(settings),
        *profile.rate_policies(settings),
    ):
        config.add_rate_policy(*policy)
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.add_openapi(paths=openapi.OPENAPI_PATHS, schemas=openapi.OPENAPI_SCHEMAS)
    config.add_openapi(
        paths=settings_openapi.OPENAPI_PATHS, schemas=settings_openapi.OPENAPI_SCHEMAS
    )
    config.add_page_notices(pages.NOTICES)
    config.add_page_notices(settings_pages.NOTICES)
    config.scan("cmsshop.views.accounts")
