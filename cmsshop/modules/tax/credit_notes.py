"""Wiring of credit notes: the customer's and the console's page of one."""

from __future__ import annotations

ROUTES = {
    "account.credit_note": "/account/credit-notes/{number}",
    "pages.admin_credit_note": "/admin/credit-notes/{number}",
}


def includeme(config) -> None:
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.scan("cmsshop.views.tax.credit_note_pages")
