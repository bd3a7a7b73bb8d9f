"""The invoice as a document: the seller frozen on it when issued, the buyer from the
order's billing details (or the account), on the account's page and in its PDF (read
back with pypdf); the PDF is the owner's only, any invoice's for the console; drawing it
fetches nothing; the logo is checked from its bytes and served at a hashed URL."""

from __future__ import annotations

import io
import types

import pytest
from helpers.clients import logged_in, page_client
from helpers.html import assert_error_page
from helpers.refunds import card_paid_order
from helpers.tax import BUSINESS_FR_KEPT, pdf_download_text, pdf_text, png
from PIL import Image
from pypdf import PdfReader
from sqlalchemy import select

from cmsshop.models import Invoice, Order, ShopSetting
from cmsshop.services.tax import invoice_pdf, logo

SELLER = types.SimpleNamespace(
    legal_name="Example Software GmbH",
    address="Hauptstraße 1\nHinterhaus",
    postal_code="10115",
    city="Berlin",
    country="DE",
    tax_id="DE136695976",
    invoice_footer="Amtsgericht Berlin HRB 12345\nManaging director: Erika Muster",
)


def issue_as(dbsession, account, *, billing=None, logo_sha256=None) -> Invoice:
    """The account's invoice as issued with the seller's identity then (the snapshot the
    fulfilment takes when it writes the invoice) and the order's billing details."""
    invoice = dbsession.get(Invoice, account.invoice.id)
    invoice.seller = invoice_pdf.seller_snapshot(SELLER, logo_sha256)
    if billing is not None:
        dbsession.get(Order, account.order.id).billing = billing
    dbsession.commit()
    return invoice


@pytest.fixture
def client(app, customer):
    return logged_in(app, customer)


def test_the_page_names_the_seller_as_issued_and_the_buyers_billing_details(
    client, account, dbsession
):
    issue_as(dbsession, account, billing=BUSINESS_FR_KEPT)
    page = client.get(f"/account/invoices/{account.invoice.number}")
    document = page.html.find("article", class_="invoice")
    seller = document.find(class_="invoice-seller").get_text(" ", strip=True)
    for expected in ("Example Software GmbH", "Hauptstraße 1", "Hinterhaus", "10115 Berlin"):
        assert expected in seller
    assert "Germany" in seller and "DE136695976" in seller
    buyer = document.find(class_="invoice-buyer").get_text(" ", strip=True)
    for expected in ("Alice Martin", "Martin SARL", "12 rue de la Paix", "75002 Paris"):
        assert expected in buyer
    assert "France" in buyer and "FR40303265045" in buyer
    footer = document.find(class_="invoice-footer").get_text(" ", strip=True)
    assert "Amtsgericht Berlin HRB 12345" in footer and "Erika Muster" in footer
    link = page.html.find("a", href=f"/account/invoices/{account.invoice.number}.pdf")
    assert link is not None


def test_a_later_change_of_the_seller_never_changes_an_issued_invoice(client, account, dbsession):
    issue_as(dbsession, account)
    # The seller moves and changes its VAT ID in the console afterwards.
    for key, value in {
        "seller.legalName": "Renamed Software AG",
        "seller.address": "Neue Straße 99",
        "seller.taxId": "DE129273398",
    }.items():
        dbsession.add(ShopSetting(key=key, value=value))
    dbsession.commit()
    number = account.invoice.number
    text = client.get(f"/account/invoices/{number}").html.find("article").get_text(" ")
    assert "Example Software GmbH" in text and "Hauptstraße 1" in text
    assert "Renamed" not in text and "Neue Straße" not in text and "DE129273398" not in text
    pdf = pdf_text(client.get(f"/account/invoices/{number}.pdf"))
    assert "Example Software GmbH" in pdf and "Renamed" not in pdf


def test_an_invoice_issued_before_snapshots_shows_the_account_as_it_always_did(
    client, account, customer
):
    page = client.get(f"/account/invoices/{account.invoice.number}")
    document = page.html.find("article", class_="invoice")
    assert document.find(class_="invoice-seller").get_text(strip=True) == "cmsshop"
    buyer = document.find(class_="invoice-buyer").get_text(" ", strip=True)
    assert "Alice" in buyer and customer.email in buyer
    text = pdf_text(client.get(f"/account/invoices/{account.invoice.number}.pdf"))
    assert account.invoice.number in text and customer.email in text


