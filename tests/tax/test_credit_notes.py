"""Credit notes: a refund confirmed by the provider's event, or a lost chargeback, issues
one credit note in its own gap-free series, referring to the invoice, with negative
amounts at the invoice's own rates; repeated and late events issue nothing more; an order
never delivered (no invoice) gets none."""

from __future__ import annotations

import datetime as dt

import pytest
from fakes.shop import make_order
from fakes.stripe_api import dispute_object, event
from helpers.clients import logged_in, new_client
from helpers.outbox import rows as outbox_rows
from helpers.payments import send
from helpers.refunds import card_paid_order
from helpers.tax import refunded
from sqlalchemy import select

from cmsshop.models import CreditNote, Invoice
from cmsshop.services.tax.credit_notes import line_rate
from cmsshop.services.tax.rounding import net_of_gross

YEAR = dt.datetime.now(dt.UTC).year


def notes(session) -> list[CreditNote]:
    session.commit()  # ends the read snapshot (SQLite WAL)
    session.expire_all()
    return list(session.scalars(select(CreditNote).order_by(CreditNote.id)))


def amounts(note: CreditNote) -> list[tuple[str, str, int, int, int]]:
    return [(x["name"], x["taxRate"], x["net"], x["tax"], x["amount"]) for x in note.lines]


@pytest.fixture
def paid(dbsession, catalogue, customer, fake_stripe):
    """A delivered card order: SiteGuard 49.00 + Theme Pack 19.00, invoiced."""
    order = card_paid_order(dbsession, customer, fake_stripe)
    invoice = dbsession.scalar(select(Invoice).where(Invoice.order_id == order.id))
    return order, invoice, f"pi_{order.number.replace('-', '')}"


def test_partial_refunds_then_the_rest_each_issue_one_note(webhook, dbsession, paid):
    order, invoice, pi = paid
    first = refunded(pi, 6800, [("re_1", 3400)])
    assert send(webhook, first, 200).json["status"] == "processed"
    [note] = notes(dbsession)
    assert note.number == f"CN-{YEAR}-000001" and note.kind == "refund"
    assert (note.invoice_id, note.order_id, note.user_id) == (invoice.id, order.id, order.user_id)
    assert note.refund_id is not None and note.cause == f"refund:{note.refund_id}"
    # Spread over the lines in proportion to them (49 : 19), exactly the refund.
    assert amounts(note) == [
        ("SiteGuard", "0", -2450, 0, -2450),
        ("Theme Pack", "0", -950, 0, -950),
    ]
    assert (note.total, note.net_total, note.tax_total, note.currency) == (-3400, -3400, 0, "EUR")
    # The buyer's refund e-mail names it and links to it.
    [mail] = [m for m in outbox_rows(dbsession) if m.kind == "refund"]
    assert f"Credit note {note.number}: " in mail.text_body
    assert f"/account/credit-notes/{note.number}" in mail.text_body
    assert '<a href="http://' in mail.html_body and note.number in mail.html_body

    # The same event again, and the same refund listed in another: nothing more.
    send(webhook, first, 200)
    send(webhook, refunded(pi, 6800, [("re_1", 3400)]), 200)
    assert len(notes(dbsession)) == 1

    rest = refunded(pi, 6800, [("re_1", 3400), ("re_2", 3400)])
    assert send(webhook, rest, 200).json["status"] == "processed"
    first_note, second = notes(dbsession)
    assert second.number == f"CN-{YEAR}-000002"  # gap-free, its own series
    assert sum(-x["amount"] for n in (first_note, second) for x in n.lines) == 6800
    assert amounts(second) == [
        ("SiteGuard", "0", -2450, 0, -2450),
        ("Theme Pack", "0", -950, 0, -950),
    ]
    # A late redelivery of the first refund after the full one: nothing more.
    send(webhook, first, 200)
    assert len(notes(dbsession)) == 2
    # The invoice itself is never touched.
    dbsession.refresh(invoice)
    assert invoice.total == 6800 and [x["amount"] for x in invoice.lines] == [4900, 1900]


def test_a_refund_by_line_credits_that_line(card_app, admin, webhook, dbsession, paid, fake_stripe):
    order, _invoice, _pi = paid
    client = new_client(card_app)
    client.login(admin.email)
    lines = client.get(f"/api/admin/orders/{order.number}/refunds").json["lines"]
    themes = next(line for line in lines if line["name"] == "Theme Pack")
    made = client.post_json(
        f"/api/admin/orders/{order.number}/refunds",
        {"lines": [{"item": themes["item"]}]},
        headers={"Idempotency-Key": "line-1"},
        status=201,
    ).json["refund"]
    assert notes(dbsession) == []  # asked for, not confirmed: no credit note yet
    confirmed = fake_stripe.refund_event(made["providerRefundId"])
    assert send(webhook, confirmed, 200).json["status"] == "processed"
    [note] = notes(dbsession)
    assert amounts(note) == [("Theme Pack", "0", -1900, 0, -1900)]


