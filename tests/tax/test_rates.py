"""The rates file: read and checked at load, looked up by day (a change is a new row,
the old one stays in force before it), regions before countries, extra rates a seller
adds in the ini."""

from __future__ import annotations

import datetime as dt
import io
from decimal import Decimal

import pytest

from cmsshop.services.tax.rates import (
    EU_COUNTRIES,
    NoRateOnDay,
    RatesFileError,
    parse_extra_rates,
    rate_on,
    read_rates,
    shipped_rates,
)

TODAY = dt.date(2026, 11, 26)


@pytest.mark.parametrize(
    ("country", "day", "rate"),
    [
        ("FI", TODAY, "25.5"),
        ("FI", dt.date(2024, 8, 31), "24"),
        ("FI", dt.date(2024, 9, 1), "25.5"),
        ("RO", TODAY, "21"),
        ("RO", dt.date(2025, 7, 31), "19"),
        ("EE", TODAY, "24"),
        ("EE", dt.date(2025, 6, 30), "22"),
        ("SK", TODAY, "23"),
        ("SK", dt.date(2024, 12, 31), "20"),
        ("DE", TODAY, "19"),
        ("FR", TODAY, "20"),
        ("HU", TODAY, "27"),
        ("LU", TODAY, "17"),
        ("GR", TODAY, "24"),
        ("CH", TODAY, "8.1"),
        ("CH", dt.date(2023, 12, 31), "7.7"),
        ("CH", dt.date(2024, 1, 1), "8.1"),
        ("GB", TODAY, "20"),
        ("NO", TODAY, "25"),
        ("AU", TODAY, "10"),
    ],
)
def test_rates_in_force(country, day, rate):
    assert rate_on(country, None, day).rate == Decimal(rate)


def test_every_member_state_has_a_rate_and_nothing_else_is_invented():
    for country in EU_COUNTRIES:
        assert rate_on(country, None, TODAY) is not None, country
    assert rate_on("US", None, TODAY) is None and rate_on("US", "US-WA", TODAY) is None
    assert len(EU_COUNTRIES) == 27
    assert {row.country for row in shipped_rates()} == EU_COUNTRIES | {"GB", "NO", "CH", "AU"}


def test_a_day_before_the_table_is_an_error_not_a_guess():
    # Each country's history starts at its first row: Germany's in 2024, Switzerland's
    # (with the 7.7 % before 2024) earlier.
    with pytest.raises(NoRateOnDay):
        rate_on("DE", None, dt.date(2023, 12, 31))
    with pytest.raises(NoRateOnDay):
        rate_on("CH", None, dt.date(2017, 12, 31))
    # A region whose only row starts later, in a country with no rows: unknown, not 0.
    later = parse_extra_rates("US-WA 6.5 2026-06-01")
    with pytest.raises(NoRateOnDay):
        rate_on("US", "US-WA", dt.date(2026, 5, 31), later)


def test_the_shipped_file_only_adds_rows():
    """The shipped history: whole countries only, no row dated after today's rates (a
    mistyped year would be caught here), and exactly the member states whose rate
    changed since 2024 carry a later row."""
    rows = shipped_rates()
    assert all(row.region is None for row in rows)
    assert all(dt.date(2018, 1, 1) <= row.valid_from <= TODAY for row in rows)
    changed = {row.country for row in rows if row.valid_from > dt.date(2024, 1, 1)}
    assert changed == {"EE", "FI", "RO", "SK"}


def test_extra_rates_regions_first_then_the_country():
    extra = parse_extra_rates("US-WA 6.5 2024-01-01\n\nCA 5 2024-01-01\nUS-WA 7 2026-06-01\n")
    assert rate_on("US", "US-WA", TODAY, extra).rate == Decimal(7)
    assert rate_on("US", "US-WA", dt.date(2026, 5, 31), extra).rate == Decimal("6.5")
    assert rate_on("US", "US-NY", TODAY, extra) is None
    assert rate_on("CA", "CA-QC", TODAY, extra).rate == Decimal(5)


@pytest.mark.parametrize(
    "bad",
    [
        "US-WA 6.5",
        "US-WA x 2024-01-01",
        "US-WA 6.5 2024-13-01",
        "USA 5 2024-01-01",
        "US-WA 100 2024-01-01",
        "US-WA -1 2024-01-01",
    ],
)
def test_bad_extra_rates_name_their_line(bad):
    with pytest.raises(ValueError, match="line 1"):
        parse_extra_rates(bad)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("country,rate\nDE,19\n", "header"),
        ("country,region,rate,valid_from,note\nDEU,,19,2024-01-01,x\n", "line 2"),
        ("country,region,rate,valid_from,note\nDE,FR-75,19,2024-01-01,x\n", "region"),
        ("country,region,rate,valid_from,note\nDE,,19,2024-1-1x,x\n", "valid_from"),
        (
            "country,region,rate,valid_from,note\nDE,,19,2024-01-01,a\nDE,,20,2024-01-01,b\n",
            "second rate",
        ),
    ],
)
def test_a_bad_rates_file_is_refused_at_load(body, message):
    with pytest.raises(RatesFileError, match=message):
        read_rates(io.StringIO(body))
