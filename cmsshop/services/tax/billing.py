"""The buyer's billing details: what is asked, checked and kept.

What is required when (an invoice must name what the law asks of it):

- always the **country** (ISO 3166-1 alpha-2): it decides the tax;
- a **region** is optional, an ISO 3166-2 subdivision of that country ("US-WA"; "WA" is
  read as "US-WA"), for the few sellers registered per state or province;
- a buyer with a **VAT ID** buys as a business: the reverse-charge invoice must show the
  business's name and address, so company, first address line, city and postal code are
  then required. The VAT ID must be an EU VAT ID of the billing country, pass the format
  and check-digit test (services.tax.vatid) and, when VIES is configured, not be refused
  by it (services.tax.vies). A refused VAT ID is an error on that field alone: the buyer
  may clear it and buy as a consumer;
- name, company and address are otherwise optional.

Texts are trimmed, one line each, without control characters, at most as long as the
BillingProfile columns. Values use the API's camelCase names (``addressLine1``, ``vatId``)
in and in errors (ValidationFailed, a 422 under /api, field errors on a page); the order's
snapshot (Order.billing) and the profile use snake case.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

import colander
import pycountry
from sqlalchemy.orm import Session

from cmsshop.errors import ValidationFailed
from cmsshop.models import BillingProfile
from cmsshop.services.store.text import text_problem
from cmsshop.services.tax.rates import EU_COUNTRIES
from cmsshop.services.tax.vatid import check_vat_id
from cmsshop.services.tax.vies import VIES_INVALID

# camelCase field -> (snake case attribute, longest): the BillingProfile column lengths.
FIELDS: dict[str, tuple[str, int]] = {
    "country": ("country", 2),
    "region": ("region", 10),
    "name": ("name", 200),
    "company": ("company", 200),
    "addressLine1": ("address_line1", 200),
    "addressLine2": ("address_line2", 200),
    "city": ("city", 100),
    "postalCode": ("postal_code", 20),
    # As typed, with spaces and dots ("DE 136 695 976"); kept normalised (at most 14).
    "vatId": ("vat_id", 20),
}
LABELS = {
    "country": "Country",
    "region": "State or region",
    "name": "Name",
    "company": "Company name",
    "addressLine1": "Address",
    "addressLine2": "Address (second line)",
    "city": "City",
    "postalCode": "Postal code",
    "vatId": "EU VAT ID",
}
# What a business buyer (one with a VAT ID) must give: a reverse-charge invoice shows it.
BUSINESS_REQUIRED = ("company", "addressLine1", "city", "postalCode")
VAT_ID_CHECKS = ("none", "format_valid", "vies_valid", "vies_invalid", "vies_unavailable")


@dataclasses.dataclass(frozen=True)
class BillingDetails:
    """Checked billing details; ``vat_id_check`` is "none" without a VAT ID, else what the
    online check said (``with_vat_id_check``)."""

    country: str
    region: str | None = None
    name: str = ""
    company: str | None = None
    address_line1: str | None = None
    address_line2: str | None = None
    city: str | None = None
    postal_code: str | None = None
    vat_id: str | None = None
    vat_id_check: str = "none"

    def snapshot(self) -> dict[str, Any]:
        """The Order.billing dict: kept on the order, never changed by a later edit."""
        return dataclasses.asdict(self)

    def as_api(self) -> dict[str, Any]:
        """camelCase, as the API and the forms name the fields (without the check)."""
        return {field: getattr(self, attr) for field, (attr, _n) in FIELDS.items()}

    @property
    def is_business(self) -> bool:
        return self.vat_id is not None


class _Text(colander.String):
    """A string and nothing else (a JSON number or list is refused, not turned into
    text); empty allowed, so a field may be cleared."""

    def __init__(self):
        super().__init__(allow_empty=True)

    def deserialize(self, node, cstruct):
        if cstruct is None:
            return ""
        if cstruct is not colander.null and not isinstance(cstruct, str):
            raise colander.Invalid(node, "must be a string")
        return super().deserialize(node, cstruct)


def _one_line(longest: int):
    def check(node, value):
        problem = text_problem(value)
        if problem:
            raise colander.Invalid(node, problem)
        if len(value) > longest:
            raise colander.Invalid(node, f"at most {longest} characters")

    return check


def _trim(value):
    return value.strip() if isinstance(value, str) else value


class BillingSchema(colander.MappingSchema):
    """Types, lengths and characters of each field; the rules across fields are
    ``clean_billing``'s."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for field, (_attr, longest) in FIELDS.items():
            self.add(
                colander.SchemaNode(
                    _Text(),
                    name=field,
                    missing="",
                    preparer=_trim,
                    validator=_one_line(longest),
                )
            )


def _errors_of(exc: colander.Invalid) -> dict[str, str]:
    return {key or "billing": message for key, message in exc.asdict().items()}


