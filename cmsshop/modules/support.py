"""The support module, included by the dashboard: a customer's tickets (JSON and pages)
and the admin ticket queue."""

from __future__ import annotations

from pyramid.exceptions import ConfigurationError

from cmsshop.services.support import tickets
from cmsshop.settings import as_int, declare
from cmsshop.views.support import admin_pages, openapi, pages

SETTINGS = {
    "cmsshop.tickets_per_hour": (as_int, 5, None),
    # A customer's replies to their tickets (staff replies are not limited).
    "cmsshop.ticket_replies_per_hour": (as_int, 30, None),
}

ROUTES = {
    "dashboard.tickets": "/api/dashboard/tickets",
    "dashboard.ticket": "/api/dashboard/tickets/{id}",
    "dashboard.ticket_messages": "/api/dashboard/tickets/{id}/messages",
    "dashboard.admin_tickets": "/api/admin/tickets",
    "dashboard.admin_ticket": "/api/admin/tickets/{id}",
    "dashboard.admin_ticket_messages": "/api/admin/tickets/{id}/messages",
    # The customer's and the admin's ticket pages ("new" before "{id}").
    "pages.account_tickets": "/account/tickets",
    "pages.account_ticket_new": "/account/tickets/new",
    "pages.account_ticket": "/account/tickets/{id}",
    "pages.account_ticket_reply": "/account/tickets/{id}/reply",
    "pages.admin_tickets": "/admin/tickets",
    "pages.admin_ticket": "/admin/tickets/{id}",
    "pages.admin_ticket_reply": "/admin/tickets/{id}/reply",
    "pages.admin_ticket_status": "/admin/tickets/{id}/status",
}


def includeme(config) -> None:
    settings = config.get_settings()
    declare(settings, SETTINGS)
    if settings["cmsshop.tickets_per_hour"] < 1:
        raise ConfigurationError("cmsshop.tickets_per_hour must be at least 1")
    if settings["cmsshop.ticket_replies_per_hour"] < 1:
        raise ConfigurationError("cmsshop.ticket_replies_per_hour must be at least 1")
    config.add_rate_policy(
        tickets.TICKET_POLICY, settings["cmsshop.tickets_per_hour"], tickets.TICKET_WINDOW
    )
    config.add_rate_policy(
        tickets.REPLY_POLICY, settings["cmsshop.ticket_replies_per_hour"], tickets.TICKET_WINDOW
    )
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.add_page_notices({**pages.NOTICES, **admin_pages.NOTICES})
    config.add_openapi(paths=openapi.OPENAPI_PATHS, schemas=openapi.OPENAPI_SCHEMAS)
    config.scan("cmsshop.views.support")
