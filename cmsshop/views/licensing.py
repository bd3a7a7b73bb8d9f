"""Licensing routes for product runtimes: activate, validate, deactivate, and the JWKS.

No session and no CSRF token: the license key authenticates. Bodies are JSON or a form
post (many PHP runtimes send ``application/x-www-form-urlencoded``).
"""

from __future__ import annotations

import logging
import re
from functools import partial
from urllib.parse import parse_qsl

import colander
from pyramid.view import view_config
from pyramid_retry import is_error_retryable, is_last_attempt
from zope.sqlalchemy import mark_changed

from cmsshop.db import own_transaction
from cmsshop.errors import ApiError, RateLimited, ServiceUnavailable, UnsupportedMediaType
from cmsshop.services.licensing import calls as licensing
from cmsshop.services.licensing.domains import InvalidDomain, normalise_domain
from cmsshop.services.licensing.signing import SigningUnavailable
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.views.common import (
    StrictMapping,
    StrictString,
    decode_json,
    is_json_content_type,
    json_with_etag,
    read_body,
    validate,
)
from cmsshop.views.errors import request_id

FORM_TYPE = "application/x-www-form-urlencoded"
LICENSE_IP_POLICY = "license.ip"
LICENSE_KEY_POLICY = "license.key"
LICENSE_CHURN_POLICY = "license.churn"
NONCE = re.compile(r"^[A-Za-z0-9_-]{16,128}$")
MAX_FORM_FIELDS = 20

licensing_log = logging.getLogger("cmsshop.licensing")


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
            title="Malformed form",
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


def read_license_request(request) -> licensing.LicenseRequest:
    """The five items from a JSON or form body (415 / 400 / 413 / 422 otherwise)."""
    if is_json_content_type(request.content_type):
        data = decode_json(read_body(request))
    elif (request.content_type or "").lower() == FORM_TYPE:
        data = decode_form(read_body(request))
    else:
        raise UnsupportedMediaType(
            f"This route accepts application/json or {FORM_TYPE}.",
            hints=["Set Content-Type: application/json (or a form post)."],
        )
    values = validate(LicenseRequestSchema(), data)
    return licensing.LicenseRequest(
        product=values["product"],
        license_key=values["licenseKey"],
        domain=values["domain"],
        fingerprint=values["fingerprint"],
        nonce=values["nonce"],
    )


def client_ip(request) -> str:
    return request.client_addr or "unknown"


def _record_failure(audit: licensing.AuditRecord, request) -> None:
    """Finished callback: log a failed call once the request's transaction has ended.

    Successful calls are logged inside their own transaction by the service; failures
    roll back, so their entry is written afterwards in a transaction of its own (after
    the rollback, so on SQLite it never waits on the request's own write lock).
    """
    exc = getattr(request, "exception", None)
    if exc is None:
        return
    if is_error_retryable(request, exc) and not is_last_attempt(request):
        return  # this attempt is discarded; the retry logs the outcome
    if isinstance(exc, ApiError):
        outcome, status = exc.code, exc.status
    else:
        outcome, status = "internal_error", 500
    try:
        if not audit.counted:  # not counted yet, or the count was rolled back: count now
            limits = audit.limits or [(LICENSE_IP_POLICY, audit.ip)]
            request.find_service(RateLimiter).count(limits)
        with own_transaction(request.registry) as session:
            session.add(audit.entry(outcome, status))
    except Exception:  # noqa: BLE001 - the audit must not turn an answer into a crash
        licensing_log.warning("could not write licensing audit entry", exc_info=True)


def _call(request, action: str) -> dict:
    settings = request.registry.settings
    ip = client_ip(request)
    audit = licensing.AuditRecord(action=action, ip=ip, request_id=request_id(request))
    request.add_finished_callback(partial(_record_failure, audit))
    data = read_license_request(request)
    audit.describe(data)
    limits = [(LICENSE_IP_POLICY, ip), (LICENSE_KEY_POLICY, audit.key_hint)]
    if action != "validate":
        limits.append((LICENSE_CHURN_POLICY, audit.key_hint))
    audit.limits = limits
    registry = request.registry
    signer, policy = registry["cmsshop.lease_signer"], registry["cmsshop.licensing_policy"]
    try:
        if action == "validate":
            # The hot path: its own short transaction, rate counts included.
            result = licensing.validate(
                registry["cmsshop.engine"],
                signer,
                policy,
                data,
                audit,
                request.find_service(RateLimiter),
                limits,
            )
        else:
            _count_in_request(request, limits, audit)
            run = licensing.activate if action == "activate" else licensing.deactivate
            result = run(request.db, signer, policy, data, audit)
    except SigningUnavailable as exc:
        licensing_log.error("lease signing unavailable: %s", exc)
        if "db" in request.__dict__:
            # Roll back now rather than when pyramid_tm aborts: the error path writes
            # its own records (5xx record, audit entry) and on SQLite they would wait
            # for this transaction's write lock.
            request.db.rollback()
        raise ServiceUnavailable(
            "Licenses cannot be signed right now; nothing was changed. Try again shortly.",
            code="signing_unavailable",
            title="Signing unavailable",
            retry_after=settings["cmsshop.license_retry_after"],
            hints=["Keep using your current lease until it expires and retry later."],
        ) from None
    request.response.status = 201 if result.created else 200
    request.response.cache_control = "no-store"
    return result.body()


def _count_in_request(request, limits, audit: licensing.AuditRecord) -> None:
    """Count activate/deactivate against the rate limits before request.db reads or
    writes anything (see services.ratelimit)."""
    engine = request.registry["cmsshop.engine"]
    if engine.dialect.name == "sqlite":
        # One writer at a time anyway: queue on the in-process lock, then count in the
        # request's own transaction (its first statement, a write, takes SQLite's write
        # lock). If the request fails, the rollback drops the counts and _record_failure
        # counts them again in a transaction of its own.
        licensing.SQLITE_WRITER.acquire()
        request.add_finished_callback(lambda request: licensing.SQLITE_WRITER.release())
        refusal = request.find_service(RateLimiter).count_on(request.db.connection(), limits)
        # Plain SQL on request.db's connection, unseen by the ORM: tell zope.sqlalchemy,
        # so that pyramid_tm commits it.
        mark_changed(request.db)
    else:
        # PostgreSQL: a short transaction of its own, so the counter rows are not
        # locked for the length of this request.
        refusal = request.find_service(RateLimiter).count(limits)
        audit.counted = True
    if refusal is not None:
        raise RateLimited(refusal.retry_after)


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
        keys = request.registry["cmsshop.lease_signer"].jwks()
    except SigningUnavailable as exc:
        licensing_log.error("lease signing keys unavailable: %s", exc)
        raise ServiceUnavailable(
            "The lease signing keys cannot be read right now.",
            code="signing_unavailable",
            title="Signing unavailable",
            retry_after=request.registry.settings["cmsshop.license_retry_after"],
        ) from None
    return json_with_etag(request, keys, max_age=300)