def _country(code: str) -> str | None:
    code = code.upper()
    if len(code) != 2 or not code.isalpha():
        return None
    return code if pycountry.countries.get(alpha_2=code) is not None else None


def _region(country: str, code: str) -> str | None:
    code = code.upper().replace(" ", "")
    if "-" not in code:
        code = f"{country}-{code}"
    found = pycountry.subdivisions.get(code=code)
    return code if found is not None and found.country_code == country else None


def clean_billing(values: Any) -> BillingDetails:
    """Billing details from the API's or a form's fields, checked offline (VAT ID format
    and check digits included); ValidationFailed by field otherwise. The online VAT ID
    check is ``with_vat_id_check``'s."""
    if not isinstance(values, Mapping):
        raise ValidationFailed({"billing": "must be an object"})
    schema = BillingSchema()
    unknown = sorted(str(key) for key in values if key not in FIELDS)
    errors: dict[str, str] = {}
    if unknown:
        errors["billing"] = f"Unknown fields: {', '.join(unknown)}."
    # Field by field, so a bad name and a bad VAT ID are both reported at once.
    typed: dict[str, str] = {}
    for node in schema.children:
        try:
            typed[node.name] = node.deserialize(values.get(node.name, colander.null))
        except colander.Invalid as exc:
            errors.update(_errors_of(exc))
            typed[node.name] = ""
    country = None
    if not typed["country"]:
        errors.setdefault("country", "Required: the country decides the tax.")
    else:
        country = _country(typed["country"])
        if country is None:
            errors["country"] = "Not a country code: two letters of ISO 3166-1, e.g. DE or US."
    region = None
    if typed["region"] and country:
        region = _region(country, typed["region"])
        if region is None:
            errors["region"] = f"Not a region of {country}: an ISO 3166-2 code such as US-WA."
    vat_id = None
    if typed["vatId"] and country:
        check = check_vat_id(typed["vatId"])
        if not check.valid:
            errors["vatId"] = check.message
        elif country not in EU_COUNTRIES:
            errors["vatId"] = (
                "An EU VAT ID goes with a billing country in the EU. Leave it empty to buy "
                "as a consumer."
            )
        elif check.country != country:
            errors["vatId"] = (
                f"This VAT ID is from {check.country}, but the billing country is {country}. "
                "Check both, or leave the VAT ID empty to buy as a consumer."
            )
        else:
            vat_id = check.vat_id
        if vat_id is not None:
            for field in BUSINESS_REQUIRED:
                if not typed[field] and field not in errors:
                    errors[field] = (
                        "Required with a VAT ID: the invoice must name the business and "
                        "its address."
                    )
    if errors:
        raise ValidationFailed(errors)
    return BillingDetails(
        country=country,
        region=region,
        name=typed["name"],
        company=typed["company"] or None,
        address_line1=typed["addressLine1"] or None,
        address_line2=typed["addressLine2"] or None,
        city=typed["city"] or None,
        postal_code=typed["postalCode"] or None,
        vat_id=vat_id,
    )


def with_vat_id_check(details: BillingDetails, checker) -> BillingDetails:
    """``details`` with its VAT ID checked online by ``checker`` (the IVatIdChecker
    service): ``vat_id_check`` set, or ValidationFailed on ``vatId`` when VIES says the
    number is not registered. An unreachable VIES is no error: ``vies_unavailable``."""
    if details.vat_id is None:
        return dataclasses.replace(details, vat_id_check="none")
    verdict = checker.check(details.vat_id)
    if verdict.check == VIES_INVALID:
        raise ValidationFailed({"vatId": verdict.message})
    return dataclasses.replace(details, vat_id_check=verdict.check)


def check_billing(values: Any, checker) -> BillingDetails:
    """``clean_billing`` then ``with_vat_id_check``: what checkout and the account use."""
    return with_vat_id_check(clean_billing(values), checker)


def load_profile(session: Session, user_id: int) -> BillingProfile | None:
    return session.get(BillingProfile, user_id)


def profile_details(profile: BillingProfile | None) -> BillingDetails | None:
    """The saved profile as BillingDetails (its VAT ID not re-checked), or None."""
    if profile is None:
        return None
    return BillingDetails(
        **{attr: getattr(profile, attr) for attr, _n in FIELDS.values()},
    )


def save_profile(session: Session, user_id: int, details: BillingDetails) -> BillingProfile:
    """Create or replace the customer's profile with ``details``."""
    profile = session.get(BillingProfile, user_id)
    if profile is None:
        profile = BillingProfile(user_id=user_id)
        session.add(profile)
    for attr, _n in FIELDS.values():
        setattr(profile, attr, getattr(details, attr))
    session.flush()
    return profile


@functools.cache
def country_choices() -> tuple[tuple[str, str], ...]:
    """(code, name) of every ISO 3166-1 country, by name: the forms' country list."""
    return tuple(
        sorted(
            ((c.alpha_2, getattr(c, "common_name", c.name)) for c in pycountry.countries),
            key=lambda pair: pair[1],
        )
    )
