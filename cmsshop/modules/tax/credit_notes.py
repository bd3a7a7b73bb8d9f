"""Wiring of credit notes: the customer's and the console's page of one, and its PDF."""

from __future__ import annotations

ROUTES = {
    # Each PDF route before its page's, whose {number} would match "<number>.pdf" too.
    "account.credit_note_pdf": "/account/credit-notes/{number}.pdf",
    "account.credit_note": "/account/credit-notes/{number}",
    "pages.admin_credit_note_pdf": "/admin/credit-notes/{number}.pdf",
    "pages.admin_credit_note": "/admin/credit-notes/{number}",
}


def includeme(config) -> None:
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.scan("cmsshop.views.tax.credit_note_pages")
