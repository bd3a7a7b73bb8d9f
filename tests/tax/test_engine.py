"""The tax engine's rules, each with exact amounts: who pays which rate, notes, flags,
inclusive and exclusive prices, the micro-seller threshold, two currencies."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cmsshop.services.tax.engine import (
    NOT_REGISTERED_NOTE,
    OUTSIDE_SCOPE_NOTE,
    REVERSE_CHARGE_NOTE,
    BuyerTax,
    CrossBorderSales,
    SellerTax,
    TaxableLine,
    TaxUnavailable,
    quote_tax,
)
from cmsshop.services.tax.rates import parse_extra_rates
from cmsshop.services.tax.rounding import round_half_up

TODAY = dt.date(2026, 11, 26)
DE_SELLER = SellerTax(country="DE", enabled=True)
FR_SELLER = SellerTax(country="FR", enabled=True)
ORDER = (TaxableLine("site-guard", 4900), TaxableLine("themes", 1900))  # 49.00 + 19.00
WA_SELLER = SellerTax(
    "US",
    True,
    registrations=frozenset({"US-WA"}),
    extra_rates=parse_extra_rates("US-WA 6.5 2024-01-01"),
)


def quote(seller=DE_SELLER, buyer=None, lines=ORDER, day=TODAY, sales=None):
    return quote_tax(seller, buyer, lines, day, sales)


# (case, seller, buyer, lines, day, regime, rate %, net, tax, gross)
CASES = [
    ("German consumer, German seller", DE_SELLER, BuyerTax("DE"), ORDER, TODAY,
     "domestic", "19", 6800, 1292, 8092),
    ("French consumer: the buyer's rate", DE_SELLER, BuyerTax("FR"), ORDER, TODAY,
     "oss", "20", 6800, 1360, 8160),
    ("Finnish consumer today", DE_SELLER, BuyerTax("FI"), ORDER, TODAY,
     "oss", "25.5", 6800, 1734, 8534),
    ("Finnish consumer before the rise", DE_SELLER, BuyerTax("FI"), ORDER, dt.date(2024, 8, 31),
     "oss", "24", 6800, 1632, 8432),
    ("Romanian consumer", DE_SELLER, BuyerTax("RO"), ORDER, TODAY, "oss", "21", 6800, 1428, 8228),
    ("Estonian consumer", DE_SELLER, BuyerTax("EE"), ORDER, TODAY, "oss", "24", 6800, 1632, 8432),
    ("Slovak consumer", DE_SELLER, BuyerTax("SK"), ORDER, TODAY, "oss", "23", 6800, 1564, 8364),
    ("German business, French seller: reverse charge", FR_SELLER,
     BuyerTax("DE", vat_id="DE136695976", vat_id_check="format_valid"), ORDER, TODAY,
     "reverse_charge", "0", 6800, 0, 6800),
    ("German business, German seller: taxed", DE_SELLER,
     BuyerTax("DE", vat_id="DE136695976", vat_id_check="vies_valid"), ORDER, TODAY,
     "domestic", "19", 6800, 1292, 8092),
    ("US buyer, no registration there", DE_SELLER, BuyerTax("US", "US-WA"), ORDER, TODAY,
     "outside_scope", "0", 6800, 0, 6800),
    ("UK buyer, seller registered in GB", SellerTax("DE", True, registrations=frozenset({"GB"})),
     BuyerTax("GB"), ORDER, TODAY, "local", "20", 6800, 1360, 8160),
    ("3 x 0.99 at 19 %: rounded once", DE_SELLER, BuyerTax("DE"),
     (TaxableLine("a", 99), TaxableLine("b", 99), TaxableLine("c", 99)), TODAY,
     "domestic", "19", 297, 56, 353),
    ("12.50 at 21 %", DE_SELLER, BuyerTax("NL"), (TaxableLine("a", 1250),), TODAY,
     "oss", "21", 1250, 263, 1513),
    ("9.99 tax-inclusive at 25.5 %", SellerTax("DE", True, prices_include_tax=True),
     BuyerTax("FI"), (TaxableLine("a", 999),), TODAY, "oss", "25.5", 796, 203, 999),
    ("inclusive, German consumer", SellerTax("DE", True, prices_include_tax=True),
     BuyerTax("DE"), ORDER, TODAY, "domestic", "19", 5714, 1086, 6800),
    ("inclusive, no tax: the price is the price", SellerTax("DE", True, prices_include_tax=True),
     BuyerTax("US"), ORDER, TODAY, "outside_scope", "0", 6800, 0, 6800),
    ("yen, zero decimals: 4900 yen at 20 %", DE_SELLER, BuyerTax("FR"),
     (TaxableLine("a", 4900),), TODAY, "oss", "20", 4900, 980, 5880),
    ("tax not enabled: as before", SellerTax("DE"), BuyerTax("DE"), ORDER, TODAY,
     "none", "0", 6800, 0, 6800),
    ("non-EU seller in the non-Union OSS", SellerTax("US", True, registrations=frozenset({"EU"})),
     BuyerTax("FR"), ORDER, TODAY, "oss", "20", 6800, 1360, 8160),
    ("non-EU seller, in a US state it is not registered in", WA_SELLER, BuyerTax("US", "US-NY"),
     ORDER, TODAY, "not_registered", "0", 6800, 0, 6800),
    ("non-EU seller, in the US state it is registered in", WA_SELLER, BuyerTax("US", "US-WA"),
     ORDER, TODAY, "local", "6.5", 6800, 442, 7242),
]  # fmt: skip


@pytest.mark.parametrize(
    ("seller", "buyer", "lines", "day", "regime", "rate", "net", "tax", "gross"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_cases(seller, buyer, lines, day, regime, rate, net, tax, gross):
    q = quote(seller, buyer, lines, day)
    assert (q.regime, q.rate, q.net, q.tax, q.gross) == (regime, Decimal(rate), net, tax, gross)
    # Lines add up to the totals exactly, each with its own net, rate, tax and gross.
    assert sum(line.net for line in q.lines) == q.net
    assert sum(line.tax for line in q.lines) == q.tax
    assert all(line.net + line.tax == line.gross for line in q.lines)
    assert [t.rate for t in q.totals] == [Decimal(rate)]


def test_lines_share_the_tax_in_proportion():
    q = quote(buyer=BuyerTax("DE"))
    assert [(x.key, x.net, x.tax, x.gross) for x in q.lines] == [
        ("site-guard", 4900, 931, 5831),
        ("themes", 1900, 361, 2261),
    ]
    assert q.rate_valid_from == dt.date(2024, 1, 1) and q.country == "DE"


def test_notes_say_why():
    assert quote(FR_SELLER, BuyerTax("DE", vat_id="DE136695976")).notes == (REVERSE_CHARGE_NOTE,)
    assert quote(buyer=BuyerTax("US")).notes == (OUTSIDE_SCOPE_NOTE,)
    assert quote(SellerTax("US", True), BuyerTax("FR")).notes == (NOT_REGISTERED_NOTE,)
    assert quote(buyer=BuyerTax("FR")).notes == ()


MICRO = SellerTax("DE", True, micro_seller=True)


@pytest.mark.parametrize(
    ("sales", "regime", "rate"),
    [
        (CrossBorderSales(this_year=900_000, last_year=0, this_sale=6800), "micro_seller", "19"),
        # Exactly EUR 10,000 with this sale is not over the threshold.
        (CrossBorderSales(this_year=993_200, last_year=0, this_sale=6800), "micro_seller", "19"),
        # The sale that crosses it is taxed where the buyer is, and every later one.
        (CrossBorderSales(this_year=993_201, last_year=0, this_sale=6800), "oss", "20"),
        (CrossBorderSales(this_year=1_200_000, last_year=0, this_sale=6800), "oss", "20"),
        # Over it last year: destination from the first sale of this year.
        (CrossBorderSales(this_year=0, last_year=1_000_001, this_sale=6800), "oss", "20"),
    ],
)
def test_micro_seller_threshold(sales, regime, rate):
    q = quote(MICRO, BuyerTax("FR"), sales=sales)
    assert (q.regime, q.rate) == (regime, Decimal(rate))
    assert q.cross_border_consumer_sale


def test_only_cross_border_consumer_sales_count():
    assert not quote(MICRO, BuyerTax("DE")).cross_border_consumer_sale
    assert not quote(MICRO, BuyerTax("FR", vat_id="FR40303265045")).cross_border_consumer_sale
    assert not quote(MICRO, BuyerTax("US")).cross_border_consumer_sale
    assert quote(DE_SELLER, BuyerTax("FR")).cross_border_consumer_sale


def test_flags_for_review():
    mismatch = quote(buyer=BuyerTax("FR", evidence_country="DE"))
    # The billing country still decides the rate; the order is flagged.
    assert mismatch.flags == {"evidence_mismatch", "needs_review"}
    assert (mismatch.rate, mismatch.tax, mismatch.evidence) == (Decimal(20), 1360, "mismatch")
    agree = quote(buyer=BuyerTax("FR", evidence_country="FR"))
    assert (agree.flags, agree.evidence) == (frozenset(), "agree")
    single = quote(buyer=BuyerTax("FR"))  # one piece: nothing to compare, recorded as such
    assert (single.flags, single.evidence) == (frozenset(), "single")
    unchecked = quote(
        FR_SELLER, BuyerTax("DE", vat_id="DE136695976", vat_id_check="vies_unavailable")
    )
    assert unchecked.regime == "reverse_charge" and unchecked.tax == 0
    assert unchecked.flags == {"vies_unavailable", "needs_review"}


def test_a_vat_id_vies_rejected_is_a_consumer():
    q = quote(FR_SELLER, BuyerTax("DE", vat_id="DE136695976", vat_id_check="vies_invalid"))
    assert (q.regime, q.rate, q.tax, q.notes, q.flags) == ("oss", Decimal(19), 1292, (), set())


def test_a_day_before_the_rates_table_is_refused():
    with pytest.raises(TaxUnavailable):
        quote(buyer=BuyerTax("FR"), day=dt.date(2023, 6, 1))


def test_an_empty_order():
    q = quote(buyer=BuyerTax("DE"), lines=())
    assert (q.net, q.tax, q.gross, q.lines, q.totals) == (0, 0, 0, (), ())


@given(
    st.lists(st.integers(min_value=0, max_value=10**7), min_size=1, max_size=6),
    st.booleans(),
    st.sampled_from(["DE", "FI", "HU", "LU", "US"]),
)
def test_any_order_adds_up_line_by_line(amounts, inclusive, country):
    seller = SellerTax("DE", True, prices_include_tax=inclusive)
    lines = [TaxableLine(f"line-{i}", amount) for i, amount in enumerate(amounts)]
    q = quote_tax(seller, BuyerTax(country), lines, TODAY)
    assert q.net + q.tax == q.gross
    assert sum(x.net for x in q.lines) == q.net and sum(x.tax for x in q.lines) == q.tax
    assert all(x.net + x.tax == x.gross and x.net >= 0 and x.tax >= 0 for x in q.lines)
    if inclusive:
        assert q.gross == sum(amounts)  # the buyer pays exactly what was shown
    else:
        assert q.net == sum(amounts)
        assert q.tax == round_half_up(Decimal(sum(amounts)) * q.rate / 100)
