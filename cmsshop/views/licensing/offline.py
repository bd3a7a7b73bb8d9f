"""Offline activation from the dashboard (services/licensing/offline.py): the JSON route
``POST /api/dashboard/licenses/{key}/offline-activation`` and the page
``/account/licenses/{key}/offline`` where the customer pastes the code and gets the lease
file. Both need the licensing module (its signer and policy) besides the dashboard."""

from __future__ import annotations

import json
from functools import partial

import colander
from pyramid.renderers import render_to_response
from pyramid.response import Response
from pyramid.view import view_config

from cmsshop.db import own_transaction
from cmsshop.errors import ApiError, ValidationFailed
from cmsshop.modules import ModuleDisabled
from cmsshop.security import CUSTOMER
from cmsshop.services.licensing import counting
from cmsshop.services.licensing.offline import (
    FIELD,
    MAX_CODE_LENGTH,
    OFFLINE_AUDIT_ACTION,
    OfflineLease,
    activate_offline,
    parse_request_code,
)
from cmsshop.services.licensing.records import AuditRecord, Licensing, LicensingPolicy
from cmsshop.services.licensing.signing import LeaseSigner
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.util import isoformat_z
from cmsshop.views.errors import request_id
from cmsshop.views.licensing.openapi import LEASE_FILE_FORMAT
from cmsshop.views.shared.forms import field_errors, posted_value
from cmsshop.views.shared.json import StrictMapping, StrictString, read_json


class OfflineActivationSchema(colander.MappingSchema):
    schema_type = StrictMapping
    requestCode = colander.SchemaNode(  # noqa: N815 - JSON name
        StrictString(), validator=colander.Length(min=1, max=MAX_CODE_LENGTH * 2)
    )


def _record_failure(audit: AuditRecord, request) -> None:
    """Audit a refused offline activation once the request has ended (its transaction
    rolled back), as the licensing routes do."""
    exc = getattr(request, "exception", None)
    if exc is None or audit.product is None:
        return
    own = partial(own_transaction, request.registry)
    counting.record_failure(request.find_service(RateLimiter), own, audit, exc)


def offline_activation(request, code: str) -> OfflineLease:
    """Activate the installation of ``code`` on the customer's license in the path."""
    try:
        licensing = Licensing(
            request.registry["cmsshop.engine"],
            request.find_service(LeaseSigner),
            request.find_service(LicensingPolicy),
        )
    except LookupError:
        raise ModuleDisabled(
            "Offline activation needs the licensing module, which is not enabled.",
            title="Module 'licensing' is disabled",
            hints=["Operators: add `licensing` to `cmsshop.modules` and restart."],
        ) from None
    audit = AuditRecord(
        action=OFFLINE_AUDIT_ACTION,
        ip=request.client_addr or "unknown",
        request_id=request_id(request),
    )
    data = parse_request_code(code)
    request.add_finished_callback(partial(_record_failure, audit))
    counting.admit_call(request.find_service(RateLimiter), data, audit)
    days = request.registry.settings["cmsshop.license_offline_lease_days"]
    return activate_offline(
        request.db, licensing, request.user.id, request.matchdict["key"], data, audit, days
    )


def lease_file(lease: OfflineLease) -> dict:
    """The file the customer carries to the offline installation."""
    result = lease.result
    return {
        "format": LEASE_FILE_FORMAT,
        "version": 1,
        "product": result.product,
        "domain": result.activation.domain,
        "activationId": result.activation.id,
        "lease": result.lease,
        "expiresAt": isoformat_z(result.lease_expires_at),
    }


def lease_file_response(request, lease: OfflineLease) -> Response:
    body = json.dumps(lease_file(lease), indent=2) + "\n"
    response = Response(body=body.encode(), content_type="application/json", charset="utf-8")
    name = f"{lease.result.product}-{lease.result.activation.domain}.lease.json"
    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in name)
    response.content_disposition = f'attachment; filename="{safe}"'
    response.cache_control = "no-store"
    return response


@view_config(
    route_name="dashboard.offline_activation",
    request_method="POST",
    renderer="json",
    permission=CUSTOMER,
)
def offline_activation_json(request):
    data = read_json(request, OfflineActivationSchema())
    lease = offline_activation(request, data["requestCode"])
    if request.params.get("download") == "1":
        return lease_file_response(request, lease)
    request.response.cache_control = "no-store"
    return lease_file(lease)


# --- the page ----------------------------------------------------------------------------


@view_config(
    route_name="account.offline",
    request_method="GET",
    renderer="licensing/offline.html",
    permission=CUSTOMER,
)
def offline_page(request, errors: dict | None = None, form: dict | None = None):
    request.response.cache_control = "no-store"
    return {
        "account_section": "licenses",
        "license_key": request.matchdict["key"],
        "errors": errors or {},
        "form": form or {},
    }


@view_config(route_name="account.offline", request_method="POST", permission=CUSTOMER)
def offline_submit(request):
    code = posted_value(request, FIELD)
    try:
        if not code.strip():
            raise ValidationFailed({FIELD: "paste the request code your product shows"})
        lease = offline_activation(request, code)
    except ApiError as exc:
        if exc.status >= 500 or exc.code in ("license_not_found", "module_disabled"):
            raise
        errors = field_errors(exc)
        if FIELD not in errors:
            errors = {FIELD: exc.message}
        request.response.status = exc.status
        response = offline_page_response(request, errors, {FIELD: code[: MAX_CODE_LENGTH * 2]})
        response.headers.update(getattr(exc, "headers", None) or {})
        return response
    return lease_file_response(request, lease)


def offline_page_response(request, errors: dict, form: dict):
    status = request.response.status
    response = render_to_response(
        "licensing/offline.html", offline_page(request, errors, form), request=request
    )
    response.status = status
    return response
