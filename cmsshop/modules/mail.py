"""The mail module, always on (every feature mails through the outbox): the admin
console's outbox, as JSON and as pages."""

from __future__ import annotations

from cmsshop.views.mail import admin_pages, openapi

ROUTES = {
    "admin.mail": "/api/admin/mail",
    "admin.mail_resend": "/api/admin/mail/{id}/resend",
    "pages.admin_mail": "/admin/mail",
    "pages.admin_mail_message": "/admin/mail/{id}",
    "pages.admin_mail_resend": "/admin/mail/{id}/resend",
}


def includeme(config) -> None:
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.add_openapi(paths=openapi.OPENAPI_PATHS, schemas=openapi.OPENAPI_SCHEMAS)
    config.add_page_notices(admin_pages.NOTICES)
    config.scan("cmsshop.views.mail")