def test_the_pdf_carries_seller_buyer_number_and_amounts(client, account, dbsession):
    issue_as(dbsession, account, billing=BUSINESS_FR_KEPT)
    number = account.invoice.number
    text = pdf_download_text(client.get(f"/account/invoices/{number}.pdf"), f"invoice-{number}.pdf")
    for expected in (
        f"Invoice {number}",
        account.order.number,
        "Example Software GmbH",
        "10115 Berlin",
        "DE136695976",
        "Amtsgericht Berlin HRB 12345",
        "Alice Martin",
        "Martin SARL",
        "75002 Paris",
        "FR40303265045",
        "SiteGuard",
        "Theme Pack",
        "EUR49.00",
        "EUR19.00",
        "EUR68.00",
        account.invoice.issued_at.strftime("%Y-%m-%d"),
    ):
        assert expected in text, expected


def test_the_pdf_is_the_owners_only(app, account, other_customer):
    number = account.invoice.number
    other = logged_in(app, other_customer)
    assert_error_page(other.get(f"/account/invoices/{number}.pdf", status=404), 404)
    assert_error_page(other.get("/account/invoices/INV-2000-999999.pdf", status=404), 404)
    anonymous = page_client(app)
    assert "/login?next=" in anonymous.get(f"/account/invoices/{number}.pdf", status=303).location


def test_the_console_fetches_any_invoices_pdf_from_the_orders_page(
    app, account, admin_pages, other_customer, dbsession
):
    issue_as(dbsession, account, billing=BUSINESS_FR_KEPT)
    number = account.invoice.number
    order_page = admin_pages.get(f"/admin/orders/{account.order.number}")
    link = order_page.html.find("a", href=f"/admin/invoices/{number}.pdf")
    assert link is not None
    response = admin_pages.get(link["href"])
    assert response.content_type == "application/pdf"
    assert "Martin SARL" in pdf_text(response)
    admin_pages.get("/admin/invoices/INV-2000-999999.pdf", status=404)
    # A customer is not the console, not even for an invoice of their own.
    other = logged_in(app, other_customer)
    assert other.get(f"/admin/invoices/{number}.pdf", status="*").status_int in (303, 403, 404)


def test_drawing_a_pdf_fetches_nothing_but_our_logo(client, account, dbsession):
    fetch = invoice_pdf.logo_fetcher((b"\x89PNG...", "image/png"))
    assert fetch(invoice_pdf.LOGO_URL).content_type == "image/png"
    for url in ("http://127.0.0.1:9/x.png", "file:///etc/passwd", "data:image/png;base64,AA"):
        with pytest.raises(ValueError):
            fetch(url)
    with pytest.raises(ValueError):
        invoice_pdf.logo_fetcher(None)(invoice_pdf.LOGO_URL)
    # A document naming other resources is drawn without them (the fetcher refuses them).
    pdf = invoice_pdf.render_pdf(
        '<p>x<img src="http://10.255.255.1/x.png"><link rel="stylesheet" href="file:///etc/passwd">'
    )
    assert pdf.startswith(b"%PDF-")
    # A buyer's name is text: markup in it is escaped, and names no resource to fetch.
    hostile = {**BUSINESS_FR_KEPT, "name": '<img src="http://127.0.0.1:9/track.png">Eve'}
    issue_as(dbsession, account, billing=hostile)
    text = pdf_text(client.get(f"/account/invoices/{account.invoice.number}.pdf"))
    assert '<img src="http://127.0.0.1:9/track.png">Eve' in text.replace("\n", "")


# --- the logo --------------------------------------------------------------------------------


