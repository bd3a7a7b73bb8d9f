"""Amounts: PayPal decimal strings <-> minor units (ISO 4217 exponents)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

_AMOUNT = re.compile(r"^-?[0-9]{1,15}(\.[0-9]{1,3})?$")


# ISO 4217 exponents that are not 2. Minor units in this shop follow ISO 4217, so an
# admin must configure these currencies with the same number of decimals.
CURRENCY_DECIMALS = {
    **dict.fromkeys(
        ("BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "VND"), 0
    ),
    **dict.fromkeys(("VUV", "XAF", "XOF", "XPF"), 0),
    **dict.fromkeys(("BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"), 3),
}
# PayPal refuses decimals for these although ISO 4217 gives them two: whole amounts are
# sent without a fraction, fractional ones cannot be charged through PayPal.
PAYPAL_WHOLE_UNITS = frozenset({"HUF", "TWD"})

# --- money ---------------------------------------------------------------------------


def currency_decimals(currency: str) -> int:
    return CURRENCY_DECIMALS.get(currency.upper(), 2)


def to_minor_units(value: Any, currency: str) -> int:
    """PayPal's decimal string (``"10.50"``, ``"1000"``) -> integer minor units, exactly."""
    if not isinstance(value, str) or not _AMOUNT.match(value):
        raise ValueError(f"not a PayPal amount: {value!r}")
    scaled = Decimal(value).scaleb(currency_decimals(currency))
    if scaled != scaled.to_integral_value():
        raise ValueError(f"{value} {currency} has more decimals than the currency")
    return int(scaled)


def to_decimal_string(amount: int, currency: str) -> str:
    """Integer minor units -> the decimal string PayPal expects."""
    decimals = currency_decimals(currency)
    value = Decimal(int(amount)).scaleb(-decimals)
    if currency.upper() in PAYPAL_WHOLE_UNITS:
        if value != value.to_integral_value():
            raise ValueError(f"PayPal accepts only whole {currency} amounts")
        return str(int(value))
    return f"{value:.{decimals}f}"


def money_of(obj: Any) -> tuple[int | None, str | None]:
    """``{"currency_code", "value"}`` -> (minor units, currency); (None, ...) if unreadable."""
    if not isinstance(obj, Mapping):
        return None, None
    currency = obj.get("currency_code")
    if not isinstance(currency, str) or not re.fullmatch(r"[A-Za-z]{3}", currency):
        return None, None
    currency = currency.upper()
    try:
        return to_minor_units(obj.get("value"), currency), currency
    except (ValueError, InvalidOperation):
        return None, currency
