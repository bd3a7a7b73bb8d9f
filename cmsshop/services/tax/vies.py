"""Online checking of EU VAT IDs against VIES, the Commission's VAT Information Exchange
System, behind one interface chosen by a setting:

- ``cmsshop.tax.vies_url`` empty (the default): no online check; a VAT ID that passed the
  offline format and check-digit test (services.tax.vatid) is ``format_valid``.
- ``cmsshop.tax.vies_url`` set (``https://ec.europa.eu/taxation_customs/vies/rest-api``):
  the VIES REST API, ``POST {url}/check-vat-number`` with
  ``{"countryCode": "DE", "vatNumber": "136695976"}``, answered with
  ``{"valid": true, "name": ..., "address": ..., "userError": "VALID", ...}``.

VIES is often down for one member state or another, so an outage is an answer, never an
exception: ``vies_unavailable`` (a timeout, a refused connection, a 5xx, a body that is not
the expected JSON, or VIES's own MS_UNAVAILABLE, TIMEOUT, SERVICE_UNAVAILABLE and
*_MAX_CONCURRENT_REQ errors). The order goes on under the documented fallback and is
flagged for review (services.tax.engine).

Views and services get the checker with ``request.find_service(IVatIdChecker)``.
"""

from __future__ import annotations

import dataclasses
import logging

import requests
from zope.interface import Interface, implementer

from cmsshop.services.tax.vatid import split_vat_id
from cmsshop.settings import as_float, as_str

log = logging.getLogger(__name__)

FORMAT_VALID = "format_valid"
VIES_VALID = "vies_valid"
VIES_INVALID = "vies_invalid"
VIES_UNAVAILABLE = "vies_unavailable"

SETTINGS = {
    "cmsshop.tax.vies_url": (as_str, "", "CMSSHOP_TAX_VIES_URL"),
    # Seconds to wait for VIES (connect and read each) before treating it as unavailable:
    # the buyer is waiting at checkout.
    "cmsshop.tax.vies_timeout": (as_float, 5.0, "CMSSHOP_TAX_VIES_TIMEOUT"),
}

# VIES's userError / errorWrappers codes that mean "ask again later", not "no such number".
UNAVAILABLE_ERRORS = frozenset(
    {
        "MS_UNAVAILABLE",
        "MS_MAX_CONCURRENT_REQ",
        "GLOBAL_MAX_CONCURRENT_REQ",
        "SERVICE_UNAVAILABLE",
        "TIMEOUT",
        "IP_BLOCKED",
    }
)

MESSAGES = {
    FORMAT_VALID: "The VAT ID's format and check digits are valid.",
    VIES_VALID: "The EU's VIES service confirms this VAT ID is registered.",
    VIES_INVALID: (
        "The EU's VIES service says this VAT ID is not registered. Please check it, or "
        "leave it empty to buy as a consumer."
    ),
    VIES_UNAVAILABLE: (
        "The EU's VIES service could not be reached to confirm this VAT ID; the order "
        "will be reviewed."
    ),
}


@dataclasses.dataclass(frozen=True)
class VatIdVerdict:
    """What the checker concluded: ``check`` is Order.billing's ``vat_id_check``."""

    check: str  # FORMAT_VALID, VIES_VALID, VIES_INVALID or VIES_UNAVAILABLE
    message: str
    name: str | None = None  # the registered trader's name, when VIES gives it
    address: str | None = None
    request_identifier: str | None = None  # VIES's consultation number, when given

    @property
    def refused(self) -> bool:
        """True when the number is known not to be registered."""
        return self.check == VIES_INVALID


def verdict(check: str, **details) -> VatIdVerdict:
    return VatIdVerdict(check, MESSAGES[check], **details)


class IVatIdChecker(Interface):
    """Chosen by ``cmsshop.tax.vies_url``; found with ``request.find_service(IVatIdChecker)``."""

    def check(vat_id):  # noqa: N805
        """Return a VatIdVerdict for a normalised VAT ID that passed the offline check;
        never raises for an outage."""


@implementer(IVatIdChecker)
class FormatOnlyChecker:
    """No online check configured: the offline check is all there is."""

    def check(self, vat_id: str) -> VatIdVerdict:
        return verdict(FORMAT_VALID)


@implementer(IVatIdChecker)
class ViesRestChecker:
    """The VIES REST API (or anything that answers like it)."""

    def __init__(self, url: str, timeout: float):
        self.endpoint = url.rstrip("/") + "/check-vat-number"
        self.timeout = timeout

    def check(self, vat_id: str) -> VatIdVerdict:
        country, number = split_vat_id(vat_id)
        try:
            response = requests.post(
                self.endpoint,
                json={"countryCode": country, "vatNumber": number},
                headers={"Accept": "application/json"},
                timeout=self.timeout,
            )
        except requests.RequestException as exc:
            log.warning("VIES unreachable for %s: %s", country, exc)
            return verdict(VIES_UNAVAILABLE)
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            log.warning("VIES answered %s without a JSON object", response.status_code)
            return verdict(VIES_UNAVAILABLE)
        errors = _error_codes(body)
        if response.status_code >= 400 or errors:
            # INVALID_INPUT is VIES refusing the number itself; anything else is an outage.
            if errors and errors <= {"INVALID_INPUT", "INVALID"}:
                return verdict(VIES_INVALID)
            log.warning("VIES answered %s %s", response.status_code, sorted(errors))
            return verdict(VIES_UNAVAILABLE)
        valid = body.get("valid")
        if valid is True:
            return verdict(
                VIES_VALID,
                name=_text(body.get("name")),
                address=_text(body.get("address")),
                request_identifier=_text(body.get("requestIdentifier")),
            )
        if valid is False:
            return verdict(VIES_INVALID)
        log.warning("VIES answered without a validity: %r", sorted(body))
        return verdict(VIES_UNAVAILABLE)


def _error_codes(body: dict) -> set[str]:
    """The error codes of a VIES answer: ``userError`` (other than VALID/INVALID on a
    normal answer) and the ``errorWrappers`` of a failed action."""
    codes = set()
    user_error = body.get("userError")
    if isinstance(user_error, str) and user_error not in ("VALID", "INVALID"):
        codes.add(user_error)
    if body.get("actionSucceed") is False or body.get("errorWrappers"):
        wrappers = body.get("errorWrappers") or []
        codes.update(
            str(w.get("error")) for w in wrappers if isinstance(w, dict) and w.get("error")
        )
        codes = codes or {"SERVICE_UNAVAILABLE"}
    return codes


def _text(value) -> str | None:
    # VIES writes "---" for a detail a member state does not disclose.
    if not isinstance(value, str) or value.strip() in ("", "---"):
        return None
    return value.strip()


def make_vat_id_checker(settings: dict) -> FormatOnlyChecker | ViesRestChecker:
    """The checker the settings (declared from SETTINGS) choose."""
    url = settings["cmsshop.tax.vies_url"]
    if not url:
        return FormatOnlyChecker()
    return ViesRestChecker(url, settings["cmsshop.tax.vies_timeout"])
