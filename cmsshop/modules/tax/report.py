"""Wiring of the tax report: the console's page and its CSV (cmsshop-admin tax-report
prints the same)."""

from __future__ import annotations

ROUTES = {
    "pages.admin_tax_report": "/admin/tax/report",
    "pages.admin_tax_report_csv": "/admin/tax/report.csv",
}


def includeme(config) -> None:
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.scan("cmsshop.views.tax.report_pages")
