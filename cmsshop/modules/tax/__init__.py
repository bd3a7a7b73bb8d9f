"""Taxes and legal invoices, always on: a seller is the merchant of record whatever else
is switched on. Tax is charged only once the seller has configured it (services.tax).

Its parts, each with its own routes table and views:
    seller   the seller's legal identity (console, admin API, ini/environment defaults)
    invoices the console's PDF of an invoice, the shop's logo
    billing  the buyer's billing details and VAT ID (account page, account API)
    credit_notes  the pages of a credit note (issued by services.tax.credit_notes)
    report   the quarter's tax report (console page, CSV)
"""

from __future__ import annotations


def includeme(config) -> None:
    config.include("cmsshop.modules.tax.seller")
    config.include("cmsshop.modules.tax.invoices")
    config.include("cmsshop.modules.tax.billing")
    config.include("cmsshop.modules.tax.credit_notes")
    config.include("cmsshop.modules.tax.report")
