"""A credit note's page: the customer's own under /account, any in the console. Both draw
the same document (templates/tax/_credit_note.html); printing it gives the paper copy."""

from __future__ import annotations

from pyramid.httpexceptions import HTTPNotFound
from pyramid.view import view_config
from sqlalchemy import select

from cmsshop.models import Currency, Invoice
from cmsshop.security import ADMIN, CUSTOMER
from cmsshop.services.tax import credit_notes


def _document(request, user_id: int | None) -> dict:
    try:
        note = credit_notes.find_credit_note(request.db, request.matchdict["number"], user_id)
    except credit_notes.CreditNoteNotFound:
        raise HTTPNotFound("No such credit note.") from None
    invoice = request.db.scalar(select(Invoice).where(Invoice.id == note.invoice_id))
    return {
        "note": note,
        "invoice": invoice,
        "order_number": invoice.order.number,
        "currency": request.db.get(Currency, note.currency),
    }


@view_config(
    route_name="account.credit_note",
    request_method="GET",
    renderer="tax/credit_note.html",
    permission=CUSTOMER,
)
def account_credit_note(request):
    return {"account_section": "invoices", **_document(request, request.user.id)}


@view_config(
    route_name="pages.admin_credit_note",
    request_method="GET",
    renderer="admin/tax/credit_note.html",
    permission=ADMIN,
)
def admin_credit_note(request):
    return {"admin_section": "orders", **_document(request, None)}
