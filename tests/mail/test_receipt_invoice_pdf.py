"""The receipt links the invoice's PDF in both parts, and that link, followed by the
logged-in buyer, is the PDF."""

from __future__ import annotations

import urllib.parse

from bs4 import BeautifulSoup
from fakes.stripe_api import event, session_object
from helpers.clients import logged_in
from helpers.payments import send
from sqlalchemy import select

from cmsshop.models import Invoice, OutboxMessage


def test_the_receipt_links_the_invoice_pdf_the_buyer_can_fetch(
    card_app, webhook, fake_stripe, order, customer, other_customer, dbsession
):
    session = fake_stripe.add_session(session_object(order.number, order.total))
    assert send(webhook, event("checkout.session.completed", session), 200).json["status"] == (
        "processed"
    )
    dbsession.rollback()  # a fresh read transaction (SQLite snapshot)
    invoice = dbsession.scalar(select(Invoice).where(Invoice.order_id == order.id))
    (receipt,) = dbsession.scalars(select(OutboxMessage).where(OutboxMessage.kind == "receipt"))
    base_url = card_app.registry.settings["cmsshop.base_url"].rstrip("/")
    url = f"{base_url}/account/invoices/{invoice.number}.pdf"

    assert f"Download the invoice (PDF): {url}" in receipt.text_body
    link = BeautifulSoup(receipt.html_body, "html.parser").find(
        "a", string="Download the invoice (PDF)"
    )
    assert link is not None and link["href"] == url

    path = urllib.parse.urlsplit(link["href"]).path
    response = logged_in(card_app, customer).get(path)
    assert response.content_type == "application/pdf"
    assert response.body.startswith(b"%PDF-")
    # The link is no credential: another customer following it finds nothing.
    logged_in(card_app, other_customer).get(path, status=404)
