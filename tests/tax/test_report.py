"""The quarter's tax report: invoices less credit notes per country of consumption and
rate, in EUR; a credit note for an earlier quarter listed as that quarter's correction in
the later report (the earlier one unchanged); totals equal to the sum of the documents;
the console page, its CSV, and cmsshop-admin tax-report."""

from __future__ import annotations

import csv
import datetime as dt
import io
from decimal import Decimal

import pytest
from fakes.shop import make_order
from helpers.cli import run_admin
from helpers.clients import logged_in
from sqlalchemy import select

from cmsshop.models import CreditNote, Invoice, Refund
from cmsshop.services.payments import fulfilment
from cmsshop.services.tax import credit_notes
from cmsshop.services.tax.report import parse_eur_rate, parse_quarter, tax_report
from cmsshop.util import utcnow

AUG = dt.datetime(2026, 8, 14, 10, tzinfo=dt.UTC)
SEP = dt.datetime(2026, 9, 30, 23, 59, tzinfo=dt.UTC)
OCT = dt.datetime(2026, 10, 1, 0, 0, tzinfo=dt.UTC)


def sold(session, user, slugs, *, country, rate, nets, currency="EUR", when=AUG):
    """A delivered order billed to ``country``, its invoice issued ``when`` with lines at
    ``rate`` (percent) of the given nets: the invoice as a taxed checkout writes it."""
    placed = make_order(session, user, slugs, currency=currency)
    order = fulfilment.lock_order(session, placed.id)
    fulfilment.fulfil_order(
        session,
        order,
        settings={"cmsshop.base_url": "http://shop.test"},
        provider="cardprovider",
        payment_reference=f"pi_{order.number}",
    )
    order.billing = {"country": country}
    invoice = session.scalar(select(Invoice).where(Invoice.order_id == order.id))
    invoice.issued_at = when
    invoice.lines = [
        {**line, "taxRate": rate, "net": net, "tax": line["amount"] - net}
        for line, net in zip(invoice.lines, nets, strict=True)
    ]
    session.commit()
    return order, invoice


def refund(session, order, amount, *, when):
    """A refund the provider confirmed, and its credit note, issued ``when``."""
    row = Refund(
        order_id=order.id,
        amount=amount,
        currency=order.currency,
        reason="asked",
        status="succeeded",
        provider="cardprovider",
        idempotency_key=f"k-{order.number}-{amount}",
        created_at=utcnow(),
        confirmed_at=utcnow(),
    )
    session.add(row)
    session.flush()
    [note] = credit_notes.issue_for_refunds(session, order, [row])
    note.issued_at = when
    session.commit()
    return note


@pytest.fixture
def documents(dbsession, catalogue, customer, other_customer):
    # Q3: a German consumer at 19 % (49.00 -> net 41.18), two French lines at 20 %,
    # a US buyer in USD at 0 %; a refund of the French order in Q3; a refund of the
    # German order in Q4 (a correction of Q3).
    de, de_invoice = sold(
        dbsession, customer, ("site-guard",), country="DE", rate="19", nets=(4118,)
    )
    fr, _ = sold(
        dbsession,
        other_customer,
        ("site-guard", "themes"),
        country="FR",
        rate="20",
        nets=(4083, 1583),
        when=SEP,
    )
    us, _ = sold(
        dbsession, customer, ("themes",), country="US", rate="0", nets=(2100,), currency="USD"
    )
    q3_note = refund(dbsession, fr, 1900, when=SEP)
    q4_note = refund(dbsession, de, 4900, when=OCT)
    return {"de": de, "fr": fr, "us": us, "q3_note": q3_note, "q4_note": q4_note}


def rows_of(rows):
    return [(r.of_quarter, r.country, r.rate, r.currency, r.net, r.tax) for r in rows]


def test_a_quarter_nets_its_credit_notes_and_later_ones_are_corrections(dbsession, documents):
    q3 = tax_report(dbsession, "2026-Q3", {"USD": Decimal("0.9")})
    # FR: 49.00 + 19.00 invoiced, 19.00 refunded in Q3 spread 49:19 -> 13.69 + 5.31 gross.
    fr_note = documents["q3_note"]
    assert sum(line["amount"] for line in fr_note.lines) == -1900
    fr_net = 4083 + 1583 + fr_note.net_total
    fr_tax = (4900 - 4083) + (1900 - 1583) + fr_note.tax_total
    assert rows_of(q3.sales) == [
        ("2026-Q3", "DE", "19", "EUR", 4118, 782),
        ("2026-Q3", "FR", "20", "EUR", fr_net, fr_tax),
        ("2026-Q3", "US", "0", "USD", 2100, 0),
    ]
    assert q3.corrections == [] and q3.missing_rates == []
    us_row = q3.sales[2]
    assert (us_row.net_eur, us_row.tax_eur) == (1890, 0)  # 21.00 USD x 0.9
    assert [(r.invoices, r.credit_notes) for r in q3.sales] == [(1, 0), (1, 1), (1, 0)]

    # Q4: the German refund corrects Q3; Q3's report is unchanged by it.
    q4 = tax_report(dbsession, "2026-Q4", {})
    assert q4.sales == []
    assert rows_of(q4.corrections) == [("2026-Q3", "DE", "19", "EUR", -4118, -782)]
    assert rows_of(tax_report(dbsession, "2026-Q3", {"USD": Decimal("0.9")}).sales) == rows_of(
        q3.sales
    )


