"""A credit note's page and its PDF: the customer's own under /account, any in the
console. Both draw the same document (templates/tax/_credit_note.html); the PDF is that
document drawn by WeasyPrint, as an invoice's is (services.tax.invoice_pdf)."""

from __future__ import annotations

from pyramid.httpexceptions import HTTPNotFound
from pyramid.response import Response
from pyramid.view import view_config

from cmsshop.security import ADMIN, CUSTOMER
from cmsshop.services.tax import credit_notes, invoice_pdf
from cmsshop.services.tax.logo import logo_url
from cmsshop.views.tax.pdf import document_pdf_response


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
    number = document["note"].number
    return document_pdf_response(
        request,
        document,
        template="tax/_credit_note.html",
        title=f"Credit note {number}",
        filename=invoice_pdf.credit_note_filename(number),
    )


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
