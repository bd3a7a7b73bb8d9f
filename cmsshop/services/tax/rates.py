"""Tax rates as versioned data in the repository: ``rates.csv`` beside this module, one
row per (country, region, valid_from) with the rate in percent as a decimal string.

A rate is never edited: a change is a new row with the day it takes effect, so an order
is taxed at the rate in force on its day and an issued invoice, which stores its rates,
never changes. A country's first row is the earliest day the file knows for it (the
member states' from 2024-01-01, the rates in force that day); asking for an earlier day
is an error, not a guess.

The EU member states' standard rates are always known; the other rows (GB, NO, CH, AU)
are examples, used only for a country or region the seller says it is registered in.
A seller adds a country or region the file does not list with ``cmsshop.tax.extra_rates``
(``parse_extra_rates``), one row per line: ``US-WA 6.5 2024-01-01``.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import functools
import re
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from pathlib import Path

RATES_FILE = Path(__file__).with_name("rates.csv")
# ISO 3166-1 alpha-2 codes of the EU member states (Greece is GR here; its VAT IDs use EL).
EU_COUNTRIES = frozenset(
    [
        "AT",
        "BE",
        "BG",
        "CY",
        "CZ",
        "DE",
        "DK",
        "EE",
        "ES",
        "FI",
        "FR",
        "GR",
        "HR",
        "HU",
        "IE",
        "IT",
        "LT",
        "LU",
        "LV",
        "MT",
        "NL",
        "PL",
        "PT",
        "RO",
        "SE",
        "SI",
        "SK",
    ]
)
JURISDICTION = re.compile(r"[A-Z]{2}(?:-[A-Z0-9]{1,3})?")


class RatesFileError(ValueError):
    pass


class NoRateOnDay(LookupError):
    """The day is before the first row of the country (or region) asked for."""


@dataclasses.dataclass(frozen=True)
class RateRow:
    country: str
    region: str | None  # ISO 3166-2 ("US-WA"), None for the whole country
    rate: Decimal  # percent
    valid_from: dt.date
    note: str = ""

    @property
    def jurisdiction(self) -> str:
        return self.region or self.country


def _row(country: str, region: str, rate: str, valid_from: str, note: str, where: str) -> RateRow:
    country, region = country.strip().upper(), (region or "").strip().upper() or None
    if not re.fullmatch(r"[A-Z]{2}", country):
        raise RatesFileError(f"{where}: country {country!r} is not an ISO 3166-1 alpha-2 code")
    if region is not None and not (JURISDICTION.fullmatch(region) and region[:2] == country):
        raise RatesFileError(f"{where}: region {region!r} is not an ISO 3166-2 code of {country}")
    try:
        percent = Decimal(rate.strip())
    except InvalidOperation:
        raise RatesFileError(f"{where}: rate {rate!r} is not a number") from None
    if not percent.is_finite() or not 0 <= percent < 100:
        raise RatesFileError(f"{where}: rate {rate!r} must be from 0 to below 100 percent")
    try:
        day = dt.date.fromisoformat(valid_from.strip())
    except ValueError:
        raise RatesFileError(f"{where}: valid_from {valid_from!r} is not YYYY-MM-DD") from None
    return RateRow(country, region, percent, day, note.strip())


def read_rates(lines: Iterable[str], source: str = "rates.csv") -> tuple[RateRow, ...]:
    """Rows of a rates file; RatesFileError names the first bad row. Two rows of one
    jurisdiction on one day are refused: which one applies would be a guess."""
    reader = csv.DictReader(lines)
    if reader.fieldnames != ["country", "region", "rate", "valid_from", "note"]:
        raise RatesFileError(f"{source}: header must be country,region,rate,valid_from,note")
    rows, seen = [], set()
    for number, record in enumerate(reader, start=2):
        where = f"{source} line {number}"
        row = _row(
            record["country"] or "",
            record["region"] or "",
            record["rate"] or "",
            record["valid_from"] or "",
            record["note"] or "",
            where,
        )
        key = (row.country, row.region, row.valid_from)
        if key in seen:
            raise RatesFileError(
                f"{where}: a second rate for {row.jurisdiction} on {row.valid_from}"
            )
        seen.add(key)
        rows.append(row)
    return tuple(rows)


@functools.cache
def shipped_rates() -> tuple[RateRow, ...]:
    """The repository's rates, read once per process."""
    with RATES_FILE.open(encoding="utf-8", newline="") as handle:
        return read_rates(handle)


def parse_extra_rates(text: str) -> tuple[RateRow, ...]:
    """``cmsshop.tax.extra_rates``: one ``JURISDICTION RATE VALID_FROM`` per line
    (``US-WA 6.5 2024-01-01``, ``CA 5 2024-01-01``); ValueError names a bad line."""
    rows = []
    for number, line in enumerate((text or "").splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 3:
            raise ValueError(
                f"cmsshop.tax.extra_rates line {number}: write JURISDICTION RATE VALID_FROM "
                "(e.g. US-WA 6.5 2024-01-01)"
            )
        code = parts[0].upper()
        country, region = (code[:2], code) if "-" in code else (code, "")
        try:
            rows.append(_row(country, region, parts[1], parts[2], "", f"line {number}"))
        except RatesFileError as exc:
            raise ValueError(f"cmsshop.tax.extra_rates {exc}") from None
    return tuple(rows)


def rate_on(
    country: str, region: str | None, day: dt.date, extra: Iterable[RateRow] = ()
) -> RateRow | None:
    """The row in force on ``day`` for a region (its own row first) or else its country;
    None when neither has a row at all (the file says nothing: no tax there).
    NoRateOnDay when rows exist but all start after ``day``: the rate then is unknown,
    and a guess would put a wrong amount on an invoice."""
    candidates = [row for row in (*shipped_rates(), *extra) if row.country == country]
    known_later = False
    for jurisdiction in ([region] if region else []) + [None]:
        rows = [row for row in candidates if row.region == jurisdiction]
        in_force = [row for row in rows if row.valid_from <= day]
        if in_force:
            return max(in_force, key=lambda row: row.valid_from)
        known_later = known_later or bool(rows)
    if known_later:
        first = min(row.valid_from for row in candidates)
        raise NoRateOnDay(
            f"the rates of {region or country} start on {first}; no rate is known for {day}"
        )
    return None