def test_totals_equal_the_sum_of_the_documents(dbsession, documents):
    q3 = tax_report(dbsession, "2026-Q3", {"USD": Decimal("1")})
    q4 = tax_report(dbsession, "2026-Q4", {"USD": Decimal("1")})
    reported = sum(r.net for r in q3.sales + q3.corrections + q4.sales + q4.corrections)
    reported_tax = sum(r.tax for r in q3.sales + q3.corrections + q4.sales + q4.corrections)
    invoices = list(dbsession.scalars(select(Invoice)))
    notes = list(dbsession.scalars(select(CreditNote)))
    assert reported == sum(x["net"] for i in invoices for x in i.lines) + sum(
        n.net_total for n in notes
    )
    assert reported_tax == sum(x["tax"] for i in invoices for x in i.lines) + sum(
        n.tax_total for n in notes
    )
    assert q3.total_eur(q3.sales) == (sum(r.net for r in q3.sales), sum(r.tax for r in q3.sales))


def test_a_currency_without_a_rate_is_named(dbsession, documents):
    q3 = tax_report(dbsession, "2026-Q3", {})
    assert q3.missing_rates == ["USD"]
    us_row = next(r for r in q3.sales if r.currency == "USD")
    assert us_row.net_eur is None and q3.total_eur(q3.sales) is None


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("2026-Q1", dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 4, 1, tzinfo=dt.UTC)),
        (
            "2026-Q4",
            dt.datetime(2026, 10, 1, tzinfo=dt.UTC),
            dt.datetime(2027, 1, 1, tzinfo=dt.UTC),
        ),
    ],
)
def test_quarters(text, start, end):
    assert parse_quarter(text) == (start, end)


@pytest.mark.parametrize("bad", ["2026-Q5", "2026Q1", "", "26-Q1", "2026-q1 ", "2026-Q1\n"])
def test_bad_quarters(bad):
    with pytest.raises(ValueError, match="2026-Q3"):
        parse_quarter(bad)


@pytest.mark.parametrize("bad", ["USD", "USD=", "USD=abc", "USD=-1", "USD=0", "US=1", "USD=NaN"])
def test_bad_rates(bad):
    with pytest.raises(ValueError):
        parse_eur_rate(bad)


# --- the console and the command line ------------------------------------------------------


def test_console_page_and_csv(app, dbsession, documents, admin, customer):
    console = logged_in(app, admin)
    page = console.get("/admin/tax/report", {"quarter": "2026-Q3", "rate.USD": "0.9"})
    sales = " ".join(
        page.html.find("section", attrs={"aria-labelledby": "sales"}).get_text(" ").split()
    )
    assert "DE 19 % EUR EUR41.18 EUR7.82 EUR41.18 EUR7.82 1 0" in sales
    assert "US 0 % USD USD21.00 USD0.00 EUR18.90 EUR0.00" in sales
    assert len(page.html.find_all("h1")) == 1

    got = console.get("/admin/tax/report.csv", {"quarter": "2026-Q4"})
    assert got.content_type == "text/csv" and "2026-Q4" in got.headers["Content-Disposition"]
    assert "no-store" in got.headers["Cache-Control"]
    rows = list(csv.reader(io.StringIO(got.text)))
    assert rows[0][:4] == ["section", "quarter", "country", "rate_percent"]
    assert rows[1] == [
        "correction", "2026-Q3", "DE", "19", "EUR", "-41.18", "-7.82", "-41.18", "-7.82", "0", "1"
    ]  # fmt: skip

    # Bad input: the field marked, nothing computed.
    bad = console.get("/admin/tax/report", {"quarter": "2026-Q9"}, status=422)
    assert bad.html.find(id="f-quarter")["aria-invalid"] == "true"
    bad = console.get("/admin/tax/report", {"quarter": "2026-Q3", "rate.USD": "x"}, status=422)
    assert bad.html.find(id="f-rate.USD")["aria-invalid"] == "true"
    console.get("/admin/tax/report.csv", {"quarter": "nope"}, status=422)
    # Customers never see it.
    logged_in(app, customer).get("/admin/tax/report", status=403)


def test_command_line(ini, dbsession, documents):
    refused = run_admin(ini, "tax-report", "2026-Q3")
    assert refused.returncode == 2 and "USD" in refused.stderr
    assert run_admin(ini, "tax-report", "2026-Q9").returncode == 2
    done = run_admin(ini, "tax-report", "2026-Q3", "--eur-rate", "USD=0.9")
    assert done.returncode == 0, done.stderr
    rows = list(csv.reader(io.StringIO(done.stdout)))
    assert [row[2] for row in rows[1:]] == ["DE", "FR", "US"]
    assert rows[3][7] == "18.90"
