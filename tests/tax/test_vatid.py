"""VAT IDs: normalising what a buyer types and the offline format and check-digit test.

The valid numbers are the examples python-stdnum's own documentation checks; each
invalid one differs from a valid one in a check digit, or breaks the format."""

from __future__ import annotations

import pytest

from cmsshop.services.tax.vatid import (
    INVALID_CHECKSUM,
    INVALID_FORMAT,
    VALID,
    check_vat_id,
    normalise_vat_id,
    split_vat_id,
)

VALID_IDS = [
    ("DE 136 695 976", "DE136695976", "DE"),
    ("fr 40 303 265 045", "FR40303265045", "FR"),
    ("FRK7399859412", "FRK7399859412", "FR"),
    ("NL004495445B01", "NL004495445B01", "NL"),
    ("IT 00743110157", "IT00743110157", "IT"),
    ("ES B-58378431", "ESB58378431", "ES"),
    ("FI 20774740", "FI20774740", "FI"),
    ("EL 094259216", "EL094259216", "GR"),
    ("GR094259216", "EL094259216", "GR"),
    ("AT U13585627", "ATU13585627", "AT"),
    ("BE 428759497", "BE0428759497", "BE"),
    ("PL 856-734-62-15", "PL8567346215", "PL"),
]

BAD_CHECKSUM = [
    "DE136695978",
    "FR84323140391",
    "NL123456789B90",
    "IT00743110158",
    "ESB64717839",
    "FI20774741",
    "EL123456781",
    "ATU13585626",
    "BE431150351",
    "PL8567346216",
]

BAD_FORMAT = [
    "",
    "136695976",  # no country prefix
    "US123456789",  # not a member state
    "XI123456789",  # Northern Ireland: goods only
    "GB123456789",  # no longer a member state
    "DE12345678",  # one digit short
    "DE1366959760",  # one digit too many
    "FR4030326504",
    "NL004495445X01",
    "ITABCDEFGHIJK",
    "ATX13585627",
    "PL85673462",
    "EL",
]


@pytest.mark.parametrize(("typed", "normalised", "country"), VALID_IDS)
def test_valid_ids_are_normalised_and_pass(typed, normalised, country):
    check = check_vat_id(typed)
    assert (check.status, check.vat_id, check.country) == (VALID, normalised, country)
    assert check.valid
    assert normalise_vat_id(typed) == normalised


@pytest.mark.parametrize("typed", BAD_CHECKSUM)
def test_a_wrong_check_digit_is_a_checksum_error(typed):
    check = check_vat_id(typed)
    assert check.status == INVALID_CHECKSUM
    assert not check.valid
    assert "typing error" in check.message


@pytest.mark.parametrize("typed", BAD_FORMAT)
def test_a_number_of_the_wrong_shape_is_a_format_error(typed):
    check = check_vat_id(typed)
    assert check.status == INVALID_FORMAT
    assert "not an EU VAT ID" in check.message


def test_the_messages_tell_a_buyer_they_may_continue_without_one():
    for typed in ("DE136695978", "US1"):
        assert "consumer" in check_vat_id(typed).message


def test_split_for_vies():
    assert split_vat_id("EL094259216") == ("EL", "094259216")
    assert normalise_vat_id(" de-136.695.976 ") == "DE136695976"
