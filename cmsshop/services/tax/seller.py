"""The seller's legal identity and tax settings: what every invoice must name, and what
the tax engine needs to know about the seller.

Each value has an ini/environment default (``cmsshop.seller.legal_name`` /
``CMSSHOP_SELLER_LEGAL_NAME``... for automation) and can be saved in the console
(``shop_settings`` rows keyed ``seller.legalName``...), which wins. The console reads and
writes through ``save_settings``; checkout and the invoice read ``shop_profile`` (one
statement).

A legal invoice needs the legal name, address (a line, postal code, city), country and
VAT or tax ID: while one is missing the console warns, and production refuses checkout
(``live_checkout_refusal``) rather than issue invoices that are not legal.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

import pycountry
from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.errors import ApiError
from cmsshop.models import ShopSetting
from cmsshop.services.tax import vatid
from cmsshop.services.tax.engine import SellerTax
from cmsshop.services.tax.rates import EU_COUNTRIES, parse_extra_rates
from cmsshop.settings import as_bool, as_str
from cmsshop.util import utcnow

# field -> (ini section, kind, longest); kind: "text", "lines", "bool" or "codes". The ini
# name is cmsshop.<section>.<field in snake case>, the environment's CMSSHOP_<SECTION>_<FIELD>.
FIELD_KINDS: dict[str, tuple[str, str, int]] = {
    "legalName": ("seller", "text", 200),
    "address": ("seller", "lines", 400),
    "postalCode": ("seller", "text", 20),
    "city": ("seller", "text", 100),
    "country": ("seller", "text", 2),
    "taxId": ("seller", "text", 30),
    "invoiceFooter": ("seller", "lines", 500),
    "taxEnabled": ("tax", "bool", 0),
    "pricesIncludeTax": ("tax", "bool", 0),
    "microSeller": ("tax", "bool", 0),
    "registrations": ("tax", "codes", 200),
}


def _names(field: str, section: str) -> tuple[str, str]:
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", field).lower()
    if section == "tax":
        snake = snake.removeprefix("tax_")
    return f"cmsshop.{section}.{snake}", f"CMSSHOP_{section}_{snake}".upper()


# field -> (ini name, environment name, kind, longest)
FIELDS: dict[str, tuple[str, str, str, int]] = {
    field: (*_names(field, section), kind, longest)
    for field, (section, kind, longest) in FIELD_KINDS.items()
}
REQUIRED = ("legalName", "address", "postalCode", "city", "country", "taxId")
LABELS = {
    "legalName": "Legal name",
    "address": "Address",
    "postalCode": "Postal code",
    "city": "City",
    "country": "Country",
    "taxId": "VAT or tax ID",
    "invoiceFooter": "Invoice footer",
    "taxEnabled": "Charge tax",
    "pricesIncludeTax": "Prices include tax",
    "microSeller": "Use the EUR 10,000 micro-seller threshold",
    "registrations": "Registered for tax outside your country",
}
EXTRA_RATES = "cmsshop.tax.extra_rates"
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
CODE = re.compile(r"[A-Z]{2}(?:-[A-Z0-9]{1,3})?")


def _as_codes(value: Any) -> list[str]:
    items = value if isinstance(value, list | tuple) else str(value or "").replace(",", " ").split()
    return sorted({str(item).strip().upper() for item in items if str(item).strip()})


def _as_extra_rates(value: Any):
    return value if isinstance(value, tuple) else parse_extra_rates(str(value or ""))


def settings_spec() -> dict:
    """The ini/environment settings this module declares (cmsshop.settings.declare)."""
    coerce = {"text": as_str, "lines": as_str, "bool": as_bool, "codes": _as_codes}
    spec = {
        ini: (coerce[kind], False if kind == "bool" else ([] if kind == "codes" else ""), env)
        for ini, env, kind, _ in FIELDS.values()
    }
    spec[EXTRA_RATES] = (_as_extra_rates, (), "CMSSHOP_TAX_EXTRA_RATES")
    return spec


@dataclasses.dataclass(frozen=True)
class ShopProfile:
    legal_name: str
    address: str  # lines separated by newlines
    postal_code: str
    city: str
    country: str  # ISO alpha-2 or ""
    tax_id: str
    invoice_footer: str
    tax_enabled: bool
    prices_include_tax: bool
    micro_seller: bool
    registrations: tuple[str, ...]
    sources: Mapping[str, str]  # field -> "saved" | "ini"

    @property
    def missing(self) -> list[str]:
        """The fields a legal invoice needs that are empty, in the form's order."""
        values = self.as_json()
        return [field for field in REQUIRED if not values[field]]

    def country_name(self) -> str:
        found = pycountry.countries.get(alpha_2=self.country) if self.country else None
        return found.name if found else self.country

    def as_json(self) -> dict[str, Any]:
        return {
            "legalName": self.legal_name,
            "address": self.address,
            "postalCode": self.postal_code,
            "city": self.city,
            "country": self.country,
            "taxId": self.tax_id,
            "invoiceFooter": self.invoice_footer,
            "taxEnabled": self.tax_enabled,
            "pricesIncludeTax": self.prices_include_tax,
            "microSeller": self.micro_seller,
            "registrations": list(self.registrations),
        }

    def seller_tax(self, settings: Mapping[str, Any]) -> SellerTax:
        """What the tax engine needs to know about the seller."""
        return SellerTax(
            country=self.country or None,
            enabled=self.tax_enabled,
            prices_include_tax=self.prices_include_tax,
            micro_seller=self.micro_seller,
            registrations=frozenset(self.registrations),
            extra_rates=settings.get(EXTRA_RATES, ()),
        )


