"""cmsshop-admin subcommands of taxes.

``tax-report QUARTER [--eur-rate USD=0.9234 ...]`` prints the quarter's tax report as CSV
(services.tax.report): per country of consumption and rate, net and tax of the invoices
less the credit notes, in EUR; corrections of earlier quarters after the sales. A
currency without a rate is refused with its name (exit status 2), so a return is never
filed with an amount left unconverted.
"""

from __future__ import annotations

import sys

from sqlalchemy import select

from cmsshop.models import Currency
from cmsshop.services.tax import report as tax_report


def cmd_tax_report(env, args) -> int:
    try:
        tax_report.parse_quarter(args.quarter)
        rates = dict(tax_report.parse_eur_rate(text) for text in args.eur_rate)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    request = env["request"]
    with request.tm:
        report = tax_report.tax_report(request.db, args.quarter, rates)
        decimals = dict(request.db.execute(select(Currency.code, Currency.decimals)).all())
    if report.missing_rates:
        missing = ", ".join(report.missing_rates)
        print(
            f"documents in {missing} need an EUR rate: add --eur-rate CODE=EUR_PER_UNIT",
            file=sys.stderr,
        )
        return 2
    sys.stdout.write(tax_report.report_csv(report, decimals))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "tax-report", help="print a quarter's tax report (OSS figures) as CSV"
    )
    p.add_argument("quarter", help="e.g. 2026-Q3")
    p.add_argument(
        "--eur-rate",
        action="append",
        default=[],
        metavar="CODE=RATE",
        help="EUR for one unit of a currency, e.g. USD=0.9234 (repeat per currency)",
    )
    p.set_defaults(handler=cmd_tax_report)
