"""What the tax tests share: the German seller they sell as (in the ini's settings and in
the console's and admin API's field names), a French business buyer (as the checkout
takes its billing details and as an order keeps them), the provider's charge.refunded
event, and reading a PDF's text (and checking it is a download)."""

from __future__ import annotations

import io

from fakes.stripe_api import charge_object, event
from PIL import Image
from pypdf import PdfReader

# The seller's legal identity as the ini states it: a German company.
SELLER_DE_IDENTITY = {
    "cmsshop.seller.legal_name": "Example Software GmbH",
    "cmsshop.seller.address": "Hauptstraße 1",
    "cmsshop.seller.postal_code": "10115",
    "cmsshop.seller.city": "Berlin",
    "cmsshop.seller.country": "DE",
    "cmsshop.seller.tax_id": "DE136695976",
}
# The same German company charging tax.
SELLER_DE = {**SELLER_DE_IDENTITY, "cmsshop.tax.enabled": "true"}
# The same identity in the field names of the console's form and the admin JSON API.
SELLER_DE_FIELDS = {
    "legalName": "Example Software GmbH",
    "address": "Hauptstraße 1",
    "postalCode": "10115",
    "city": "Berlin",
    "country": "DE",
    "taxId": "DE136695976",
}

# A French business with a VAT ID (a reverse charge), as the checkout JSON API takes its
# billing details...
BUSINESS_FR = {
    "country": "FR",
    "name": "Alice Martin",
    "company": "Martin SARL",
    "addressLine1": "12 rue de la Paix",
    "city": "Paris",
    "postalCode": "75002",
    "vatId": "FR40303265045",
}
# ...and as an order keeps them.
BUSINESS_FR_KEPT = {
    "country": "FR",
    "region": None,
    "name": "Alice Martin",
    "company": "Martin SARL",
    "address_line1": "12 rue de la Paix",
    "address_line2": None,
    "city": "Paris",
    "postal_code": "75002",
    "vat_id": "FR40303265045",
    "vat_id_check": "format_valid",
}


def png(width: int = 40, height: int = 20, fmt: str = "PNG") -> bytes:
    """A red logo image of ``width`` x ``height`` pixels in format ``fmt``."""
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(out, fmt)
    return out.getvalue()


def pdf_text(response) -> str:
    """The text of the PDF ``response``, its pages one after another."""
    reader = PdfReader(io.BytesIO(response.body))
    return "\n".join(page.extract_text() for page in reader.pages)


def pdf_download_text(response, filename: str) -> str:
    """The text of the PDF ``response``, checked to be a PDF downloaded as ``filename``
    that no cache keeps."""
    assert response.content_type == "application/pdf"
    assert response.body.startswith(b"%PDF-")
    assert response.headers["Content-Disposition"] == f'attachment; filename="{filename}"'
    assert "no-store" in response.headers["Cache-Control"]
    return pdf_text(response)


def refunded(pi: str, total: int, refunds: list[tuple[str, int]]) -> dict:
    """charge.refunded after ``refunds`` [(id, amount)], listed newest first as Stripe does."""
    charge = charge_object(pi, total, sum(amount for _, amount in refunds))
    charge["refunds"] = {
        "object": "list",
        "data": [{"id": rid, "object": "refund", "amount": a} for rid, a in reversed(refunds)],
    }
    return event("charge.refunded", charge)
