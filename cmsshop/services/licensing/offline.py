"""Offline activation: an installation with no network shows a request code, its owner
pastes the code into the dashboard, and downloads a lease file the runtime verifies
offline with the key set pinned in the product.

The request code (made by ``cmsshop.runtime``'s ``offline_request_code``)::

    CMSOFF1.<base64url of the JSON {"v": 1, "product", "key", "domain", "fp", "nonce"}>.<check>

``fp`` is the installation's fingerprint as activate takes it, ``nonce`` a fresh one the
runtime remembers, ``check`` the first 6 bytes of the payload's SHA-256 (base64url): it
catches a typo or a truncated paste before anything else, and is no security measure.
The code is never trusted beyond its fields: the key must be one of the logged-in
customer's licenses, and the activation follows exactly the rules of ``activate`` (seat
counts and locking, the nonce recorded so a code cannot be used twice, the license
state, the audit entry), with a lease that lives ``cmsshop.license_offline_lease_days``
(never past the license's expiry) and says ``"offline": true``. Tampering with the code
gets the customer nothing: a lease for another fingerprint or nonce is refused by the
runtime that made the code.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import json
import re

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.errors import ValidationFailed
from cmsshop.models import License
from cmsshop.services.licensing import problems, seats
from cmsshop.services.licensing.domains import InvalidDomain, normalise_domain
from cmsshop.services.licensing.records import (
    AuditRecord,
    LicenseRequest,
    Licensing,
    LicensingResult,
    normalise_license_key,
)

PREFIX = "CMSOFF1"
MAX_CODE_LENGTH = 2048
CHECK_BYTES = 6
_CODE = re.compile(r"^CMSOFF1\.([A-Za-z0-9_-]{16,2000})\.([A-Za-z0-9_-]{8})$")
_NONCE = re.compile(r"^[A-Za-z0-9_-]{16,128}$")
OFFLINE_AUDIT_ACTION = "offline_activate"
FIELD = "requestCode"


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def checksum(payload: str) -> str:
    digest = hashlib.sha256(payload.encode("ascii")).digest()[:CHECK_BYTES]
    return base64.urlsafe_b64encode(digest).decode("ascii")


def _refuse(message: str) -> ValidationFailed:
    return ValidationFailed(
        {FIELD: message},
        hints=["Copy the whole code again from the product (it starts with CMSOFF1.)."],
    )


def parse_request_code(code: str) -> LicenseRequest:
    """The activation a request code asks for, or a 422 on ``requestCode``."""
    code = "".join(code.split())  # pasted codes may be wrapped over lines
    if len(code) > MAX_CODE_LENGTH:
        raise _refuse("is too long to be a request code")
    match = _CODE.match(code)
    if match is None:
        raise _refuse("is not a request code (CMSOFF1.<data>.<check>)")
    payload, check = match.groups()
    if not hmac.compare_digest(checksum(payload), check):
        raise _refuse("is damaged or incomplete (its check does not match)")
    try:
        fields = json.loads(_b64decode(payload))
    except (binascii.Error, ValueError):
        raise _refuse("is damaged (its data cannot be read)") from None
    if not isinstance(fields, dict) or fields.get("v") != 1:
        raise _refuse("is of a version this shop does not read")
    values = {name: fields.get(name) for name in ("product", "key", "domain", "fp", "nonce")}
    if not all(isinstance(value, str) for value in values.values()):
        raise _refuse("lacks the product, key, domain, fingerprint or nonce")
    key = normalise_license_key(values["key"])
    if key is None or not 1 <= len(values["product"]) <= 100:
        raise _refuse("names no valid license key or product")
    if not 8 <= len(values["fp"]) <= 256 or not values["fp"].isprintable():
        raise _refuse("holds an invalid installation fingerprint")
    if not _NONCE.match(values["nonce"]):
        raise _refuse("holds an invalid nonce")
    try:
        domain = normalise_domain(values["domain"])
    except InvalidDomain:
        raise _refuse("holds an invalid domain") from None
    return LicenseRequest(
        product=values["product"],
        license_key=key,
        domain=domain,
        fingerprint=values["fp"],
        nonce=values["nonce"],
    )


@dataclasses.dataclass(frozen=True)
class OfflineLease:
    """What the customer downloads: the lease and what it was made for."""

    result: LicensingResult
    license_key: str


def activate_offline(
    session: Session,
    licensing: Licensing,
    user_id: int,
    path_key: str | None,
    data: LicenseRequest,
    audit: AuditRecord,
    lease_days: int,
) -> OfflineLease:
    """Activate the installation of a request code on the customer's own license."""
    key = normalise_license_key(path_key)
    owned = key is not None and session.scalar(
        select(License.id).where(License.key == key, License.user_id == user_id)
    )
    if not owned:
        raise problems.license_not_found()
    if data.license_key != key:
        raise _refuse("was made for another license key than this one")
    offline = dataclasses.replace(
        licensing,
        policy=dataclasses.replace(
            licensing.policy, lease_lifetime=lease_days * 86400, offline=True
        ),
    )
    return OfflineLease(seats.activate(offline, data, audit), key)