def test_a_lost_chargeback_credits_what_is_left_once(webhook, dbsession, paid):
    _order, invoice, pi = paid
    send(webhook, refunded(pi, 6800, [("re_1", 1000)]), 200)
    send(webhook, event("charge.dispute.created", dispute_object(pi)), 200)
    lost = event("charge.dispute.closed", dispute_object(pi, "lost"))
    assert send(webhook, lost, 200).json["status"] == "processed"
    send(webhook, lost, 200)
    partial, chargeback = notes(dbsession)
    assert chargeback.kind == "chargeback" and chargeback.cause == f"chargeback:{invoice.id}"
    assert chargeback.refund_id is None
    assert partial.total + chargeback.total == -6800
    assert amounts(chargeback) == [
        ("SiteGuard", "0", -4179, 0, -4179),
        ("Theme Pack", "0", -1621, 0, -1621),
    ]


def test_the_invoice_rates_are_credited_even_after_a_rate_change(webhook, dbsession, paid):
    """An invoice issued at 19 % is credited at 19 %: the credit note reads the rate the
    invoice carries, never today's table."""
    _order, invoice, pi = paid
    invoice.lines = [
        {**line, "taxRate": "19", "net": net, "tax": line["amount"] - net}
        for line, net in zip(invoice.lines, (4118, 1597), strict=True)
    ]
    dbsession.commit()
    send(webhook, refunded(pi, 6800, [("re_1", 2380)]), 200)
    [note] = notes(dbsession)
    # 2380 spread 49 : 19 -> 1715 + 665; each split at 19 %, half up.
    assert amounts(note) == [
        ("SiteGuard", "19", -1441, -274, -1715),
        ("Theme Pack", "19", -559, -106, -665),
    ]
    assert (note.total, note.net_total, note.tax_total) == (-2380, -2000, -380)


def test_no_invoice_no_credit_note(webhook, dbsession, catalogue, customer, fake_stripe):
    """An order refunded while never delivered has no invoice to correct."""
    order = make_order(dbsession, customer, ("site-guard",))
    order.payment_reference = "pi_never_paid"
    dbsession.commit()
    send(webhook, refunded("pi_never_paid", 4900, [("re_x", 4900)]))
    assert notes(dbsession) == []


# --- the pages ------------------------------------------------------------------------------


def test_the_buyer_and_the_console_see_the_note(
    card_app, webhook, dbsession, paid, admin, customer, other_customer
):
    order, invoice, pi = paid
    send(webhook, refunded(pi, 6800, [("re_1", 3400)]), 200)
    [note] = notes(dbsession)

    buyer = logged_in(card_app, customer)
    order_page = buyer.get(f"/account/orders/{order.number}")
    link = order_page.html.find("a", string=f"Credit note {note.number}")
    assert link["href"] == f"/account/credit-notes/{note.number}"
    page = buyer.get(link["href"])
    text = " ".join(page.html.find("main").get_text(" ").split())
    assert f"Credit note {note.number}" in text
    assert f"Corrects invoice {invoice.number}" in text and order.number in text
    assert "SiteGuard -EUR24.50 0 % EUR0.00 -EUR24.50" in text
    assert "Total (EUR) -EUR34.00" in text
    assert len(page.html.find_all("h1")) == 1

    # Another customer, a malformed and an unknown number: not found.
    logged_in(card_app, other_customer).get(link["href"], status=404)
    buyer.get("/account/credit-notes/CN-1-x", status=404)
    buyer.get(f"/account/credit-notes/CN-{YEAR}-999999", status=404)
    # Logged out: to the login page, and back here after it.
    to_login = new_client(card_app).get(link["href"], status=303).location
    assert "/login" in to_login and note.number in to_login

    console = logged_in(card_app, admin)
    order_admin = console.get(f"/admin/orders/{order.number}")
    listed = order_admin.html.find(id="credit-notes").get_text(" ")
    assert note.number in listed and "-EUR34.00" in listed and "refund" in listed
    timeline = order_admin.html.find("section", attrs={"aria-labelledby": "timeline"}).get_text(" ")
    assert f"Credit note {note.number} issued for EUR34.00" in " ".join(timeline.split())
    admin_page = console.get(f"/admin/credit-notes/{note.number}")
    assert f"Credit note {note.number}" in admin_page.html.find("h1").get_text()
    buyer.get(f"/admin/credit-notes/{note.number}", status=403)


# --- the arithmetic -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gross", "rate", "net", "tax"),
    [
        (2380, "19", 2000, 380),
        (999, "25.5", 796, 203),  # 9.99 at 25.5 %: net 7.96, tax 2.03
        (119, "19", 100, 19),
        (0, "21", 0, 0),
        (500, None, 500, 0),  # an invoice line from before taxes: 0 %
    ],
)
def test_a_credited_gross_splits_at_the_lines_rate(gross, rate, net, tax):
    assert net_of_gross(gross, line_rate({"taxRate": rate}) * 100) == (net, tax)
