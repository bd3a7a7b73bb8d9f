"""Billing details: what is required when, what is refused, the order's snapshot and the
customer's saved profile."""

from __future__ import annotations

import pytest

from cmsshop.errors import ValidationFailed
from cmsshop.models import BillingProfile
from cmsshop.services.tax.billing import (
    check_billing,
    clean_billing,
    load_profile,
    profile_details,
    save_profile,
)
from cmsshop.services.tax.vies import FormatOnlyChecker, ViesRestChecker

BUSINESS = {
    "country": "DE",
    "name": "Erika Mustermann",
    "company": "Example GmbH",
    "addressLine1": "Hauptstr. 1",
    "city": "Berlin",
    "postalCode": "10115",
    "vatId": "de 136 695 976",
}


def errors_of(values) -> dict[str, str]:
    with pytest.raises(ValidationFailed) as caught:
        clean_billing(values)
    return caught.value.extra["errors"]


def test_a_consumer_needs_only_a_country():
    details = clean_billing({"country": "us"})
    assert details.snapshot() == {
        "country": "US",
        "region": None,
        "name": "",
        "company": None,
        "address_line1": None,
        "address_line2": None,
        "city": None,
        "postal_code": None,
        "vat_id": None,
        "vat_id_check": "none",
    }
    assert not details.is_business


def test_texts_are_trimmed_and_empty_ones_kept_as_none():
    details = clean_billing({"country": " FR ", "name": "  Jean  ", "city": "", "region": None})
    assert (details.country, details.name, details.city, details.region) == (
        "FR",
        "Jean",
        None,
        None,
    )


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({}, "country"),
        ({"country": ""}, "country"),
        ({"country": "ZZ"}, "country"),
        ({"country": "USA"}, "country"),
        ({"country": "U1"}, "country"),
        ({"country": 49}, "country"),
        ({"country": "US", "region": "XX"}, "region"),
        ({"country": "US", "region": "DE-BY"}, "region"),
        ({"country": "US", "name": "a\x07b"}, "name"),
        ({"country": "US", "city": "Line\nbreak"}, "city"),
        ({"country": "US", "name": "x" * 201}, "name"),
        ({"country": "US", "postalCode": "1" * 21}, "postalCode"),
        ({"country": "US", "company": ["ACME"]}, "company"),
        ({"country": "US", "nickname": "x"}, "billing"),
    ],
)
def test_bad_fields_are_errors_by_field(values, field):
    assert field in errors_of(values)


def test_an_unknown_country_says_what_is_expected():
    assert "ISO 3166-1" in errors_of({"country": "XX"})["country"]


def test_a_region_is_an_iso_subdivision_of_the_country():
    assert clean_billing({"country": "US", "region": "wa"}).region == "US-WA"
    assert clean_billing({"country": "CA", "region": "CA-QC"}).region == "CA-QC"


def test_a_business_with_a_vat_id_is_normalised():
    details = clean_billing(BUSINESS)
    assert details.vat_id == "DE136695976"
    assert details.is_business
    assert details.company == "Example GmbH"


def test_a_business_must_give_its_name_and_address():
    errors = errors_of({"country": "DE", "vatId": "DE136695976"})
    assert set(errors) == {"company", "addressLine1", "city", "postalCode"}
    assert "invoice" in errors["company"]


@pytest.mark.parametrize(
    ("vat_id", "country", "says"),
    [
        ("DE136695978", "DE", "check digits"),  # checksum
        ("DE12345", "DE", "not an EU VAT ID"),  # format
        ("US123456789", "DE", "not an EU VAT ID"),
        ("FR40303265045", "DE", "from FR"),  # another member state's number
        ("DE136695976", "US", "billing country in the EU"),
    ],
)
def test_an_invalid_vat_id_is_an_error_on_that_field_only(vat_id, country, says):
    errors = errors_of({**BUSINESS, "country": country, "vatId": vat_id})
    assert set(errors) == {"vatId"}
    assert says in errors["vatId"]
    assert "consumer" in errors["vatId"]


def test_a_greek_business_uses_el():
    details = clean_billing({**BUSINESS, "country": "GR", "vatId": "GR 094259216"})
    assert details.vat_id == "EL094259216"


def test_without_vies_a_valid_vat_id_is_format_valid():
    assert check_billing(BUSINESS, FormatOnlyChecker()).vat_id_check == "format_valid"
    assert check_billing({"country": "DE"}, FormatOnlyChecker()).vat_id_check == "none"


def test_vies_decides_when_configured(fake_vies):
    checker = ViesRestChecker(fake_vies.url, 2.0)
    fake_vies.register("DE136695976", "EXAMPLE GMBH", "BERLIN")
    assert check_billing(BUSINESS, checker).vat_id_check == "vies_valid"
    fake_vies.registered.clear()
    with pytest.raises(ValidationFailed) as caught:
        check_billing(BUSINESS, checker)
    assert "not registered" in caught.value.extra["errors"]["vatId"]
    fake_vies.outage = "MS_UNAVAILABLE"
    assert check_billing(BUSINESS, checker).vat_id_check == "vies_unavailable"


def test_the_profile_is_saved_replaced_and_loaded(dbsession, customer):
    assert profile_details(load_profile(dbsession, customer.id)) is None
    save_profile(dbsession, customer.id, clean_billing(BUSINESS))
    dbsession.commit()
    saved = profile_details(load_profile(dbsession, customer.id))
    assert saved.vat_id == "DE136695976"
    assert saved.as_api()["addressLine1"] == "Hauptstr. 1"
    save_profile(dbsession, customer.id, clean_billing({"country": "US", "region": "US-WA"}))
    dbsession.commit()
    dbsession.expire_all()
    row = dbsession.get(BillingProfile, customer.id)
    assert (row.country, row.region, row.vat_id, row.company) == ("US", "US-WA", None, None)