def shop_profile(session: Session, settings: Mapping[str, Any]) -> ShopProfile:
    """The seller's identity and tax settings: saved values over ini defaults."""
    saved = {
        row.key.partition(".")[2]: row.value
        for row in session.scalars(select(ShopSetting).where(ShopSetting.key.like("seller.%")))
    }
    values, sources = {}, {}
    for field, (ini, _env, kind, _longest) in FIELDS.items():
        if field in saved:
            values[field], sources[field] = saved[field], "saved"
        else:
            default = settings.get(ini, False if kind == "bool" else "")
            values[field], sources[field] = default, "ini"
    return ShopProfile(
        legal_name=str(values["legalName"] or ""),
        address=str(values["address"] or ""),
        postal_code=str(values["postalCode"] or ""),
        city=str(values["city"] or ""),
        country=str(values["country"] or "").upper(),
        tax_id=str(values["taxId"] or ""),
        invoice_footer=str(values["invoiceFooter"] or ""),
        tax_enabled=bool(values["taxEnabled"]),
        prices_include_tax=bool(values["pricesIncludeTax"]),
        micro_seller=bool(values["microSeller"]),
        registrations=tuple(_as_codes(values["registrations"])),
        sources=sources,
    )


def missing_identity(profile: ShopProfile) -> list[str]:
    """The fields a legal invoice needs that are empty (``REQUIRED``'s names, in order)."""
    return profile.missing


class ProfileInvalid(Exception):
    def __init__(self, errors: dict[str, str]):
        super().__init__(errors)
        self.errors = errors


def clean(values: Mapping[str, Any]) -> dict[str, Any]:
    """The console form's values checked and normalised; ProfileInvalid by field."""
    errors: dict[str, str] = {}
    out: dict[str, Any] = {}
    for field, (_ini, _env, kind, longest) in FIELDS.items():
        raw = values.get(field)
        if kind == "bool":
            out[field] = raw in (True, "1", "on", "true", "yes")
            continue
        if kind == "codes":
            codes = _as_codes(raw)
            bad = [code for code in codes if not CODE.fullmatch(code) and code != "EU"]
            if bad:
                errors[field] = f"not a country or region code: {', '.join(bad)}"
            out[field] = codes
            continue
        text = str(raw or "").replace("\r\n", "\n").strip()
        if kind == "text" and "\n" in text:
            errors[field] = "one line only"
        elif CONTROL.search(text):
            errors[field] = "contains characters that cannot be printed"
        elif len(text) > longest:
            errors[field] = f"at most {longest} characters"
        out[field] = text
    country = out["country"].upper()
    out["country"] = country
    if country and pycountry.countries.get(alpha_2=country) is None:
        errors["country"] = "not an ISO country code (two letters, e.g. DE)"
    if out["taxId"] and country in EU_COUNTRIES and "taxId" not in errors:
        checked = vatid.check_vat_id(out["taxId"])
        if not checked.valid:
            errors["taxId"] = (
                "not a valid EU VAT ID (country prefix, then the number; e.g. DE136695976)"
            )
        else:
            out["taxId"] = checked.vat_id
    if out["microSeller"] and country and country not in EU_COUNTRIES:
        errors["microSeller"] = "the micro-seller threshold is for sellers established in the EU"
    if errors:
        raise ProfileInvalid(errors)
    return out


def save_settings(session: Session, values: Mapping[str, Any], admin_id: int | None) -> None:
    """Save the console form (``clean``'s output): every field becomes a saved value."""
    now = utcnow()
    existing = {
        row.key: row
        for row in session.scalars(select(ShopSetting).where(ShopSetting.key.like("seller.%")))
    }
    for field in FIELDS:
        key = f"seller.{field}"
        row = existing.get(key)
        if row is None:
            session.add(
                ShopSetting(key=key, value=values[field], updated_at=now, updated_by=admin_id)
            )
        else:
            row.value, row.updated_at, row.updated_by = values[field], now, admin_id
    session.flush()


class SellerIdentityMissing(ApiError):
    status, code = 409, "seller_identity_missing"


def live_checkout_refusal(profile: ShopProfile, settings: Mapping[str, Any]) -> ApiError | None:
    """In production, checkout is refused while a legal invoice could not be issued."""
    if settings.get("cmsshop.environment") != "production" or not profile.missing:
        return None
    return SellerIdentityMissing(
        "The shop cannot take orders yet: its legal details for invoices are incomplete.",
        title="The shop is not ready to sell",
        hints=[
            "Shop owner: fill in "
            + ", ".join(LABELS[field].lower() for field in profile.missing)
            + " under Admin, Tax (/admin/tax/settings)."
        ],
    )
