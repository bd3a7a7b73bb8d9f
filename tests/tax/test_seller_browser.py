"""In a real Chromium: the console's Business and tax page with its logo forms, and the
customer's invoice naming the seller (with the logo) and the buyer's billing details,
each passing check_page (axe-core, one <h1>, no sideways scrolling on a phone); the
invoice prints without the navigation."""

from __future__ import annotations

import io

from helpers.browser import check_page, log_in
from PIL import Image

from cmsshop.models import Invoice, Order
from cmsshop.services.tax import logo
from cmsshop.services.tax.engine import REVERSE_CHARGE_NOTE
from cmsshop.services.tax.invoice_pdf import freeze_seller, seller_snapshot
from cmsshop.services.tax.seller import clean, save_settings, shop_profile

IDENTITY = {
    "legalName": "Example Software GmbH",
    "address": "Hauptstraße 1\nHinterhaus",
    "postalCode": "10115",
    "city": "Berlin",
    "country": "DE",
    "taxId": "DE136695976",
    "invoiceFooter": "Amtsgericht Berlin HRB 12345",
}


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (120, 40), (20, 60, 160)).save(out, "PNG")
    return out.getvalue()


def test_the_settings_page_and_an_invoice_with_the_seller(
    page, new_page, site, app, admin, customer, account, dbsession
):
    save_settings(dbsession, clean(IDENTITY), admin.id)
    logo.save_logo(dbsession, png())
    dbsession.commit()
    invoice = dbsession.get(Invoice, account.invoice.id)
    invoice.seller = freeze_seller(dbsession, app.registry.settings)
    assert invoice.seller == seller_snapshot(
        shop_profile(dbsession, app.registry.settings), logo.logo_sha256(dbsession)
    )
    dbsession.get(Order, account.order.id).billing = {
        "country": "FR",
        "name": "Alice Martin",
        "company": "Martin SARL",
        "address_line1": "12 rue de la Paix",
        "postal_code": "75002",
        "city": "Paris",
        "vat_id": "FR40303265045",
    }
    # Issued as a French business's reverse-charge sale (the columns and the note of a
    # taxed invoice; how checkout writes them: tests/tax/test_tax_documents.py).
    gross = invoice.total
    invoice.lines = [
        {**line, "net": line["amount"], "taxRate": "0", "tax": 0} for line in invoice.lines
    ]
    invoice.tax = {
        "regime": "reverse_charge",
        "country": "FR",
        "name": "VAT",
        "pricesIncludeTax": False,
        "notes": [REVERSE_CHARGE_NOTE],
        "totals": [{"rate": "0", "net": gross, "tax": 0, "gross": gross}],
    }
    dbsession.commit()

    log_in(page, admin.email, "/admin/tax/settings")
    check_page(page, "admin-tax-settings-logo")
    assert page.get_by_role("img", name="Your current invoice logo").is_visible()

    buyer = new_page(site)
    log_in(buyer, customer.email, f"/account/invoices/{account.invoice.number}")
    check_page(buyer, "account-invoice-seller")
    assert buyer.get_by_role("img", name="Example Software GmbH").is_visible()
    buyer.emulate_media(media="print")
    assert not buyer.get_by_role("navigation", name="Your account").is_visible()
    text = buyer.locator("article.invoice").inner_text()
    assert "DE136695976" in text and "Martin SARL" in text and "France" in text
    assert "Net at 0 %" in text and "VAT 0 %" in text and "Article 196" in text
