"""The invoice as a document: the seller and buyer it names, frozen or read as issued, and
its PDF.

An issued invoice is never edited, so the seller's identity is copied onto the invoice
when it is issued (``seller_snapshot``, kept in ``invoices.seller``): a later change of
the seller's address or VAT ID in the console changes new invoices only. The buyer's
details come from the order's own copy (``Order.billing``), which is never edited
either. The logo is not copied (it may be half a megabyte): the snapshot keeps its
sha256, and the invoice shows the logo only while the shop's logo still has those bytes.

A credit note is drawn the same way (``credit_note_document``): it names the seller, the
buyer and the logo of the invoice it corrects, as that invoice was issued.

The PDF is the invoice page's HTML drawn by WeasyPrint, with the system's DejaVu fonts.
Nothing is fetched while drawing: the only resource a document may name is our own
logo, handed over as bytes (``LOGO_URL``); any other URL is refused (``logo_fetcher``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pycountry
from sqlalchemy import select
from sqlalchemy.orm import Session, joinedload

from cmsshop.models import CreditNote, Currency, Invoice, ShopFile, User
from cmsshop.services.payments.lines import read_invoice_lines
from cmsshop.services.store.currencies import list_currencies
from cmsshop.services.tax.logo import logo_sha256, read_logo
from cmsshop.services.tax.seller import shop_profile

log = logging.getLogger(__name__)

# The name the invoice document gives its logo; the PDF's fetcher answers it from memory.
LOGO_URL = "cmsshop-logo:invoice"

SELLER_KEYS = (
    "legalName",
    "address",
    "postalCode",
    "city",
    "country",
    "taxId",
    "invoiceFooter",
    "logoSha256",
)
BUYER_KEYS = (
    "name",
    "company",
    "address_line1",
    "address_line2",
    "postal_code",
    "city",
    "region",
    "country",
    "vat_id",
)


def seller_snapshot(profile: Any, logo_sha256: str | None = None) -> dict[str, Any]:
    """The seller's identity as an invoice keeps it from the moment it is issued.

    ``profile``: the seller's identity (services.tax.seller's ShopProfile: legal_name,
    address, postal_code, city, country, tax_id, invoice_footer); ``logo_sha256``: the
    shop's logo then, if any."""
    return {
        "legalName": profile.legal_name,
        "address": profile.address,
        "postalCode": profile.postal_code,
        "city": profile.city,
        "country": profile.country,
        "taxId": profile.tax_id,
        "invoiceFooter": profile.invoice_footer,
        "logoSha256": logo_sha256,
    }


