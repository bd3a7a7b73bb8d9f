"""The tax report of a quarter: per country of consumption and tax rate, the net and tax
totals of the quarter's invoices less its credit notes, in EUR -- what an EU one-stop-shop
(OSS) quarterly return asks for, and what a seller's accountant reconciles.

Which quarter a document belongs to: its issue date (UTC). A credit note issued in a
later quarter for an invoice of an earlier one is never subtracted from that earlier
quarter (its return may be filed): it is listed in the later quarter's report as a
correction of the earlier quarter, which is how an OSS return corrects a past period.

Country of consumption: the billing country the order recorded (``Order.billing``),
which decided the tax; an order placed before billing details were asked for shows as
``unknown``. Rate: the rate each invoice line carries (``taxRate``, percent); a line
without one (issued before taxes were charged) is 0 % with its whole amount as net.

EUR: a document in another currency is converted with the rate given for the report
(EUR per one unit of that currency; OSS returns use the ECB rate of the period's last
day), per (country, rate, currency) group, rounded half up to the cent. A currency
without a rate is named in ``missing_rates`` and its rows carry no EUR amounts.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import io
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from decimal import ROUND_HALF_UP, Decimal

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import CreditNote, Currency, Invoice, Order

QUARTER = re.compile(r"(\d{4})-Q([1-4])")
UNKNOWN_COUNTRY = "unknown"


class BadQuarter(ValueError):
    pass


def parse_quarter(text: str) -> tuple[dt.datetime, dt.datetime]:
    """``"2026-Q3"`` -> [2026-07-01, 2026-10-01) in UTC; BadQuarter otherwise."""
    match = QUARTER.fullmatch(text or "")
    if match is None:
        raise BadQuarter("a quarter is written like 2026-Q3")
    year, number = int(match[1]), int(match[2])
    start = dt.datetime(year, 3 * number - 2, 1, tzinfo=dt.UTC)
    end = dt.datetime(year + (number == 4), (3 * number) % 12 + 1, 1, tzinfo=dt.UTC)
    return start, end


def quarter_of(when: dt.datetime) -> str:
    when = when.astimezone(dt.UTC)
    return f"{when.year}-Q{(when.month - 1) // 3 + 1}"


def current_quarter(today: dt.date | None = None) -> str:
    today = today or dt.datetime.now(dt.UTC).date()
    return f"{today.year}-Q{(today.month - 1) // 3 + 1}"


def parse_eur_rate(text: str) -> tuple[str, Decimal]:
    """``"USD=0.9234"`` -> ("USD", Decimal("0.9234")); ValueError says why not."""
    code, _, value = (text or "").partition("=")
    code = code.strip().upper()
    if not re.fullmatch(r"[A-Z]{3}", code):
        raise ValueError(f"{text!r}: write a currency code, '=', and EUR per unit (USD=0.92)")
    try:
        rate = Decimal(value.strip())
    except ArithmeticError:
        raise ValueError(f"{text!r}: the rate is not a number") from None
    if not rate.is_finite() or rate <= 0 or rate > 100000:
        raise ValueError(f"{text!r}: the rate must be a positive number")
    return code, rate


@dataclasses.dataclass(frozen=True)
class ReportRow:
    """Net and tax of one (country, rate) in one currency, and in EUR when a rate is
    known. ``of_quarter``: the quarter the corrected sales belong to (a correction row);
    the report's own quarter for a sales row."""

    of_quarter: str
    country: str
    rate: str  # percent, as the documents state it ("19", "25.5")
    currency: str
    net: int  # minor units of ``currency``
    tax: int
    net_eur: int | None  # euro cents
    tax_eur: int | None
    invoices: int
    credit_notes: int


@dataclasses.dataclass(frozen=True)
class TaxReport:
    quarter: str
    sales: list[ReportRow]  # this quarter's invoices less their credit notes of this quarter
    corrections: list[ReportRow]  # this quarter's credit notes on earlier quarters' invoices
    eur_rates: dict[str, Decimal]
    missing_rates: list[str]

    def total_eur(self, rows: Iterable[ReportRow]) -> tuple[int, int] | None:
        rows = list(rows)
        if any(row.net_eur is None for row in rows):
            return None
        return sum(row.net_eur for row in rows), sum(row.tax_eur for row in rows)


def _rate_text(line: dict) -> str:
    rate = line.get("taxRate")
    return "0" if rate in (None, "") else str(rate)


def _split(line: dict) -> tuple[int, int]:
    """(net, tax) of an invoice or credit note line; a line without them is all net."""
    if "net" in line and "tax" in line:
        return int(line["net"]), int(line["tax"])
    return int(line.get("amount", 0)), 0