def test_a_logo_is_kept_by_hash_served_for_good_and_drawn_in_the_pdf(
    app, client, account, dbsession
):
    stored = logo.save_logo(dbsession, png())
    dbsession.commit()
    issue_as(dbsession, account, logo_sha256=stored.sha256)
    page = client.get(f"/account/invoices/{account.invoice.number}")
    image = page.html.find("img", class_="invoice-logo")
    assert image["src"] == f"/shop-logo/{stored.sha256}.png"
    served = page_client(app).get(image["src"])
    assert served.content_type == "image/png" and served.body == png()
    assert "immutable" in served.headers["Cache-Control"]
    pdf = client.get(f"/account/invoices/{account.invoice.number}.pdf")
    reader = PdfReader(io.BytesIO(pdf.body))
    assert len(reader.pages[0].images) == 1

    # A new logo: a new URL; the old one is gone, and the old invoice shows none rather
    # than a logo it was not issued with.
    logo.save_logo(dbsession, png(30, 30, "JPEG"))
    dbsession.commit()
    page_client(app).get(image["src"], status=404)
    page = client.get(f"/account/invoices/{account.invoice.number}")
    assert page.html.find("img", class_="invoice-logo") is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "choose a PNG or JPEG"),
        (b"GIF89a" + b"\x00" * 40, "only PNG and JPEG"),
        (b"<svg xmlns='http://www.w3.org/2000/svg'/>", "only PNG and JPEG"),
        (png()[:60], "not a readable"),  # truncated
        (png(64, 64, "JPEG")[:-40], "not a readable"),
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * (600 * 1024), "at most 500 kB"),
        (png(5000, 4000), "at most 4096"),  # a small file of twenty million pixels
    ],
)
def test_a_logo_that_is_not_a_small_png_or_jpeg_is_refused(dbsession, data, message):
    with pytest.raises(logo.LogoInvalid, match=message):
        logo.save_logo(dbsession, data)
    assert logo.read_logo(dbsession) is None


def test_a_decompression_bomb_is_refused_before_it_is_decoded(dbsession):
    # 20000 x 20000 pixels (1.2 GB decoded) of one grey: a few hundred KB as a PNG.
    bomb = io.BytesIO()
    Image.new("1", (20000, 20000)).save(bomb, "PNG")
    assert len(bomb.getvalue()) < logo.MAX_BYTES
    with pytest.raises(logo.LogoInvalid, match="at most 4096"):
        logo.check_logo(bomb.getvalue())


def test_the_logo_can_be_removed(dbsession):
    logo.save_logo(dbsession, png())
    assert logo.remove_logo(dbsession) is True
    assert logo.read_logo(dbsession) is None and logo.remove_logo(dbsession) is False
    dbsession.rollback()
    assert dbsession.scalar(select(Invoice)) is None


@pytest.mark.parametrize("number", ["%00", "INV-%00", "x" * 300, "%F0%9F%98%80", "..%2F..", "-1"])
def test_hostile_pdf_numbers_are_a_4xx_page(client, account, admin_pages, number):
    for prefix in ("/account/invoices/", "/admin/invoices/"):
        response = (admin_pages if prefix.startswith("/admin") else client).get(
            f"{prefix}{number}.pdf", status="*"
        )
        assert 400 <= response.status_int < 500, (prefix, number)
        assert response.content_type == "text/html"


def test_fulfilment_freezes_the_seller_on_the_invoice_it_issues(
    dbsession, catalogue, customer, fake_stripe
):
    """The invoice a payment issues keeps the seller's identity of that moment (a saved
    legal name, nothing else set); the console's later changes do not reach it."""
    dbsession.add(ShopSetting(key="seller.legalName", value="Example Software GmbH"))
    dbsession.commit()
    order = card_paid_order(dbsession, customer, fake_stripe)
    dbsession.commit()
    invoice = dbsession.scalar(select(Invoice).where(Invoice.order_id == order.id))
    assert invoice.seller["legalName"] == "Example Software GmbH"
    assert invoice.seller["country"] == "" and invoice.seller["logoSha256"] is None
    dbsession.get(ShopSetting, "seller.legalName").value = "Renamed Software AG"
    dbsession.commit()
    dbsession.refresh(invoice)
    assert invoice.seller["legalName"] == "Example Software GmbH"
