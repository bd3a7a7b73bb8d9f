"""Wiring of invoices as documents: the console's PDF of any invoice and the shop's logo
(the customer's own PDF is the dashboard module's route, beside its invoice page)."""

from __future__ import annotations

ROUTES = {
    "pages.admin_invoice_pdf": "/admin/invoices/{number}.pdf",
    "tax.logo": "/shop-logo/{name}",
}


def includeme(config) -> None:
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.scan("cmsshop.views.tax.invoice_pages")
