"""The tax of an order as it is placed: the engine (services.tax.engine) applied to the
priced lines, with what it needs read from the database and the settings, and the
result written onto the order's lines and the order itself.

Decided once, when the order is placed, and kept (``Order.tax``, ``Order.tax_details``,
``OrderItem.net``/``tax``): the payment, the invoice and every credit note use what the
buyer saw at checkout, even when a rate changes before the payment arrives.

The micro-seller threshold (an EU seller's EUR 10,000 of cross-border consumer sales)
counts the nets of paid cross-border consumer sales, in euro cents
(``Order.cross_border_eur``), this calendar year and last. A sale in another currency is
converted with ``cmsshop.tax.eur_rates`` (``USD=0.92 GBP=1.17``: EUR per unit); a sale
in a currency with no rate there cannot be counted, so it is taxed where the buyer is --
the rule that is right whatever the total -- and is not counted either.

Where the buyer is: the billing country decides; a second piece of evidence is the
network address's country, taken from the request header a trusted reverse proxy sets
(``cmsshop.tax.country_header``, e.g. ``CF-IPCountry`` or nginx's GeoIP2 variable sent
as ``X-Country-Code``; unset: not used), and, once paid, the country the buyer gave the
payment provider (``record_payment_country``). A disagreement flags the order for review
(``taxReview`` on the order); the tax charged stays what the buyer agreed to pay.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from sqlalchemy import String, cast, select
from sqlalchemy.orm import Session

from cmsshop.models import Currency, Order
from cmsshop.services.payments import lines
from cmsshop.services.tax import engine
from cmsshop.services.tax.billing import BillingDetails
from cmsshop.services.tax.report import parse_eur_rate
from cmsshop.services.tax.rounding import round_half_up
from cmsshop.services.tax.seller import ShopProfile, shop_profile

log = logging.getLogger(__name__)

EUR_RATES = "cmsshop.tax.eur_rates"
COUNTRY_HEADER = "cmsshop.tax.country_header"
# Statuses of a sale made: paid, and paid then disputed (a refund reduces nothing here: the
# threshold counts supplies made).
SALE_MADE = ("paid", "disputed", "refunded")
_COUNTRY = re.compile(r"[A-Z]{2}")
# Codes proxies send for "unknown" (Cloudflare's XX, Tor's T1) and private ranges.
_NOT_A_COUNTRY = frozenset({"XX", "T1", "A1", "A2", "O1", "EU", "AP", "ZZ"})


class TaxRefused(ValueError):
    """No rate is known for what the rules ask (the checkout says so, places nothing)."""


def parse_eur_rates(value: Any) -> dict[str, Decimal]:
    """``cmsshop.tax.eur_rates``: ``USD=0.92 GBP=1.17`` (spaces, commas or lines)."""
    if isinstance(value, dict):
        return value
    rates = {}
    for part in str(value or "").replace(",", " ").split():
        code, rate = parse_eur_rate(part)
        rates[code] = rate
    return rates


def settings_spec() -> dict:
    """The ini/environment settings this module declares (cmsshop.settings.declare)."""
    return {
        EUR_RATES: (parse_eur_rates, {}, "CMSSHOP_TAX_EUR_RATES"),
        COUNTRY_HEADER: (lambda v: str(v or "").strip(), "", "CMSSHOP_TAX_COUNTRY_HEADER"),
    }


def network_country(settings: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    """The network address's country, from the header a trusted proxy sets (None when no
    header is configured, absent, or says "unknown")."""
    name = settings.get(COUNTRY_HEADER)
    if not name:
        return None
    value = str(headers.get(name) or "").strip().upper()
    if not _COUNTRY.fullmatch(value) or value in _NOT_A_COUNTRY:
        return None
    return value


def to_eur_cents(amount: int, decimals: int, rate: Decimal) -> int:
    """``amount`` minor units at ``rate`` EUR per unit, in euro cents, half up."""
    return round_half_up(Decimal(amount) / (Decimal(10) ** decimals) * rate * 100)


def _eur_rate(settings: Mapping[str, Any], currency: str) -> Decimal | None:
    if currency == "EUR":
        return Decimal(1)
    return parse_eur_rates(settings.get(EUR_RATES)).get(currency)


def cross_border_totals(session: Session, year: int) -> tuple[int, int]:
    """(this year's, last year's) cross-border consumer sales, euro cents."""
    totals = dict.fromkeys((year, year - 1), 0)
    start = dt.datetime(year - 1, 1, 1, tzinfo=dt.UTC)
    end = dt.datetime(year + 1, 1, 1, tzinfo=dt.UTC)
    rows = session.execute(
        select(Order.paid_at, Order.cross_border_eur).where(
            Order.cross_border_eur.is_not(None),
            Order.status.in_(SALE_MADE),
            Order.paid_at >= start,
            Order.paid_at < end,
        )
    )
    for paid_at, eur in rows:
        totals[paid_at.year] = totals.get(paid_at.year, 0) + eur
    return totals[year], totals[year - 1]


@dataclasses.dataclass(frozen=True)
class OrderTax:
    """What the order and its lines keep; ``lines`` in the order of the priced lines."""

    lines: tuple[engine.QuotedLine, ...]
    tax: int
    gross: int
    details: dict[str, Any]
    cross_border_eur: int | None


def details_of(quote: engine.TaxQuote, prices_include_tax: bool, evidence_country) -> dict:
    """``Order.tax_details``: the rules applied, for the invoice, the console and review."""
    return {
        "regime": quote.regime,
        "country": quote.country,
        "region": quote.region,
        "rate": str(quote.rate),
        "rateValidFrom": quote.rate_valid_from.isoformat() if quote.rate_valid_from else None,
        "pricesIncludeTax": prices_include_tax,
        "notes": list(quote.notes),
        "evidence": quote.evidence,
        "evidenceCountry": evidence_country,
        "flags": sorted(quote.flags),
        "crossBorder": quote.cross_border_consumer_sale,
    }


def quote_order(
    session: Session,
    settings: Mapping[str, Any],
    profile: ShopProfile,
    lines: Sequence[dict],
    currency: str,
    billing: BillingDetails | None,
    *,
    evidence_country: str | None = None,
    day: dt.date | None = None,
) -> OrderTax:
    """The tax of priced ``lines`` (services.checkout.pricing: ``amount`` after the
    discount) sold by the seller of ``profile`` (seller.shop_profile, read once by the
    caller) to a buyer with ``billing`` (None: an order the shop makes itself, no tax).
    TaxRefused when the rules need a rate that is not known for ``day``."""
    day = day or dt.datetime.now(dt.UTC).date()
    seller_tax = profile.seller_tax(settings)
    if billing is None:
        seller_tax = dataclasses.replace(seller_tax, enabled=False)
        buyer = engine.BuyerTax(country="")
    else:
        buyer = engine.BuyerTax(
            country=billing.country,
            region=billing.region,
            vat_id=billing.vat_id,
            vat_id_check=billing.vat_id_check,
            evidence_country=evidence_country,
        )
    taxable = [engine.TaxableLine(str(i), line["amount"]) for i, line in enumerate(lines)]
    in_eu_consumer_reach = (
        seller_tax.enabled
        and seller_tax.country in engine.EU_COUNTRIES
        and buyer.country in engine.EU_COUNTRIES
        and buyer.country != seller_tax.country
    )
    eur_rate = _eur_rate(settings, currency) if in_eu_consumer_reach else None
    decimals = None
    if eur_rate is not None:
        decimals = session.scalar(select(Currency.decimals).where(Currency.code == currency))
    sales = engine.CrossBorderSales()
    if in_eu_consumer_reach and seller_tax.micro_seller:
        if eur_rate is None:
            log.warning("no EUR rate for %s: the sale is taxed where the buyer is", currency)
            sales = engine.CrossBorderSales(this_sale=engine.MICRO_SELLER_THRESHOLD_EUR_CENTS + 1)
        else:
            this_year, last_year = cross_border_totals(session, day.year)
            # This sale against the threshold: its amount before tax is known, so the
            # gross of tax-inclusive prices (an over-count, on the safe side); what is
            # kept and counted afterwards is the quote's net.
            amount = sum(line.amount for line in taxable)
            this_sale = to_eur_cents(amount, decimals or 2, eur_rate)
            sales = engine.CrossBorderSales(this_year, last_year, this_sale)
    try:
        quote = engine.quote_tax(seller_tax, buyer, taxable, day, sales)
    except engine.TaxUnavailable as exc:
        raise TaxRefused(str(exc)) from None
    # Every cross-border consumer sale is counted, whether or not the seller uses the
    # threshold now: a seller who turns it on later starts from the true total.
    cross_border_eur = None
    if quote.cross_border_consumer_sale and eur_rate is not None:
        cross_border_eur = to_eur_cents(quote.net, decimals or 2, eur_rate)
    return OrderTax(
        lines=quote.lines,
        tax=quote.tax,
        gross=quote.gross,
        details=details_of(quote, seller_tax.prices_include_tax, evidence_country),
        cross_border_eur=cross_border_eur,
    )


def apply_to_order(order: Order, quoted: OrderTax) -> None:
    """Write the quote onto a new order and its items (in the order of the lines)."""
    for item, line in zip(order.items, quoted.lines, strict=True):
        item.net, item.tax = line.net, line.tax
    order.total = quoted.gross
    order.tax = quoted.tax
    order.tax_details = quoted.details
    order.cross_border_eur = quoted.cross_border_eur


def record_payment_country(order: Order, country: str | None) -> None:
    """The country the buyer gave the payment provider, a second piece of evidence: a
    disagreement with the billing country flags the order for review (the tax charged
    is not changed: the buyer paid what was shown). Nothing for a shop charging no tax."""
    details = order.tax_details
    country = (country or "").strip().upper()
    if not isinstance(details, dict) or not _COUNTRY.fullmatch(country):
        return
    if details.get("regime") == "none":  # no tax charged: nothing to check
        return
    billing = (order.billing or {}).get("country")
    flags = set(details.get("flags") or ())
    if billing and country != billing:
        flags |= {engine.EVIDENCE_MISMATCH, engine.NEEDS_REVIEW}
        evidence = engine.EVIDENCE_DISAGREES
    else:
        evidence = (
            details.get("evidence")
            if details.get("evidence") == engine.EVIDENCE_DISAGREES
            else engine.EVIDENCE_AGREES
        )
    order.tax_details = {
        **details,
        "paymentCountry": country,
        "evidence": evidence,
        "flags": sorted(flags),
    }


def needs_review(order: Order) -> bool:
    details = order.tax_details
    return isinstance(details, dict) and engine.NEEDS_REVIEW in (details.get("flags") or ())


def micro_seller_status(session: Session, settings: Mapping[str, Any], year: int) -> dict:
    """The running total the console shows an EU seller using the threshold."""
    this_year, last_year = cross_border_totals(session, year)
    return {
        "thisYear": this_year,
        "lastYear": last_year,
        "threshold": engine.MICRO_SELLER_THRESHOLD_EUR_CENTS,
        "crossed": engine.threshold_crossed(this_year, last_year),
        "eurRates": {k: str(v) for k, v in parse_eur_rates(settings.get(EUR_RATES)).items()},
    }


def invoice_tax(order: Order) -> dict[str, Any] | None:
    """``Invoice.tax``: the tax the invoice states, from what the order kept: the rules
    applied (regime, country, the legal notes) and the totals per rate. None for an order
    placed before taxes (its invoice states none)."""
    details = order.tax_details
    if not isinstance(details, dict):
        return None
    net = sum(lines.net_of(item) for item in order.items)
    tax = sum(lines.tax_of(item) for item in order.items)
    return {
        "regime": details.get("regime"),
        "country": details.get("country"),
        "name": tax_name(details),
        "pricesIncludeTax": bool(details.get("pricesIncludeTax")),
        "notes": list(details.get("notes") or ()),
        "totals": [
            {"rate": details.get("rate") or "0", "net": net, "tax": tax, "gross": net + tax}
        ],
    }


def tax_label(details: Mapping[str, Any] | None) -> str:
    """How a line of tax is named to the buyer: "VAT 19 %" in the EU, "Tax 10 %" else."""
    if not isinstance(details, Mapping):
        return "Tax"
    return f"{tax_name(details)} {details.get('rate') or '0'} %"


def tax_name(details: Mapping[str, Any]) -> str:
    """ "VAT" for a sale taxed in the EU (or a reverse charge), "Tax" elsewhere."""
    in_eu = details.get("country") in engine.EU_COUNTRIES
    return "VAT" if in_eu or details.get("regime") == "reverse_charge" else "Tax"


def orders_to_review(session: Session, limit: int = 50) -> list[Order]:
    """Sales whose tax the seller should check (``needs_review`` among the flags: the
    evidence of the buyer's country disagrees, or VIES could not confirm a VAT ID),
    newest first. A console list, so the JSON is matched as text (the same on SQLite
    and PostgreSQL) and the flag confirmed in Python."""
    rows = session.scalars(
        select(Order)
        .where(
            Order.status.in_(SALE_MADE),
            cast(Order.tax_details, String).like(f"%{engine.NEEDS_REVIEW}%"),
        )
        .order_by(Order.created_at.desc())
        .limit(limit)
    )
    return [order for order in rows if needs_review(order)]


def price_note(session: Session, settings: Mapping[str, Any]) -> str | None:
    """What the cart says of tax before the buyer pays (None when no tax is charged): the
    amount depends on the billing country, decided at checkout."""
    profile = shop_profile(session, settings)
    if not profile.tax_enabled:
        return None
    if profile.prices_include_tax:
        return "Prices include VAT or sales tax where it applies to your billing country."
    return (
        "Prices exclude tax: VAT or sales tax for your billing country is added when you pay, "
        "and shown on the payment page and your invoice."
    )
