"""EU VAT identification numbers: normalising what a buyer types and checking its format
and check digits offline with python-stdnum (``stdnum.eu.vat``), before any online (VIES)
check (services.tax.vies).

Only the 27 member states' prefixes count: Greece's VAT prefix is EL (its ISO code, GR,
is accepted as typed and rewritten to EL), and Northern Ireland's XI numbers are left
out because they cover trade in goods, not the digital services this shop sells.
"""

from __future__ import annotations

import dataclasses

from stdnum import exceptions as stdnum_errors
from stdnum.eu import vat as eu_vat

from cmsshop.services.tax.rates import EU_COUNTRIES

# VAT prefix -> ISO 3166-1 alpha-2 country code (the member states of the rates table);
# they differ only for Greece.
MEMBER_STATES: dict[str, str] = {
    ("EL" if country == "GR" else country): country for country in sorted(EU_COUNTRIES)
}

INVALID_FORMAT = "invalid_format"
INVALID_CHECKSUM = "invalid_checksum"
VALID = "valid"

MESSAGES = {
    INVALID_FORMAT: (
        "This is not an EU VAT ID. It starts with the country's two-letter prefix "
        "(for example DE, FR, or EL for Greece) followed by the number. Leave it empty "
        "to buy as a consumer."
    ),
    INVALID_CHECKSUM: (
        "This VAT ID's check digits do not add up, so it probably has a typing error. "
        "Please check it, or leave it empty to buy as a consumer."
    ),
    VALID: "The VAT ID's format and check digits are valid.",
}


@dataclasses.dataclass(frozen=True)
class VatIdCheck:
    """The offline verdict on one VAT ID.

    ``vat_id`` is the normalised form ("DE136695976") whenever the prefix is a member
    state's, ``country`` that state's ISO code (GR for an EL number)."""

    status: str  # INVALID_FORMAT, INVALID_CHECKSUM or VALID
    vat_id: str | None
    country: str | None
    message: str

    @property
    def valid(self) -> bool:
        return self.status == VALID


def normalise_vat_id(raw: str) -> str:
    """Upper case, without spaces or separators, Greece as EL: "de 136 695 976" ->
    "DE136695976". Never fails; a number that cannot be read comes back cleaned only."""
    cleaned = "".join(ch for ch in raw.upper() if ch.isalnum())
    if cleaned.startswith("GR"):
        cleaned = "EL" + cleaned[2:]
    if cleaned[:2] not in MEMBER_STATES:
        return cleaned
    try:
        compact = eu_vat.compact(cleaned)
    except stdnum_errors.ValidationError:
        return cleaned
    return compact if compact.startswith(cleaned[:2]) else cleaned[:2] + compact


def check_vat_id(raw: str) -> VatIdCheck:
    """Check the format and check digits of ``raw`` (any spacing, either case)."""
    vat_id = normalise_vat_id(raw or "")
    prefix = vat_id[:2]
    country = MEMBER_STATES.get(prefix)
    if country is None or len(vat_id) <= 2:
        return VatIdCheck(INVALID_FORMAT, None, None, MESSAGES[INVALID_FORMAT])
    try:
        eu_vat.validate(vat_id)
    except stdnum_errors.InvalidChecksum:
        return VatIdCheck(INVALID_CHECKSUM, vat_id, country, MESSAGES[INVALID_CHECKSUM])
    except stdnum_errors.ValidationError:
        return VatIdCheck(INVALID_FORMAT, vat_id, country, MESSAGES[INVALID_FORMAT])
    return VatIdCheck(VALID, vat_id, country, MESSAGES[VALID])


def split_vat_id(vat_id: str) -> tuple[str, str]:
    """("DE", "136695976"): the prefix and the number, as VIES wants them."""
    return vat_id[:2], vat_id[2:]
