"""Licensing routes for product runtimes: activate, validate, deactivate, and the JWKS.

No session and no CSRF token: the license key authenticates. Bodies are JSON or a form
post (many PHP runtimes send ``application/x-www-form-urlencoded``).
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any
from urllib.parse import parse_qsl

import colander
from pyramid.view import view_config
from pyramid_retry import is_error_retryable, is_last_attempt

from cmsshop.db import own_transaction
from cmsshop.errors import ApiError, UnsupportedMediaType
from cmsshop.services.licensing import counting, seats, validation
from cmsshop.services.licensing.domains import InvalidDomain, normalise_domain
from cmsshop.services.licensing.problems import LeaseSigningUnavailable
from cmsshop.services.licensing.records import (
    AuditRecord,
    LicenseRequest,
    Licensing,
    LicensingPolicy,
    LicensingResult,
)
from cmsshop.services.licensing.signing import LeaseSigner, SigningUnavailable
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.util import isoformat_z
from cmsshop.views.errors import request_id
from cmsshop.views.licensing.openapi import NONCE_PATTERN
from cmsshop.views.shared.json import (
    StrictMapping,
    StrictString,
    decode_json,
    is_json_content_type,
    is_storable_text,
    json_with_etag,
    read_body,
    validate,
)

FORM_TYPE = "application/x-www-form-urlencoded"
NONCE = re.compile(NONCE_PATTERN)
MAX_FORM_FIELDS = 20


class DomainString(StrictString):
    """A URL or host name, normalised on the way in."""

    def deserialize(self, node, cstruct):
        value = super().deserialize(node, cstruct)
        if value is colander.null:
            return value
        try:
            return normalise_domain(value)
        except InvalidDomain:
            raise colander.Invalid(node, "must be a host name, IP address or URL") from None


def _printable(node, value):
    if not value.isprintable():
        raise colander.Invalid(node, "must not contain control characters")


class LicenseRequestSchema(colander.MappingSchema):
    schema_type = StrictMapping
    product = colander.SchemaNode(StrictString(), validator=colander.Length(min=1, max=100))
    licenseKey = colander.SchemaNode(  # noqa: N815 - JSON name
        StrictString(),
        preparer=lambda value: value.strip().upper() if isinstance(value, str) else value,
        validator=colander.Length(min=1, max=64),
    )
    domain = colander.SchemaNode(DomainString(), validator=colander.Length(min=1, max=255))
    fingerprint = colander.SchemaNode(
        StrictString(), validator=colander.All(colander.Length(min=8, max=256), _printable)
    )
    nonce = colander.SchemaNode(
        StrictString(),
        validator=colander.Regex(NONCE, "must be 16-128 base64url characters (A-Z a-z 0-9 - _)"),
    )


def decode_form(raw: bytes) -> dict:
    """A url-encoded form as a dict; a field given twice becomes a list (then a 422)."""
    try:
        pairs = parse_qsl(
            raw.decode("utf-8"),
            keep_blank_values=True,
            errors="strict",
            max_num_fields=MAX_FORM_FIELDS,
        )
    except ValueError:  # UnicodeDecodeError included
        raise ApiError(
            "The request body is not a valid UTF-8 url-encoded form.",
            code="malformed_form",
            hints=["Send the five fields url-encoded as UTF-8, or send JSON."],
        ) from None
    data: dict = {}
    for name, value in pairs:
        if name in data:
            data[name] = (
                [*data[name], value] if isinstance(data[name], list) else [data[name], value]
            )
        else:
            data[name] = value
    return data


def read_request_data(request):
    """A JSON or url-encoded form body, decoded (415 / 400 / 413 otherwise)."""
    if is_json_content_type(request.content_type):
        return decode_json(read_body(request))
    if (request.content_type or "").lower() == FORM_TYPE:
        return decode_form(read_body(request))
    raise UnsupportedMediaType(
        f"This route accepts application/json or {FORM_TYPE}.",
        hints=["Set Content-Type: application/json (or a form post)."],
    )


LICENSE_REQUEST_FIELDS = frozenset(node.name for node in LicenseRequestSchema().children)


def well_formed_license_request(data: Any) -> LicenseRequest | None:
    """What :class:`LicenseRequestSchema` makes of the common case -- exactly the five
    fields, each a string it accepts -- without colander's machinery (a fifth of a
    validate). None for anything else: the schema then decides, and words the 422.
    (tests/test_licensing_fuzz.py checks both agree.)"""
    if type(data) is not dict or data.keys() != LICENSE_REQUEST_FIELDS:
        return None
    product, key, domain = data["product"], data["licenseKey"], data["domain"]
    fingerprint, nonce = data["fingerprint"], data["nonce"]
    for value in (product, key, domain, fingerprint, nonce):
        if type(value) is not str or not value or not is_storable_text(value):
            return None
    key = key.strip().upper()
    if not (
        len(product) <= 100
        and 0 < len(key) <= 64
        and 8 <= len(fingerprint) <= 256
        and fingerprint.isprintable()
        and NONCE.match(nonce)
    ):
        return None
    try:
        domain = normalise_domain(domain)
    except InvalidDomain:
        return None
    if not 0 < len(domain) <= 255:
        return None
    return LicenseRequest(
        product=product, license_key=key, domain=domain, fingerprint=fingerprint, nonce=nonce
    )


def read_license_request(request) -> LicenseRequest:
    """The five items from a JSON or form body (415 / 400 / 413 / 422 otherwise)."""
    data = read_request_data(request)
    quick = well_formed_license_request(data)
    if quick is not None:
        return quick
    values = validate(LicenseRequestSchema(), data)
    return LicenseRequest(
        product=values["product"],
        license_key=values["licenseKey"],
        domain=values["domain"],
        fingerprint=values["fingerprint"],
        nonce=values["nonce"],
    )


def client_ip(request) -> str:
    return request.client_addr or "unknown"


def _record_failure(audit: AuditRecord, request) -> None:
    """Finished callback: audit a failed call once the request has ended."""
    exc = getattr(request, "exception", None)
    if exc is None:
        return
    if is_error_retryable(request, exc) and not is_last_attempt(request):
        return  # this attempt is discarded; the retry logs the outcome
    own = partial(own_transaction, request.registry)
    counting.record_failure(request.find_service(RateLimiter), own, audit, exc)


CALLS = {
    "activate": seats.activate,
    "deactivate": seats.deactivate,
}


def _call(request, action: str) -> dict:
    audit = AuditRecord(action=action, ip=client_ip(request), request_id=request_id(request))
    request.add_finished_callback(partial(_record_failure, audit))
    data = read_license_request(request)
    limiter = request.find_service(RateLimiter)
    licensing = Licensing(
        request.registry["cmsshop.engine"],
        request.find_service(LeaseSigner),
        request.find_service(LicensingPolicy),
    )
    if action == "validate":
        # Counts the call itself, in the round trip of its first lookup.
        result = validation.validate(licensing, data, audit, limiter)
    else:
        counting.admit_call(limiter, data, audit)
        result = CALLS[action](licensing, data, audit)
    request.response.status = 201 if result.created else 200
    request.response.cache_control = "no-store"
    return license_result_body(result)


def license_result_body(result: LicensingResult) -> dict[str, Any]:
    """The JSON answer of activate, validate and deactivate (LicenseResult in OpenAPI)."""
    license, activation = result.license, result.activation
    body: dict[str, Any] = {
        "license": {
            "product": result.product,
            "status": license.status,
            "expiresAt": isoformat_z(license.expires_at),
            "maxActivations": license.max_activations,
            "activationsUsed": result.activations_used,
            "features": list(license.features),
        },
        "activation": {
            "id": activation.id,
            "domain": activation.domain,
            "environment": activation.environment,
            "active": activation.active,
            "activatedAt": isoformat_z(activation.activated_at),
            "lastValidatedAt": isoformat_z(activation.last_validated_at),
            "deactivatedAt": isoformat_z(activation.deactivated_at),
            "seatHeldUntil": isoformat_z(activation.seat_held_until),
        },
        "lease": result.lease,
        "leaseExpiresAt": isoformat_z(result.lease_expires_at),
    }
    if result.deactivated:
        body = {"deactivated": True, **body}
    return body


@view_config(
    route_name="licensing.activate", request_method="POST", renderer="json", require_csrf=False
)
def activate(request):
    return _call(request, "activate")


@view_config(
    route_name="licensing.validate", request_method="POST", renderer="json", require_csrf=False
)
def validate_view(request):
    return _call(request, "validate")


@view_config(
    route_name="licensing.deactivate", request_method="POST", renderer="json", require_csrf=False
)
def deactivate(request):
    return _call(request, "deactivate")


@view_config(route_name="licensing.jwks", request_method="GET", renderer="json")
def jwks(request):
    try:
        keys = request.find_service(LeaseSigner).jwks()
    except SigningUnavailable as exc:
        retry_after = request.find_service(LicensingPolicy).retry_after
        raise LeaseSigningUnavailable(exc, retry_after, keys=True) from None
    return json_with_etag(request, keys, max_age=300)
