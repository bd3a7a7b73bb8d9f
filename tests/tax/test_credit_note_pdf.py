"""A credit note as a PDF: the customer's own at /account/credit-notes/<number>.pdf, any
for the console at /admin/credit-notes/<number>.pdf, linked from both pages. It is drawn
as an invoice is and names the seller, buyer and logo of the invoice it corrects, as that
invoice was issued. The note comes from a real fulfilment and a refund event; the PDF's
text is read back with pypdf."""

from __future__ import annotations

import io

import pytest
from helpers.clients import logged_in, page_client
from helpers.html import assert_error_page
from helpers.payments import send
from helpers.refunds import card_paid_order
from helpers.tax import BUSINESS_FR_KEPT, pdf_download_text, pdf_text, png, refunded
from pypdf import PdfReader
from sqlalchemy import select

from cmsshop.models import CreditNote, Invoice, Order, ShopSetting
from cmsshop.services.tax import logo

SELLER = {
    "seller.legalName": "Example Software GmbH",
    "seller.address": "Hauptstraße 1",
    "seller.postalCode": "10115",
    "seller.city": "Berlin",
    "seller.country": "DE",
    "seller.taxId": "DE136695976",
    "seller.invoiceFooter": "Amtsgericht Berlin HRB 12345",
}


@pytest.fixture
def credited(webhook, dbsession, catalogue, customer, fake_stripe):
    """A delivered card order (SiteGuard 49.00 + Theme Pack 19.00) whose invoice was
    issued with the seller's identity and logo of then, half refunded by the provider's
    event: its credit note, and the invoice it corrects."""
    for key, value in SELLER.items():
        dbsession.add(ShopSetting(key=key, value=value))
    logo.save_logo(dbsession, png())
    dbsession.commit()
    order = card_paid_order(dbsession, customer, fake_stripe)
    dbsession.get(Order, order.id).billing = BUSINESS_FR_KEPT
    dbsession.commit()
    pi = f"pi_{order.number.replace('-', '')}"
    assert send(webhook, refunded(pi, 6800, [("re_1", 3400)]), 200).json["status"] == "processed"
    dbsession.commit()  # ends the read snapshot (SQLite WAL)
    dbsession.expire_all()
    note = dbsession.scalar(select(CreditNote))
    invoice = dbsession.scalar(select(Invoice).where(Invoice.order_id == order.id))
    return note, invoice


def test_the_buyers_pdf_names_the_note_its_invoice_the_seller_and_negative_amounts(
    card_app, credited, customer
):
    note, invoice = credited
    buyer = logged_in(card_app, customer)
    page = buyer.get(f"/account/credit-notes/{note.number}")
    link = page.html.find("a", href=f"/account/credit-notes/{note.number}.pdf")
    assert link is not None and "PDF" in link.get_text()
    response = buyer.get(link["href"])
    text = pdf_download_text(response, f"credit-note-{note.number}.pdf")
    for expected in (
        f"Credit note {note.number}",
        invoice.number,
        invoice.order.number,
        "Example Software GmbH",
        "10115 Berlin",
        "DE136695976",
        "Amtsgericht Berlin HRB 12345",
        "Martin SARL",
        "FR40303265045",
        "SiteGuard",
        "-EUR24.50",
        "-EUR9.50",
        "-EUR34.00",
    ):
        assert expected in text, expected
    # The logo the invoice was issued with, handed to WeasyPrint from memory.
    assert len(PdfReader(io.BytesIO(response.body)).pages[0].images) == 1


def test_the_note_keeps_the_seller_its_invoice_was_issued_with(
    card_app, credited, customer, dbsession
):
    note, _invoice = credited
    dbsession.get(ShopSetting, "seller.legalName").value = "Renamed Software AG"
    dbsession.commit()
    buyer = logged_in(card_app, customer)
    page = buyer.get(f"/account/credit-notes/{note.number}")
    seller = page.html.find(class_="invoice-seller").get_text(" ", strip=True)
    assert "Example Software GmbH" in seller and "Renamed" not in seller
    text = pdf_text(buyer.get(f"/account/credit-notes/{note.number}.pdf"))
    assert "Example Software GmbH" in text and "Renamed" not in text


def test_the_pdf_is_the_buyers_only(card_app, credited, other_customer):
    note, _invoice = credited
    path = f"/account/credit-notes/{note.number}.pdf"
    other = logged_in(card_app, other_customer)
    assert_error_page(other.get(path, status=404), 404)
    assert_error_page(other.get("/account/credit-notes/CN-2000-999999.pdf", status=404), 404)
    to_login = page_client(card_app).get(path, status=303).location
    assert "/login?next=" in to_login and note.number in to_login


def test_the_console_fetches_any_notes_pdf_from_its_page(card_app, credited, admin, customer):
    note, invoice = credited
    console = logged_in(card_app, admin)
    page = console.get(f"/admin/credit-notes/{note.number}")
    link = page.html.find("a", href=f"/admin/credit-notes/{note.number}.pdf")
    assert link is not None
    response = console.get(link["href"])
    assert response.content_type == "application/pdf"
    text = pdf_text(response)
    assert note.number in text and invoice.number in text and "-EUR34.00" in text
    console.get("/admin/credit-notes/CN-2000-999999.pdf", status=404)
    # A customer gets the console's refusal, even for a note of their own; a visitor is
    # sent to log in.
    buyer = logged_in(card_app, customer)
    assert_error_page(buyer.get(link["href"], status=403), 403)
    assert "/login?next=" in page_client(card_app).get(link["href"], status=303).location


@pytest.mark.parametrize("number", ["%00", "CN-%00", "x" * 300, "%F0%9F%98%80", "..%2F..", "-1"])
def test_hostile_pdf_numbers_are_a_4xx_page(card_app, customer, admin, number):
    for prefix, user in (("/account/credit-notes/", customer), ("/admin/credit-notes/", admin)):
        response = logged_in(card_app, user).get(f"{prefix}{number}.pdf", status="*")
        assert 400 <= response.status_int < 500, (prefix, number)
        assert response.content_type == "text/html"
