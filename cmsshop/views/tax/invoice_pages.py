"""An invoice as a PDF, and the shop's logo it shows.

The customer's own PDF is served from their account (the dashboard module's route, which
calls ``invoice_pdf_response``); the console fetches any invoice's PDF here. The logo is
served at a URL naming its sha256, so it can be cached for a year: a new logo is a new
URL."""

from __future__ import annotations

from pyramid.httpexceptions import HTTPNotFound
from pyramid.response import Response
from pyramid.view import view_config

from cmsshop.security import ADMIN
from cmsshop.services.tax import invoice_pdf, logo
from cmsshop.views.tax.pdf import document_pdf_response


def invoice_pdf_response(request, invoice) -> Response:
    """The invoice's PDF as a download named after its number."""
    return document_pdf_response(
        request,
        invoice_pdf.invoice_document(request.db, invoice),
        template="tax/_invoice.html",
        title=f"Invoice {invoice.number}",
        filename=invoice_pdf.pdf_filename(invoice.number),
    )


@view_config(route_name="pages.admin_invoice_pdf", request_method="GET", permission=ADMIN)
def admin_invoice_pdf(request):
    found = invoice_pdf.find_any_invoice(request.db, request.matchdict["number"])
    if found is None:
        raise HTTPNotFound("No such invoice.")
    return invoice_pdf_response(request, found)


@view_config(route_name="tax.logo", request_method="GET")
def shop_logo(request):
    """The logo, at its content-hashed URL; an old hash is 404 (its bytes are gone)."""
    stored = logo.read_logo(request.db)
    if stored is None or logo.logo_url(stored) != request.path:
        raise HTTPNotFound("No such logo.")
    response = Response(body=stored.data, content_type=stored.content_type)
    response.cache_control = "public, max-age=31536000, immutable"
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response
