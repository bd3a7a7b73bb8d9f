"""Admin routes for licenses: search, one license (activations, audit log), and the
changes an admin makes by hand -- all thin over cmsshop.services.licensing.admin."""

from __future__ import annotations

import colander
from pyramid.view import view_config

from cmsshop.errors import Conflict, NotFound, ValidationFailed
from cmsshop.security import ADMIN
from cmsshop.services.licensing import admin as license_admin
from cmsshop.util import isoformat_z
from cmsshop.views.errors import request_id
from cmsshop.views.licensing.api import client_ip
from cmsshop.views.licensing.openapi import MAX_KEY_LENGTH
from cmsshop.views.shared.json import (
    FeatureList,
    StrictInt,
    StrictMapping,
    StrictString,
    is_json_content_type,
    is_storable_text,
    page_json,
    query_value,
    read_json,
    read_page_request,
    validate,
)
from cmsshop.views.shared.schema import IsoDate


class LicenseSearchSchema(colander.MappingSchema):
    q = colander.SchemaNode(StrictString(), missing=None, validator=colander.Length(max=320))


def license_change_schema(form: bool = False) -> colander.SchemaNode:
    """The body of ``POST /api/admin/licenses/{key}/{action}`` (a form's fields on a
    page: the same names and rules, integers typed as text)."""
    integer = colander.Int if form else StrictInt
    schema = colander.SchemaNode(StrictMapping())
    schema.add(
        colander.SchemaNode(
            integer(),
            name="days",
            missing=None,
            validator=colander.Range(
                min=1, max=license_admin.MAX_EXTEND_DAYS, min_err="must be at least 1 day"
            ),
        )
    )
    schema.add(colander.SchemaNode(IsoDate(), name="until", missing=None))
    schema.add(
        colander.SchemaNode(
            integer(),
            name="maxActivations",
            missing=None,
            validator=colander.Range(
                min=0, max=license_admin.MAX_SEATS, min_err="must be 0 or more"
            ),
        )
    )
    schema.add(colander.SchemaNode(FeatureList(form), name="features", missing=None))
    return schema


# --- helpers shared with the pages ------------------------------------------------------------


def license_key(request) -> str:
    """The key in the path, or 404 (an over-long or unstorable key names no license)."""
    key = request.matchdict["key"]
    if not key or len(key) > MAX_KEY_LENGTH or not is_storable_text(key):
        raise license_not_found()
    return key


def license_not_found() -> NotFound:
    return NotFound("No license has this key.", code="license_not_found")


def acting_admin(request) -> license_admin.Admin:
    return license_admin.Admin(
        id=request.user.id,
        email=request.user.email,
        ip=client_ip(request),
        request_id=request_id(request),
    )


def read_search(request) -> str | None:
    raw = query_value(request, "q")
    data = validate(LicenseSearchSchema(), {} if raw in (None, "") else {"q": raw})
    return data["q"]


# --- bodies ---------------------------------------------------------------------------------


def customer_body(user) -> dict | None:
    return None if user is None else {"id": user.id, "email": user.email, "name": user.name}


def license_summary_body(item: license_admin.LicenseSummary) -> dict:
    license = item.license
    return {
        "key": license.key,
        "status": license.status,
        "product": item.product.slug,
        "customer": customer_body(item.customer),
        "maxActivations": license.max_activations,
        "activationsUsed": item.activations_used,
        "features": list(license.features or []),
        "expiresAt": isoformat_z(license.expires_at),
        "createdAt": isoformat_z(license.created_at),
    }


def license_detail_body(detail: license_admin.LicenseDetail) -> dict:
    summary = license_admin.LicenseSummary(
        detail.license, detail.product, detail.customer, detail.activations_used
    )
    return {
        **license_summary_body(summary),
        "activations": [
            {
                "id": a.id,
                "domain": a.domain,
                "environment": a.environment,
                "active": a.active,
                "activatedAt": isoformat_z(a.activated_at),
                "lastValidatedAt": isoformat_z(a.last_validated_at),
                "deactivatedAt": isoformat_z(a.deactivated_at),
            }
            for a in detail.activations
        ],
        "audit": [
            {
                "id": line.entry.id,
                "createdAt": isoformat_z(line.entry.created_at),
                "action": line.entry.action,
                "outcome": line.entry.outcome,
                "adminId": line.entry.admin_id,
                "adminEmail": line.admin_email,
                "detail": line.entry.detail,
                "domain": line.entry.domain,
                "ip": line.entry.ip,
            }
            for line in detail.audit
        ],
    }


# --- routes -----------------------------------------------------------------------------------


@view_config(
    route_name="licensing.admin_licenses", request_method="GET", renderer="json", permission=ADMIN
)
def list_licenses(request):
    paging = read_page_request(request)
    page = license_admin.search_licenses(request.db, paging, read_search(request))
    return page_json(page, license_summary_body)


@view_config(
    route_name="licensing.admin_license", request_method="GET", renderer="json", permission=ADMIN
)
def get_license(request):
    try:
        detail = license_admin.license_detail(request.db, license_key(request))
    except license_admin.LicenseMissing:
        raise license_not_found() from None
    return license_detail_body(detail)


@view_config(
    route_name="licensing.admin_license_action",
    request_method="POST",
    renderer="json",
    permission=ADMIN,
)
def change_license(request):
    key = license_key(request)
    action = request.matchdict["action"]
    if action not in license_admin.ACTIONS:
        raise NotFound(
            f"No such license action; the actions are {', '.join(license_admin.ACTIONS)}.",
        )
    has_body = bool(request.content_length) or is_json_content_type(request.content_type)
    values = read_json(request, license_change_schema()) if has_body else {}
    try:
        license_admin.apply_action(request.db, key, acting_admin(request), action, values)
    except license_admin.LicenseMissing:
        raise license_not_found() from None
    except license_admin.ActionRefused as exc:
        raise refusal_error(exc) from None
    return license_detail_body(license_admin.license_detail(request.db, key))


def refusal_error(exc: license_admin.ActionRefused):
    """A value out of range is a 422 on its field; an action that does not fit the
    license's status is a 409 ``license_action_refused``."""
    if exc.field != "form":
        return ValidationFailed({exc.field: exc.message})
    return Conflict(exc.message, code="license_action_refused", title="Action refused")
