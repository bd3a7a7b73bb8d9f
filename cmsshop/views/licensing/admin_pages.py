"""Admin pages for licenses (/admin/licenses): search, one license with its activations
and audit log, and the forms that change it -- the JSON routes' schema and service
(cmsshop.views.licensing.admin_api, cmsshop.services.licensing.admin)."""

from __future__ import annotations

from urllib.parse import quote

from pyramid.httpexceptions import HTTPNotFound
from pyramid.view import view_config

from cmsshop.security import ADMIN
from cmsshop.services.licensing import admin as license_admin
from cmsshop.views.licensing.admin_api import (
    acting_admin,
    license_change_schema,
    license_key,
    license_not_found,
    read_search,
    refusal_error,
)
from cmsshop.views.shared.forms import FormInvalid, read_form, see_other
from cmsshop.views.shared.json import query_value, read_page_request

NOTICES = {
    "license_suspend": "The license is suspended.",
    "license_reinstate": "The license is active again.",
    "license_revoke": "The license is revoked.",
    "license_extend": "The expiry is extended.",
    "license_seats": "The seat limit is changed.",
    "license_reset": "Every activation of the license is deactivated.",
    "license_features": "The features are changed; runtimes get them with their next lease.",
    "license_resolve": "The review notes are resolved.",
}


def license_path(key: str) -> str:
    return f"/admin/licenses/{quote(key, safe='')}"


@view_config(
    route_name="pages.admin_licenses",
    request_method="GET",
    renderer="admin/licensing/index.html",
    permission=ADMIN,
)
def licenses_page(request):
    paging = read_page_request(request)
    q = read_search(request)
    # ?review=open: the dashboard's list of licenses to review.
    to_review = query_value(request, "review") == "open"
    page = license_admin.search_licenses(request.db, paging, q, to_review=to_review)
    return {"admin_section": "licenses", "page": page, "q": q or "", "to_review": to_review}


def _detail_page(request, key: str, errors: dict | None = None, form: dict | None = None):
    try:
        detail = license_admin.license_detail(request.db, key)
    except license_admin.LicenseMissing:
        raise license_not_found() from None
    return {
        "admin_section": "licenses",
        "detail": detail,
        "license_url": license_path(key),
        "errors": errors or {},
        "form": form or {},
    }


@view_config(
    route_name="pages.admin_license",
    request_method="GET",
    renderer="admin/licensing/detail.html",
    permission=ADMIN,
)
def license_page(request):
    return _detail_page(request, license_key(request))


@view_config(
    route_name="pages.admin_license_action",
    request_method="POST",
    renderer="admin/licensing/detail.html",
    permission=ADMIN,
)
def license_action_submit(request):
    key = license_key(request)
    action = request.matchdict["action"]
    if action not in license_admin.ACTIONS:
        raise HTTPNotFound()
    try:
        values = read_form(request, license_change_schema(form=True))
        if action == "features" and values["features"] is None:
            values["features"] = []  # an emptied field clears the flags
        license_admin.apply_action(request.db, key, acting_admin(request), action, values)
    except FormInvalid as exc:
        request.response.status = 422
        return _detail_page(request, key, exc.errors, exc.form)
    except license_admin.LicenseMissing:
        raise license_not_found() from None
    except license_admin.ActionRefused as exc:
        error = refusal_error(exc)
        request.response.status = error.status
        fields = ("days", "until", "maxActivations", "features")
        typed = {name: request.POST.get(name, "") for name in fields}
        # Refused before any write (and a 4xx never commits): the page shows the license
        # as it is.
        return _detail_page(request, key, {exc.field: exc.message}, typed)
    return see_other(request, license_path(key), notice=f"license_{action}")
