"""An invoice or a credit note as a PDF download: its page's document drawn by WeasyPrint
(services.tax.invoice_pdf.render_pdf) in templates/tax/document_pdf.html, with the logo
handed over as bytes (the PDF fetches nothing)."""

from __future__ import annotations

from pyramid.renderers import render
from pyramid.response import Response

from cmsshop.services.tax import invoice_pdf


def document_pdf_response(
    request, document: dict, *, template: str, title: str, filename: str
) -> Response:
    """``document`` (invoice_pdf.invoice_document or credit_note_document) drawn with its
    page's ``template``, as an attachment named ``filename``."""
    found_logo = document["logo"]
    html = render(
        "tax/document_pdf.html",
        {
            **document,
            "document_template": template,
            "pdf_title": title,
            "logo_src": invoice_pdf.LOGO_URL if found_logo is not None else None,
            "pdf_url": None,
        },
        request=request,
    )
    pdf = invoice_pdf.render_pdf(
        html,
        (found_logo.data, found_logo.content_type) if found_logo is not None else None,
    )
    response = Response(body=pdf, content_type="application/pdf")
    response.content_disposition = f'attachment; filename="{filename}"'
    # The document names the buyer: no shared cache may keep it.
    response.cache_control = "private, no-store"
    return response