def freeze_seller(session: Session, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The snapshot to store in ``Invoice.seller`` when the invoice is issued: the seller's
    identity now (saved values over the ini defaults) and the logo's sha256."""
    return seller_snapshot(shop_profile(session, settings), logo_sha256(session))


def country_name(code: str | None) -> str:
    """``Germany`` for ``DE``; an unknown code as it is."""
    if not code:
        return ""
    found = pycountry.countries.get(alpha_2=code.upper())
    return found.name if found else code


def invoice_seller(invoice: Any) -> dict[str, Any] | None:
    """The seller as the invoice was issued with: its snapshot with the address as lines
    and the country named, or None for an invoice issued before snapshots were kept
    (such an invoice shows only the shop's name, as it always did)."""
    frozen = getattr(invoice, "seller", None)
    if not isinstance(frozen, Mapping) or not frozen.get("legalName"):
        return None
    seller = {key: frozen.get(key) or "" for key in SELLER_KEYS}
    seller["addressLines"] = [line for line in seller["address"].splitlines() if line.strip()]
    seller["countryName"] = country_name(seller["country"])
    seller["footerLines"] = [line for line in seller["invoiceFooter"].splitlines() if line.strip()]
    return seller


def invoice_buyer(order: Any, user: Any) -> dict[str, Any]:
    """Who the invoice is addressed to: the order's billing details when the buyer gave
    them at checkout, else the account's name and e-mail (as invoices always showed)."""
    billing = getattr(order, "billing", None)
    if isinstance(billing, Mapping) and billing.get("country"):
        buyer = {key: billing.get(key) or "" for key in BUYER_KEYS}
        buyer["countryName"] = country_name(buyer["country"])
        buyer["email"] = user.email if user is not None else ""
        buyer["fromBilling"] = True
        return buyer
    return {
        "name": (user.name if user is not None else "") or "",
        "email": user.email if user is not None else "",
        "fromBilling": False,
    }


def logo_fetcher(logo: tuple[bytes, str] | None):
    """WeasyPrint's URL fetcher for an invoice: our logo from memory, nothing else.

    A refused URL raises, so WeasyPrint draws the page without it (and logs a warning);
    no request ever leaves the process while a PDF is drawn."""
    from weasyprint.urls import URLFetcher, URLFetcherResponse

    class LogoFetcher(URLFetcher):
        def fetch(self, url: str, headers: Any = None) -> URLFetcherResponse:
            if url == LOGO_URL and logo is not None:
                data, content_type = logo
                return URLFetcherResponse(url, data, {"Content-Type": content_type})
            raise ValueError(f"invoice documents fetch nothing: {url[:80]!r} refused")

    # No protocol at all for urllib's handlers: fetch() above is the only way in.
    return LogoFetcher(allowed_protocols=(), allow_redirects=False)


def render_pdf(html: str, logo: tuple[bytes, str] | None = None) -> bytes:
    """The invoice page's HTML (its own stylesheet inline) drawn as a PDF.

    ``logo``: (bytes, content type) of the logo the document names as ``LOGO_URL``."""
    # Imported here: WeasyPrint loads pango through cffi, which costs start-up time every
    # process would pay while only invoice downloads need it.
    from weasyprint import HTML

    return HTML(string=html, base_url=None, url_fetcher=logo_fetcher(logo)).write_pdf()


def pdf_filename(number: str) -> str:
    """``invoice-INV-2026-000042.pdf``: numbers are [A-Z0-9-], safe in a header."""
    safe = "".join(ch for ch in number if ch.isalnum() or ch == "-")
    return f"invoice-{safe}.pdf"


def invoice_logo(session: Session, seller: Mapping[str, Any] | None) -> ShopFile | None:
    """The shop's logo if it is still the one the invoice was issued with (by sha256)."""
    if not seller or not seller.get("logoSha256"):
        return None
    logo = read_logo(session)
    return logo if logo is not None and logo.sha256 == seller["logoSha256"] else None


def invoice_document(session: Session, invoice: Invoice) -> dict[str, Any]:
    """What the invoice document (templates/tax/_invoice.html) shows, as issued."""
    seller = invoice_seller(invoice)
    return {
        "invoice": invoice,
        "lines": read_invoice_lines(invoice.lines),
        "seller": seller,
        "buyer": invoice_buyer(invoice.order, session.get(User, invoice.user_id)),
        "logo": invoice_logo(session, seller),
        "currencies": {c.code: c for c in list_currencies(session, enabled_only=False)},
    }


def find_any_invoice(session: Session, number: str | None) -> Invoice | None:
    """The invoice of this number whoever it belongs to (the console's), or None."""
    if not number or len(number) > 32:
        return None
    return session.scalar(
        select(Invoice).where(Invoice.number == number).options(joinedload(Invoice.order))
    )


def credit_note_filename(number: str) -> str:
    """``credit-note-CN-2026-000007.pdf``: numbers are [A-Z0-9-], safe in a header."""
    safe = "".join(ch for ch in number if ch.isalnum() or ch == "-")
    return f"credit-note-{safe}.pdf"


def credit_note_document(session: Session, note: CreditNote) -> dict[str, Any]:
    """What the credit note document (templates/tax/_credit_note.html) shows: the note and
    the invoice it corrects, with that invoice's seller, buyer and logo as issued (a
    credit note names the same parties as its invoice, whatever changed since)."""
    invoice = session.scalar(
        select(Invoice).where(Invoice.id == note.invoice_id).options(joinedload(Invoice.order))
    )
    seller = invoice_seller(invoice)
    return {
        "note": note,
        "invoice": invoice,
        "order_number": invoice.order.number,
        "seller": seller,
        "buyer": invoice_buyer(invoice.order, session.get(User, invoice.user_id)),
        "logo": invoice_logo(session, seller),
        "currency": session.get(Currency, note.currency),
    }
