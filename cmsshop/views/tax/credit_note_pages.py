"""A credit note's page and its PDF: the customer's own under /account, any in the
console. Both draw the same document (templates/tax/_credit_note.html); the PDF is that
document drawn by WeasyPrint, as an invoice's is (services.tax.invoice_pdf)."""

from __future__ import annotations

from pyramid.httpexceptions import HTTPNotFound
from pyramid.renderers import render
from pyramid.response import Response
from pyramid.view import view_config

from cmsshop.security import ADMIN, CUSTOMER
from cmsshop.services.tax import credit_notes, invoice_pdf
from cmsshop.services.tax.logo import logo_url


def _document(request, user_id: int | None) -> dict:
    """The credit note of the URL's number (the customer's own when ``user_id`` is given;
    another customer's is not found, as an unknown one is)."""
    try:
        note = credit_notes.find_credit_note(request.db, request.matchdict["number"], user_id)
    except credit_notes.CreditNoteNotFound:
        raise HTTPNotFound("No such credit note.") from None
    return invoice_pdf.credit_note_document(request.db, note)


def _page(document: dict, pdf_url: str) -> dict:
    found_logo = document["logo"]
    return {
        **document,
        "logo_src": logo_url(found_logo) if found_logo is not None else None,
        "pdf_url": pdf_url,
    }


def credit_note_pdf_response(request, document: dict) -> Response:
    """The credit note's PDF as a download named after its number."""
    found_logo = document["logo"]
    html = render(
        "tax/credit_note_pdf.html",
        {
            **document,
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
    response.content_disposition = (
        f'attachment; filename="{invoice_pdf.credit_note_filename(document["note"].number)}"'
    )
    # A credit note names the buyer: no shared cache may keep it.
    response.cache_control = "private, no-store"
    return response


@view_config(
    route_name="account.credit_note",
    request_method="GET",
    renderer="tax/credit_note.html",
    permission=CUSTOMER,
)
def account_credit_note(request):
    document = _document(request, request.user.id)
    pdf_url = f"/account/credit-notes/{document['note'].number}.pdf"
    return {"account_section": "invoices", **_page(document, pdf_url)}


@view_config(route_name="account.credit_note_pdf", request_method="GET", permission=CUSTOMER)
def account_credit_note_pdf(request):
    return credit_note_pdf_response(request, _document(request, request.user.id))


@view_config(
    route_name="pages.admin_credit_note",
    request_method="GET",
    renderer="admin/tax/credit_note.html",
    permission=ADMIN,
)
def admin_credit_note(request):
    document = _document(request, None)
    pdf_url = f"/admin/credit-notes/{document['note'].number}.pdf"
    return {"admin_section": "orders", **_page(document, pdf_url)}


@view_config(route_name="pages.admin_credit_note_pdf", request_method="GET", permission=ADMIN)
def admin_credit_note_pdf(request):
    return credit_note_pdf_response(request, _document(request, None))
