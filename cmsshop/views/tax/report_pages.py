"""The console's tax report (services.tax.report): a quarter and the EUR rates of the
other currencies in a GET form, the report as a page and as CSV (same query)."""

from __future__ import annotations

from decimal import Decimal

from pyramid.response import Response
from pyramid.view import view_config
from sqlalchemy import select

from cmsshop.models import Currency
from cmsshop.security import ADMIN
from cmsshop.services.tax import report as tax_report


def _currencies(request) -> list[Currency]:
    return list(request.db.scalars(select(Currency).order_by(Currency.code)))


def _read(request) -> tuple[str, dict[str, Decimal], dict[str, str], dict[str, str]]:
    """(quarter, EUR rates, the form as typed, errors by field)."""
    form = {"quarter": request.GET.get("quarter") or tax_report.current_quarter()}
    errors: dict[str, str] = {}
    try:
        tax_report.parse_quarter(form["quarter"])
    except tax_report.BadQuarter as exc:
        errors["quarter"] = str(exc)
    rates: dict[str, Decimal] = {}
    for currency in _currencies(request):
        name = f"rate.{currency.code}"
        typed = (request.GET.get(name) or "").strip()
        form[name] = typed
        if currency.code == "EUR" or not typed:
            continue
        try:
            rates[currency.code] = tax_report.parse_eur_rate(f"{currency.code}={typed}")[1]
        except ValueError:
            errors[name] = "a positive number: euros for one unit, e.g. 0.9234"
    return form["quarter"], rates, form, errors


@view_config(
    route_name="pages.admin_tax_report",
    request_method="GET",
    renderer="admin/tax/report.html",
    permission=ADMIN,
)
def report_page(request):
    quarter, rates, form, errors = _read(request)
    report = None if errors else tax_report.tax_report(request.db, quarter, rates)
    currencies = _currencies(request)
    if errors:
        request.response.status = 422
    return {
        "admin_section": "tax",
        "report": report,
        "form": form,
        "errors": errors,
        "currencies": {c.code: c for c in currencies},
        "foreign": [c for c in currencies if c.code != "EUR"],
        "csv_query": request.query_string,
    }


@view_config(route_name="pages.admin_tax_report_csv", request_method="GET", permission=ADMIN)
def report_csv(request):
    quarter, rates, _form, errors = _read(request)
    if errors:
        return Response(
            "\n".join(f"{name}: {message}" for name, message in errors.items()) + "\n",
            status=422,
            content_type="text/plain",
            charset="utf-8",
        )
    report = tax_report.tax_report(request.db, quarter, rates)
    decimals = {c.code: c.decimals for c in _currencies(request)}
    response = Response(
        tax_report.report_csv(report, decimals), content_type="text/csv", charset="utf-8"
    )
    response.headers["Content-Disposition"] = f'attachment; filename="tax-report-{quarter}.csv"'
    response.cache_control = "no-store"  # figures of the shop's sales
    return response