def _country(order: Order) -> str:
    billing = order.billing or {}
    country = billing.get("country") if isinstance(billing, dict) else None
    return country or UNKNOWN_COUNTRY


def _eur(amount: int, decimals: int, rate: Decimal) -> int:
    major = Decimal(amount) / (Decimal(10) ** decimals)
    return int((major * rate * 100).quantize(Decimal(1), rounding=ROUND_HALF_UP))


@dataclasses.dataclass
class _Sum:
    net: int = 0
    tax: int = 0
    invoices: set = dataclasses.field(default_factory=set)
    credit_notes: set = dataclasses.field(default_factory=set)


def tax_report(session: Session, quarter: str, eur_rates: Mapping[str, Decimal]) -> TaxReport:
    """The report of ``quarter`` (``"2026-Q3"``), with ``eur_rates`` {currency: EUR per
    unit} for documents not in EUR."""
    start, end = parse_quarter(quarter)
    rates = {"EUR": Decimal(1), **{k.upper(): v for k, v in eur_rates.items()}}
    sums: dict[tuple[str, str, str, str], _Sum] = defaultdict(_Sum)

    invoices = session.execute(
        select(Invoice, Order)
        .join(Order, Order.id == Invoice.order_id)
        .where(Invoice.issued_at >= start, Invoice.issued_at < end)
    )
    for invoice, order in invoices:
        country = _country(order)
        for line in invoice.lines or []:
            if not isinstance(line, dict):
                continue
            net, tax = _split(line)
            group = sums[(quarter, country, _rate_text(line), invoice.currency)]
            group.net += net
            group.tax += tax
            group.invoices.add(invoice.id)

    notes = session.execute(
        select(CreditNote, Invoice, Order)
        .join(Invoice, Invoice.id == CreditNote.invoice_id)
        .join(Order, Order.id == CreditNote.order_id)
        .where(CreditNote.issued_at >= start, CreditNote.issued_at < end)
    )
    for note, invoice, order in notes:
        of_quarter = quarter_of(invoice.issued_at)
        country = _country(order)
        for line in note.lines:
            net, tax = _split(line)
            group = sums[(of_quarter, country, _rate_text(line), note.currency)]
            group.net += net
            group.tax += tax
            group.credit_notes.add(note.id)

    decimals = dict(session.execute(select(Currency.code, Currency.decimals)).all())
    missing = sorted({key[3] for key in sums if key[3] not in rates})
    rows = []
    for (of_quarter, country, rate, currency), group in sorted(
        sums.items(), key=lambda item: (item[0][0], item[0][1], Decimal(item[0][2]), item[0][3])
    ):
        eur = rates.get(currency)
        places = decimals.get(currency, 2)
        rows.append(
            ReportRow(
                of_quarter=of_quarter,
                country=country,
                rate=rate,
                currency=currency,
                net=group.net,
                tax=group.tax,
                net_eur=None if eur is None else _eur(group.net, places, eur),
                tax_eur=None if eur is None else _eur(group.tax, places, eur),
                invoices=len(group.invoices),
                credit_notes=len(group.credit_notes),
            )
        )
    return TaxReport(
        quarter=quarter,
        sales=[row for row in rows if row.of_quarter == quarter],
        corrections=[row for row in rows if row.of_quarter != quarter],
        eur_rates={k: v for k, v in rates.items() if k != "EUR"},
        missing_rates=missing,
    )


CSV_COLUMNS = (
    "section",
    "quarter",
    "country",
    "rate_percent",
    "currency",
    "net",
    "tax",
    "net_eur",
    "tax_eur",
    "invoices",
    "credit_notes",
)


def _major(amount: int | None, decimals: int) -> str:
    if amount is None:
        return ""
    sign = "-" if amount < 0 else ""
    whole, fraction = divmod(abs(amount), 10**decimals)
    return f"{sign}{whole}.{fraction:0{decimals}d}" if decimals else f"{sign}{whole}"


def report_csv(report: TaxReport, decimals: Mapping[str, int]) -> str:
    """The report as CSV, amounts in major units with a point ("-12.50"), one row per
    line of the report: ``sales`` rows, then ``correction`` rows naming their quarter."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for section, rows in (("sales", report.sales), ("correction", report.corrections)):
        for row in rows:
            places = decimals.get(row.currency, 2)
            writer.writerow(
                (
                    section,
                    row.of_quarter,
                    row.country,
                    row.rate,
                    row.currency,
                    _major(row.net, places),
                    _major(row.tax, places),
                    _major(row.net_eur, 2),
                    _major(row.tax_eur, 2),
                    row.invoices,
                    row.credit_notes,
                )
            )
    return out.getvalue()
