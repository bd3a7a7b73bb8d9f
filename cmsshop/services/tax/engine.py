"""The tax of an order: which rules apply, at which rate, and the amounts of every line.

Pure: the caller passes who sells, who buys, the lines and the day; nothing here reads
the database or the settings, so every rule is tested with exact amounts (tests/tax).

Who pays which tax (digital services, the EU one-stop-shop rules; docs/tax.md):

- Tax not enabled by the seller: none ("none"), as before taxes existed.
- A seller established in the EU:
  - a buyer in the seller's own country pays the seller's rate, business or not
    ("domestic");
  - a business buyer in another member state with a valid VAT ID pays no VAT: reverse
    charge, 0 %, with the legal note ("reverse_charge");
  - a consumer in another member state pays the rate of the buyer's country ("oss"),
    unless the seller uses the EUR 10,000 micro-seller threshold and stays under it: the
    seller's own rate then ("micro_seller"). The threshold counts cross-border consumer
    sales in the EU, net, in EUR, this calendar year and last: once last year's total or
    this year's total with this sale exceeds EUR 10,000, this sale and every later one
    is taxed where the buyer is;
  - a buyer outside the EU pays no EU VAT, the invoice says why ("outside_scope"),
    unless the seller is registered in the buyer's country or region ("local").
- A seller outside the EU: tax only where it is registered (``registrations``: a country,
  a region like US-WA, or EU for the non-Union one-stop-shop, which charges the rate of
  the buyer's member state); elsewhere none ("not_registered").

Evidence of where the buyer is: the billing country decides; a second piece (the card's
country, the network address's country) that disagrees flags the order for review
(``evidence_mismatch``); with no second piece the quote records ``evidence="single"``.
A VAT ID the online check (VIES) could not confirm because VIES was unreachable is
treated like one that passed the format and checksum check -- the same as when no online
check is configured -- and flags the order (``vies_unavailable``). Either flag comes with
``needs_review``. A VAT ID VIES rejected ("vies_invalid") leaves the buyer a consumer.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Sequence
from decimal import Decimal

from cmsshop.services.tax import rounding
from cmsshop.services.tax.rates import EU_COUNTRIES, RateRow, rate_on

MICRO_SELLER_THRESHOLD_EUR_CENTS = 1_000_000  # EUR 10,000
EU_REGISTRATION = "EU"  # a non-EU seller registered for the non-Union one-stop-shop

REVERSE_CHARGE_NOTE = (
    "Reverse charge: VAT to be accounted for by the recipient "
    "(Article 196, Council Directive 2006/112/EC)"
)
OUTSIDE_SCOPE_NOTE = (
    "Outside the scope of EU VAT: supply of electronically supplied services "
    "to a customer outside the EU"
)
NOT_REGISTERED_NOTE = "No tax charged: the seller is not registered for tax in the buyer's country."

# Flags on a quote; the order keeps them. Every reason for review also sets NEEDS_REVIEW,
# so the console needs one filter for "orders to look at".
EVIDENCE_MISMATCH = "evidence_mismatch"
VIES_UNAVAILABLE = "vies_unavailable"
NEEDS_REVIEW = "needs_review"
# What the evidence of the buyer's country was (TaxQuote.evidence).
EVIDENCE_AGREES = "agree"  # billing country and a second piece name the same country
EVIDENCE_DISAGREES = "mismatch"  # they differ: the billing country is used, flagged
EVIDENCE_SINGLE = "single"  # no second piece known: the billing country alone


class TaxUnavailable(LookupError):
    """No rate is known for what the rules ask (a day before that country's first row)."""


@dataclasses.dataclass(frozen=True)
class SellerTax:
    country: str | None  # ISO alpha-2 of the seller's establishment
    enabled: bool = False
    prices_include_tax: bool = False
    micro_seller: bool = False  # uses the EUR 10,000 threshold (EU sellers only)
    registrations: frozenset[str] = frozenset()  # "GB", "US-WA", "EU", ...
    extra_rates: tuple[RateRow, ...] = ()


@dataclasses.dataclass(frozen=True)
class BuyerTax:
    country: str  # the billing country, ISO alpha-2
    region: str | None = None  # ISO 3166-2, where a seller taxes by region
    # The normalised VAT ID that passed the format and checksum check, None for a
    # consumer (the caller leaves out an ID that failed it).
    vat_id: str | None = None
    vat_id_check: str = "none"  # Order.billing's vat_id_check
    evidence_country: str | None = None  # the card's or the network address's country

    @property
    def is_business(self) -> bool:
        """A VAT ID VIES rejected leaves the buyer a consumer, taxed; VIES confirmed or
        unreachable, or no online check configured: a business."""
        return self.vat_id is not None and self.vat_id_check != "vies_invalid"


@dataclasses.dataclass(frozen=True)
class CrossBorderSales:
    """Cross-border consumer sales in the EU so far, net, in euro cents; and this sale's
    net in euro cents (the caller converts)."""

    this_year: int = 0
    last_year: int = 0
    this_sale: int = 0


@dataclasses.dataclass(frozen=True)
class TaxableLine:
    key: str  # the caller's name for the line (a product slug, an item id)
    amount: int  # after discounts, minor units: gross if prices include tax, else net


@dataclasses.dataclass(frozen=True)
class QuotedLine:
    key: str
    net: int
    rate: Decimal  # percent
    tax: int
    gross: int


@dataclasses.dataclass(frozen=True)
class RateTotal:
    rate: Decimal
    net: int
    tax: int
    gross: int


@dataclasses.dataclass(frozen=True)
class TaxQuote:
    regime: str
    country: str  # where the sale is taxed (the buyer's, or the seller's for domestic)
    region: str | None
    rate: Decimal  # percent (0 for none, reverse charge, outside scope)
    rate_valid_from: dt.date | None  # the rates row applied, for the record
    lines: tuple[QuotedLine, ...]
    totals: tuple[RateTotal, ...]
    net: int
    tax: int
    gross: int
    notes: tuple[str, ...] = ()
    flags: frozenset[str] = frozenset()
    cross_border_consumer_sale: bool = False  # counts towards the micro-seller threshold
    evidence: str = EVIDENCE_SINGLE  # EVIDENCE_AGREES, EVIDENCE_DISAGREES or EVIDENCE_SINGLE


def threshold_crossed(this_year: int, last_year: int) -> bool:
    """Whether cross-border consumer sales (euro cents) are over the micro-seller
    threshold: last year's total, or this year's, above EUR 10,000 (exactly is not)."""
    limit = MICRO_SELLER_THRESHOLD_EUR_CENTS
    return last_year > limit or this_year > limit


def _rate(country: str, region: str | None, day: dt.date, extra) -> RateRow | None:
    try:
        return rate_on(country, region, day, extra)
    except LookupError as exc:
        raise TaxUnavailable(str(exc)) from None


def _registered(seller: SellerTax, buyer: BuyerTax) -> bool:
    return buyer.country in seller.registrations or (
        buyer.region is not None and buyer.region in seller.registrations
    )


def _decide(
    seller: SellerTax, buyer: BuyerTax, day: dt.date, sales: CrossBorderSales
) -> tuple[str, RateRow | None, tuple[str, ...], bool]:
    """(regime, rates row or None for 0 %, notes, whether a cross-border consumer sale)."""
    extra = seller.extra_rates
    in_eu = buyer.country in EU_COUNTRIES
    business = buyer.is_business
    if not seller.enabled:
        return "none", None, (), False
    if seller.country in EU_COUNTRIES:
        if buyer.country == seller.country:
            return "domestic", _rate(seller.country, None, day, extra), (), False
        if in_eu and business:
            return "reverse_charge", None, (REVERSE_CHARGE_NOTE,), False
        if in_eu:
            over = threshold_crossed(sales.this_year + sales.this_sale, sales.last_year)
            if seller.micro_seller and not over:
                return "micro_seller", _rate(seller.country, None, day, extra), (), True
            return "oss", _rate(buyer.country, None, day, extra), (), True
        if _registered(seller, buyer):
            row = _rate(buyer.country, buyer.region, day, extra)
            return "local", row, (), False
        return "outside_scope", None, (OUTSIDE_SCOPE_NOTE,), False
    # A seller established outside the EU.
    if in_eu and EU_REGISTRATION in seller.registrations:
        if business:
            return "reverse_charge", None, (REVERSE_CHARGE_NOTE,), False
        return "oss", _rate(buyer.country, None, day, extra), (), False
    if _registered(seller, buyer):
        return "local", _rate(buyer.country, buyer.region, day, extra), (), False
    return "not_registered", None, (NOT_REGISTERED_NOTE,), False


def _lines(
    lines: Sequence[TaxableLine], percent: Decimal, inclusive: bool
) -> tuple[list[QuotedLine], RateTotal]:
    amounts = [line.amount for line in lines]
    whole = sum(amounts)
    if inclusive:
        net, tax = rounding.net_of_gross(whole, percent)
        gross = whole
        nets = rounding.share(net, amounts)
    else:
        net, tax = whole, rounding.tax_of_nets(amounts, percent)
        gross = net + tax
        nets = amounts
    taxes = rounding.share(tax, nets)
    quoted = [
        QuotedLine(line.key, n, percent, t, n + t)
        for line, n, t in zip(lines, nets, taxes, strict=True)
    ]
    return quoted, RateTotal(percent, net, tax, gross)


def quote_tax(
    seller: SellerTax,
    buyer: BuyerTax,
    lines: Iterable[TaxableLine],
    day: dt.date,
    sales: CrossBorderSales | None = None,
) -> TaxQuote:
    """The tax of these lines sold by ``seller`` to ``buyer`` on ``day``."""
    lines = list(lines)
    regime, row, notes, cross_border = _decide(seller, buyer, day, sales or CrossBorderSales())
    percent = row.rate if row is not None else Decimal(0)
    # Without a tax (0 %) an inclusive and an exclusive price are the same amount.
    quoted, total = _lines(lines, percent, seller.prices_include_tax and row is not None)
    flags = set()
    if not buyer.evidence_country:
        evidence = EVIDENCE_SINGLE
    elif buyer.evidence_country.upper() == buyer.country.upper():
        evidence = EVIDENCE_AGREES
    else:
        evidence = EVIDENCE_DISAGREES
        flags |= {EVIDENCE_MISMATCH, NEEDS_REVIEW}
    if buyer.vat_id is not None and buyer.vat_id_check == "vies_unavailable":
        flags |= {VIES_UNAVAILABLE, NEEDS_REVIEW}
    taxed_where = row.country if row is not None else buyer.country
    return TaxQuote(
        regime=regime,
        country=taxed_where,
        region=row.region if row is not None else None,
        rate=percent,
        rate_valid_from=row.valid_from if row is not None else None,
        lines=tuple(quoted),
        totals=(total,) if lines else (),
        net=total.net,
        tax=total.tax,
        gross=total.gross,
        notes=notes,
        flags=frozenset(flags),
        cross_border_consumer_sale=cross_border,
        evidence=evidence,
    )
