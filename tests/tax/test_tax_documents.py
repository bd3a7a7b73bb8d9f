"""The documents of taxed sales, end to end: orders placed through the real checkout JSON
API of a seller established in Germany with tax on, paid through the fake card provider
and the real, signed webhook route; the invoices they issue on the account's page and in
the PDF (read back with pypdf); credit notes of refunds asked for in the console's API
and confirmed by the provider's event, at the invoice's rate even after the rate table
changed; and the quarter's tax report, whose totals are the sum of those documents."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal

from fakes.stripe_api import charge_object, dispute_object, event
from helpers.cli import run_admin
from helpers.clients import logged_in, new_client
from helpers.coupons import make_coupon
from helpers.payments import deliver
from helpers.tax import BUSINESS_FR
from pypdf import PdfReader
from sqlalchemy import select

from cmsshop.models import CreditNote, Invoice, Order
from cmsshop.services.tax.engine import OUTSIDE_SCOPE_NOTE, REVERSE_CHARGE_NOTE
from cmsshop.services.tax.rates import parse_extra_rates
from cmsshop.services.tax.report import current_quarter, tax_report

from .conftest import buyer_of, invoice_of, pay_by_card, place, stored

INCLUSIVE = {"cmsshop.tax.prices_include_tax": "true"}

CONSUMER_DE = {
    "country": "DE",
    "name": "Max Mustermann",
    "addressLine1": "Lindenallee 7",
    "city": "Hamburg",
    "postalCode": "20095",
}
BUYER_US = {
    "country": "US",
    "name": "Jane Roe",
    "addressLine1": "1 Main Street",
    "city": "Springfield",
    "postalCode": "62701",
}


def buy(app, user, fake_stripe, billing: dict, items: dict[str, int], **extra) -> str:
    """``user`` checks out ``items`` (slug -> quantity) with ``billing`` through the JSON
    API and pays on the fake provider's page; its signed event is delivered. The order's
    number."""
    placed = place(buyer_of(app, user), billing, items, **extra).json
    assert pay_by_card(app, fake_stripe, placed)["status"] == "processed"
    return placed["order"]["number"]


def documents_of(dbsession, number: str) -> tuple[Order, Invoice]:
    order = stored(dbsession, number)
    return order, invoice_of(dbsession, order)


def notes_of(dbsession, order: Order) -> list[CreditNote]:
    dbsession.commit()
    dbsession.expire_all()
    query = select(CreditNote).where(CreditNote.order_id == order.id).order_by(CreditNote.id)
    return list(dbsession.scalars(query))


def words(node) -> str:
    return " ".join(node.get_text(" ").split())


def pdf_text(response) -> str:
    assert response.content_type == "application/pdf"
    reader = PdfReader(io.BytesIO(response.body))
    return " ".join(" ".join(page.extract_text() for page in reader.pages).split())


def invoice_texts(app, user, number: str) -> tuple[str, str]:
    """The invoice's text on the account's page, and in its PDF."""
    client = logged_in(app, user)
    page = client.get(f"/account/invoices/{number}")
    html = words(page.html.find("article", class_="invoice"))
    return html, pdf_text(client.get(f"/account/invoices/{number}.pdf"))


def net_of(gross: int, rate: str) -> int:
    """The net inside ``gross`` cents at ``rate`` percent, half up (arithmetic of its own,
    not the app's)."""
    value = Decimal(gross) * 100 / (100 + Decimal(rate))
    return int(value.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def spread(amount: int, weights: list[int]) -> list[int]:
    """``amount`` spread over ``weights`` in proportion, largest remainder."""
    total = sum(weights)
    exact = [Decimal(amount) * w / total for w in weights]
    parts = [int(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: exact[i] - parts[i], reverse=True)
    for i in by_remainder[: amount - sum(parts)]:
        parts[i] += 1
    return parts


# --- invoices --------------------------------------------------------------------------------


def test_a_domestic_invoice_states_each_lines_net_rate_tax_and_gross(
    taxed_app, customer, fake_stripe, dbsession
):
    app = taxed_app()
    number = buy(app, customer, fake_stripe, CONSUMER_DE, {"plugin": 1, "themes": 2})
    order, invoice = documents_of(dbsession, number)
    # 100.00 + 2 x 19.00 without tax: 19 % on top, 26.22 of tax on 138.00.
    assert [(x["net"], x["taxRate"], x["tax"], x["amount"]) for x in invoice.lines] == [
        (10000, "19", 1900, 11900),
        (3800, "19", 722, 4522),
    ]
    assert invoice.total == order.total == 16422
    assert invoice.tax["totals"] == [{"rate": "19", "net": 13800, "tax": 2622, "gross": 16422}]
    html, pdf = invoice_texts(app, customer, invoice.number)
    for text in (html, pdf):
        for expected in (
            f"Invoice {invoice.number}",
            order.number,
            "Example Software GmbH",
            "Hauptstraße 1",
            "10115 Berlin",
            "DE136695976",
            "Max Mustermann",
            "Lindenallee 7",
            "20095 Hamburg",
            "Germany",
        ):
            assert expected in text, expected
    assert "Unit price (excl. tax)" in html
    assert "Plugin 1 EUR100.00 EUR100.00 19 % EUR19.00 EUR119.00" in html
    assert "Theme Pack 2 EUR19.00 EUR38.00 19 % EUR7.22 EUR45.22" in html
    assert "Net at 19 % EUR138.00 VAT 19 % EUR26.22 Total (EUR) EUR164.22" in html
    for expected in (
        "EUR100.00",
        "EUR119.00",
        "EUR7.22",
        "EUR45.22",
        "19 %",
        "Net at 19 %",
        "EUR138.00",
        "VAT 19 %",
        "EUR26.22",
        "EUR164.22",
    ):
        assert expected in pdf, expected
    assert REVERSE_CHARGE_NOTE not in html and OUTSIDE_SCOPE_NOTE not in html


def test_a_reverse_charge_invoice_states_0_percent_and_the_article_196_note(
    taxed_app, customer, fake_stripe, dbsession
):
    app = taxed_app()
    number = buy(app, customer, fake_stripe, BUSINESS_FR, {"plugin": 1})
    order, invoice = documents_of(dbsession, number)
    assert order.total == invoice.total == 10000 and order.tax == 0
    assert invoice.tax["regime"] == "reverse_charge" and invoice.tax["notes"] == [
        REVERSE_CHARGE_NOTE
    ]
    assert "Article 196" in REVERSE_CHARGE_NOTE
    html, pdf = invoice_texts(app, customer, invoice.number)
    assert "Plugin 1 EUR100.00 EUR100.00 0 % EUR0.00 EUR100.00" in html
    assert "Net at 0 % EUR100.00 VAT 0 % EUR0.00 Total (EUR) EUR100.00" in html
    for text in (html, pdf):
        for expected in (
            "Alice Martin",
            "Martin SARL",
            "12 rue de la Paix",
            "75002 Paris",
            "France",
            "VAT ID: FR40303265045",
            "DE136695976",
            "VAT 0 %",
            "Article 196",
            " ".join(REVERSE_CHARGE_NOTE.split()),
        ):
            assert expected in text, expected


def test_an_invoice_outside_the_eu_says_so_and_charges_no_tax(
    taxed_app, customer, fake_stripe, dbsession
):
    app = taxed_app()
    number = buy(app, customer, fake_stripe, BUYER_US, {"plugin": 1})
    order, invoice = documents_of(dbsession, number)
    assert order.total == invoice.total == 10000 and order.tax == 0
    html, pdf = invoice_texts(app, customer, invoice.number)
    assert "Net at 0 % EUR100.00 Tax 0 % EUR0.00 Total (EUR) EUR100.00" in html
    for text in (html, pdf):
        for expected in ("Jane Roe", "62701 Springfield", "United States", "Tax 0 %"):
            assert expected in text, expected
        assert "Outside the scope of EU VAT" in text
        assert " ".join(OUTSIDE_SCOPE_NOTE.split()) in text
        assert REVERSE_CHARGE_NOTE not in text


def test_an_invoice_of_prices_including_tax(taxed_app, customer, fake_stripe, dbsession):
    """Finland, 25.5 %, prices entered with tax: 2 x 9.99 is the gross; the tax inside."""
    app = taxed_app(**INCLUSIVE)
    billing = {**CONSUMER_DE, "country": "FI", "city": "Helsinki", "postalCode": "00100"}
    number = buy(app, customer, fake_stripe, billing, {"ebook": 2})
    order, invoice = documents_of(dbsession, number)
    net = net_of(1998, "25.5")
    assert (net, 1998 - net) == (1592, 406)
    assert [(x["net"], x["taxRate"], x["tax"], x["amount"]) for x in invoice.lines] == [
        (1592, "25.5", 406, 1998)
    ]
    assert order.total == invoice.total == 1998
    html, pdf = invoice_texts(app, customer, invoice.number)
    assert "Unit price (incl. tax)" in html
    assert "E-book 2 EUR9.99 EUR15.92 25.5 % EUR4.06 EUR19.98" in html
    assert "Net at 25.5 % EUR15.92 VAT 25.5 % EUR4.06 Total (EUR) EUR19.98" in html
    for expected in ("Finland", "00100 Helsinki", "EUR15.92", "25.5 %", "EUR4.06", "EUR19.98"):
        assert expected in pdf, expected


# --- credit notes ----------------------------------------------------------------------------


def refund(app, admin, fake_stripe, order: Order, body: dict, key: str) -> dict:
    """A refund asked for in the console's API, confirmed by the provider's signed
    charge.refunded event through the real webhook route."""
    console = new_client(app)
    console.login(admin.email)
    made = console.post_json(
        f"/api/admin/orders/{order.number}/refunds",
        body,
        headers={"Idempotency-Key": key},
        status=201,
    ).json["refund"]
    confirmed = fake_stripe.refund_event(made["providerRefundId"])
    # A partial refund of products without licenses changes no order state ("ignored"),
    # but the money went back: it is credited all the same.
    assert deliver(app, confirmed, status=200).json["status"] in ("processed", "ignored")
    return made


def note_lines(note: CreditNote) -> list[tuple[str, str, int, int, int]]:
    return [(x["name"], x["taxRate"], x["net"], x["tax"], x["amount"]) for x in note.lines]


def test_partial_then_full_refund_credit_at_the_invoices_rate_after_a_rate_change(
    taxed_app, customer, admin, fake_stripe, dbsession
):
    app = taxed_app()
    number = buy(app, customer, fake_stripe, CONSUMER_DE, {"plugin": 1, "themes": 1})
    order, invoice = documents_of(dbsession, number)
    gross = [x["amount"] for x in invoice.lines]
    assert gross == [11900, 2261] and order.total == 14161

    # Germany's rate changes (a row of its own, in force today) before the money goes back: the
    # credit notes keep the invoice's 19 %.
    app.registry.settings["cmsshop.tax.extra_rates"] = parse_extra_rates("DE 21 2026-01-01")
    later = buy(app, customer, fake_stripe, CONSUMER_DE, {"plugin": 1})
    later_order, _ = documents_of(dbsession, later)
    assert later_order.tax_details["rate"] == "21" and later_order.total == 12100

    refund(app, admin, fake_stripe, order, {"amount": 5000}, "part-1")
    [first] = notes_of(dbsession, order)
    parts = spread(5000, gross)
    expected = [
        (name, "19", -net_of(g, "19"), -(g - net_of(g, "19")), -g)
        for name, g in zip(("Plugin", "Theme Pack"), parts, strict=True)
    ]
    assert note_lines(first) == expected
    assert first.total == -5000
    assert first.net_total == sum(x[2] for x in expected)
    assert first.tax_total == sum(x[3] for x in expected)

    refund(app, admin, fake_stripe, order, {"full": True}, "rest-1")
    first, rest = notes_of(dbsession, order)
    left = [g - p for g, p in zip(gross, parts, strict=True)]
    assert note_lines(rest) == [
        (name, "19", -net_of(g, "19"), -(g - net_of(g, "19")), -g)
        for name, g in zip(("Plugin", "Theme Pack"), left, strict=True)
    ]
    assert first.total + rest.total == -order.total
    # Together the notes give back exactly the gross of each invoice line.
    for i, line in enumerate(invoice.lines):
        assert -sum(n.lines[i]["amount"] for n in (first, rest)) == line["amount"]
    assert rest.number.split("-")[-1] == f"{int(first.number.split('-')[-1]) + 1:06d}"

    # The buyer's page and PDF of the partial note: negative amounts at 19 %.
    buyer = logged_in(app, customer)
    page = words(buyer.get(f"/account/credit-notes/{first.number}").html.find("main"))
    pdf = pdf_text(buyer.get(f"/account/credit-notes/{first.number}.pdf"))
    name, rate, net, tax, amount = expected[0]
    row = f"{name} {money(net)} {rate} % {money(tax)} {money(amount)}"
    assert row in page, (row, page)
    for text in (page, pdf):
        for expected_text in (
            f"Credit note {first.number}",
            invoice.number,
            "Example Software GmbH",
            "DE136695976",
            "Max Mustermann",
            money(net),
            money(tax),
            money(amount),
            "19 %",
            money(-5000),
        ):
            assert expected_text in text, expected_text
        assert "21 %" not in text


def test_a_full_refund_credits_the_whole_invoice(
    taxed_app, customer, admin, fake_stripe, dbsession
):
    app = taxed_app()
    number = buy(app, customer, fake_stripe, CONSUMER_DE, {"plugin": 1, "themes": 1})
    order, invoice = documents_of(dbsession, number)
    refund(app, admin, fake_stripe, order, {"full": True}, "full-1")
    [note] = notes_of(dbsession, order)
    assert note_lines(note) == [
        ("Plugin", "19", -10000, -1900, -11900),
        ("Theme Pack", "19", -1900, -361, -2261),
    ]
    assert (note.total, note.net_total, note.tax_total) == (-14161, -11900, -2261)
    buyer = logged_in(app, customer)
    page = words(buyer.get(f"/account/credit-notes/{note.number}").html.find("main"))
    assert "Plugin -EUR100.00 19 % -EUR19.00 -EUR119.00" in page
    assert "Theme Pack -EUR19.00 19 % -EUR3.61 -EUR22.61" in page
    pdf = pdf_text(buyer.get(f"/account/credit-notes/{note.number}.pdf"))
    for expected in ("-EUR100.00", "-EUR19.00", "-EUR119.00", "-EUR3.61", "-EUR141.61"):
        assert expected in pdf, expected
    assert invoice.number in pdf


def test_a_refund_of_one_line_gives_back_its_gross_and_credits_its_tax(
    taxed_app, customer, admin, fake_stripe, dbsession
):
    """Prices without tax: the Theme Pack line cost the buyer 19.00 + 3.61; refunding
    that line gives back 22.61, credited as -19.00 net and -3.61 VAT at 19 %."""
    app = taxed_app()
    number = buy(app, customer, fake_stripe, CONSUMER_DE, {"plugin": 1, "themes": 1})
    order, _invoice = documents_of(dbsession, number)
    console = new_client(app)
    console.login(admin.email)
    lines = console.get(f"/api/admin/orders/{order.number}/refunds").json["lines"]
    themes = next(line for line in lines if line["name"] == "Theme Pack")
    made = refund(app, admin, fake_stripe, order, {"lines": [{"item": themes["item"]}]}, "l-1")
    assert made["amount"] == 2261
    [note] = notes_of(dbsession, order)
    assert note_lines(note) == [("Theme Pack", "19", -1900, -361, -2261)]
    assert (note.total, note.net_total, note.tax_total) == (-2261, -1900, -361)


def test_a_tax_inclusive_invoice_credited_in_part_then_by_a_lost_chargeback(
    taxed_app, customer, fake_stripe, dbsession
):
    """Finland at 25.5 %, prices entered with tax: a partial refund and then a lost
    chargeback (what is left) credit at 25.5 %; together exactly the invoice."""
    app = taxed_app(**INCLUSIVE)
    number = buy(app, customer, fake_stripe, {"country": "FI"}, {"plugin": 1, "ebook": 3})
    order, invoice = documents_of(dbsession, number)
    gross = [x["amount"] for x in invoice.lines]
    assert gross == [10000, 2997] and order.total == 12997
    assert [(x["net"], x["tax"]) for x in invoice.lines] == [
        (net_of(g, "25.5"), g - net_of(g, "25.5")) for g in gross
    ]
    pi = order.payment_reference
    charge = charge_object(pi, order.total, 1000)
    assert deliver(app, event("charge.refunded", charge), status=200).json["status"] in (
        "processed",
        "ignored",
    )
    deliver(app, event("charge.dispute.created", dispute_object(pi)), status=200)
    lost = event("charge.dispute.closed", dispute_object(pi, "lost"))
    assert deliver(app, lost, status=200).json["status"] == "processed"
    part, chargeback = notes_of(dbsession, order)
    assert (part.kind, chargeback.kind) == ("refund", "chargeback")
    assert part.total == -1000 and part.total + chargeback.total == -order.total
    for note in (part, chargeback):
        for line in note.lines:
            assert line["taxRate"] == "25.5"
            net = net_of(-line["amount"], "25.5")
            assert (line["net"], line["tax"]) == (-net, line["amount"] + net)
        assert note.net_total == sum(x["net"] for x in note.lines)
        assert note.tax_total == sum(x["tax"] for x in note.lines)
    for i, line in enumerate(invoice.lines):
        assert -sum(n.lines[i]["amount"] for n in (part, chargeback)) == line["amount"]


def test_an_invoice_with_a_coupon_taxes_what_is_left_after_the_discount(
    taxed_app, customer, fake_stripe, dbsession
):
    """A 10 % coupon on 100.00 without tax: 90.00 net, 17.10 VAT, 107.10 paid."""
    make_coupon(dbsession, "SAVE10", percent_off=10)
    app = taxed_app()
    number = buy(app, customer, fake_stripe, CONSUMER_DE, {"plugin": 1}, coupon="SAVE10")
    order, invoice = documents_of(dbsession, number)
    assert [(x["discount"], x["net"], x["tax"], x["amount"]) for x in invoice.lines] == [
        (1000, 9000, 1710, 10710)
    ]
    assert order.total == invoice.total == 10710
    html, pdf = invoice_texts(app, customer, invoice.number)
    assert "Plugin 1 EUR100.00 −EUR10.00 EUR90.00 19 % EUR17.10 EUR107.10" in html
    assert "Net at 19 % EUR90.00 VAT 19 % EUR17.10 Total (EUR) EUR107.10" in html
    for expected in ("EUR90.00", "EUR17.10", "EUR107.10", "SAVE10"):
        assert expected in pdf, expected


def test_a_credit_note_of_a_reverse_charge_invoice_repeats_its_note(
    taxed_app, customer, admin, fake_stripe, dbsession
):
    app = taxed_app()
    number = buy(app, customer, fake_stripe, BUSINESS_FR, {"plugin": 1})
    order, invoice = documents_of(dbsession, number)
    assert invoice.tax["notes"] == [REVERSE_CHARGE_NOTE]
    refund(app, admin, fake_stripe, order, {"full": True}, "rc-full")
    [note] = notes_of(dbsession, order)
    assert note_lines(note) == [("Plugin", "0", -10000, 0, -10000)]
    buyer = logged_in(app, customer)
    page = words(buyer.get(f"/account/credit-notes/{note.number}").html.find("main"))
    assert "VAT ID: FR40303265045" in page and "0 %" in page
    pdf = pdf_text(buyer.get(f"/account/credit-notes/{note.number}.pdf"))
    for text in (page, pdf):
        assert " ".join(REVERSE_CHARGE_NOTE.split()) in text


def money(cents: int) -> str:
    sign = "-" if cents < 0 else ""
    return f"{sign}EUR{abs(cents) // 100}.{abs(cents) % 100:02d}"


# --- the report ------------------------------------------------------------------------------


def expected_report(dbsession) -> dict[tuple[str, str], tuple[int, int]]:
    """(country, rate) -> (net, tax) summed from the invoices' and credit notes' own lines
    in the database."""
    dbsession.commit()
    dbsession.expire_all()
    sums: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for invoice in dbsession.scalars(select(Invoice)):
        country = dbsession.get(Order, invoice.order_id).billing["country"]
        for line in invoice.lines:
            sums[(country, line["taxRate"])][0] += line["net"]
            sums[(country, line["taxRate"])][1] += line["tax"]
    for note in dbsession.scalars(select(CreditNote)):
        country = dbsession.get(Order, note.order_id).billing["country"]
        for line in note.lines:
            sums[(country, line["taxRate"])][0] += line["net"]
            sums[(country, line["taxRate"])][1] += line["tax"]
    return {key: tuple(value) for key, value in sums.items()}


def test_the_quarters_report_is_the_sum_of_its_documents(
    taxed_app, customer, other_customer, admin, fake_stripe, dbsession, ini
):
    app = taxed_app()
    de = buy(app, customer, fake_stripe, CONSUMER_DE, {"plugin": 1, "themes": 3})
    buy(app, other_customer, fake_stripe, CONSUMER_DE, {"ebook": 1})
    fr = buy(app, customer, fake_stripe, {"country": "FR"}, {"plugin": 1, "ebook": 2})
    fi = buy(app, other_customer, fake_stripe, {"country": "FI"}, {"ebook": 3})
    buy(app, customer, fake_stripe, BUSINESS_FR, {"plugin": 2})
    for number, body, key in (
        (de, {"amount": 3333}, "de-part"),
        (fr, {"full": True}, "fr-full"),
        (fi, {"amount": 500}, "fi-part"),
    ):
        refund(app, admin, fake_stripe, documents_of(dbsession, number)[0], body, key)

    expected = expected_report(dbsession)
    assert set(expected) == {("DE", "19"), ("FR", "20"), ("FI", "25.5"), ("FR", "0")}
    assert expected[("FR", "20")] == (0, 0)  # fully credited
    quarter = current_quarter()

    report = tax_report(dbsession, quarter, {})
    assert report.corrections == [] and report.missing_rates == []
    got = {(r.country, r.rate): (r.net, r.tax) for r in report.sales}
    assert got == expected
    assert {(r.country, r.rate): (r.invoices, r.credit_notes) for r in report.sales} == {
        ("DE", "19"): (2, 1),
        ("FI", "25.5"): (1, 1),
        ("FR", "0"): (1, 0),
        ("FR", "20"): (1, 1),
    }
    assert all(
        r.currency == "EUR" and (r.net_eur, r.tax_eur) == (r.net, r.tax) for r in report.sales
    )

    # The console's page and its CSV, and the command line: the same figures.
    console = logged_in(app, admin)
    page = console.get("/admin/tax/report", {"quarter": quarter})
    sales = words(page.html.find("section", attrs={"aria-labelledby": "sales"}))
    for (country, rate), (net, tax) in expected.items():
        assert f"{country} {rate} % EUR {money(net)} {money(tax)}" in sales, (country, sales)
    csv_text = console.get("/admin/tax/report.csv", {"quarter": quarter}).text
    done = run_admin(ini, "tax-report", quarter)
    assert done.returncode == 0, done.stderr
    for text in (csv_text, done.stdout):
        rows = list(csv.reader(io.StringIO(text)))
        assert {(r[2], r[3]): (r[5], r[6]) for r in rows[1:] if r[0] == "sales"} == {
            key: (major(net), major(tax)) for key, (net, tax) in expected.items()
        }
        assert all(r[0] == "sales" for r in rows[1:])


def major(cents: int) -> str:
    sign = "-" if cents < 0 else ""
    return f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}"
