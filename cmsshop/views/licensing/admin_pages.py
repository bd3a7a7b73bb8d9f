"""Admin pages for licenses (/admin/licenses): search, one license with its activations
and audit log, and the forms that change it -- the JSON routes' schema and service
(cmsshop.views.licensing.admin_api, cmsshop.services.licensing.admin)."""

from __future__ import annotations

from urllib.parse import quote

from pyramid.httpexceptions import HTTPNotFound
from pyramid.view import view_config

from cmsshop.models.meta import MAX_ID
from cmsshop.security import ADMIN
from cmsshop.services.audit import queries
from cmsshop.services.licensing import admin as license_admin
from cmsshop.views.audit.admin_pages import audit_values
from cmsshop.views.licensing.admin_api import (
    acting_admin,
    license_change_schema,
    license_key,
    license_not_found,
    read_search,
    refusal_error,
)
from cmsshop.views.shared.confirm import confirm_page, confirmed
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
    "license_deactivate": "The installation is deactivated; its seat is free.",
}


# The actions a page post runs only after the confirm step (views/shared/confirm.py).
CONFIRMED_ACTIONS = ("suspend", "revoke", "reset")


def license_path(key: str) -> str:
    return f"/admin/licenses/{quote(key, safe='')}"


def _installations(count: int) -> str:
    return f"{count} active installation{'' if count == 1 else 's'}"


def _stop_validating(owner: str, count: int) -> str:
    """Who stops validating: "alice@example.com's 2 active installations stop ..." """
    if count == 0:
        return "it has no active installation now"
    if count == 1:
        return f"{owner} 1 active installation stops validating at its next check"
    return f"{owner} {count} active installations stop validating at their next check"


def _domains(active: list) -> str:
    names = [a.domain for a in active[:10]]
    more = len(active) - len(names)
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")


def _confirm_action(request, key: str, action: str):
    """The confirmation of ``action`` on the license: what happens to whose installations."""
    try:
        detail = license_admin.license_detail(request.db, key)
    except license_admin.LicenseMissing:
        raise license_not_found() from None
    license = detail.license
    if (action == "revoke" and license.status == "revoked") or (
        action == "suspend" and license.status != "active"
    ):
        return None  # refused anyway: the action's own message says why, nothing to confirm
    active = [a for a in detail.activations if a.active]
    owner = f"{detail.customer.email}'s" if detail.customer else "its"
    named = f"license {license.key} ({detail.product.name})"
    if action == "revoke":
        title = f"Revoke license {license.key}?"
        consequences = [
            f"Revoke {named}: {_stop_validating(owner, len(active))}, and no site can "
            "activate it again.",
            "A revoked license cannot be reinstated, extended or given seats. "
            "This cannot be undone.",
        ]
        button = "Revoke the license for good"
    elif action == "suspend":
        title = f"Suspend license {license.key}?"
        consequences = [
            f"Suspend {named}: {_stop_validating(owner, len(active))}, until you reinstate it."
        ]
        button = "Suspend the license"
    else:
        title = f"Deactivate every installation of license {license.key}?"
        consequences = (
            [
                f"Deactivate all {_installations(len(active))} of {named} "
                f"({_domains(active)}): each stops validating at its next check and gives "
                "its seat back.",
                f"Each site has to activate again to work; the license stays {license.status}.",
            ]
            if active
            else [f"The {named} has no active installation now: nothing but its audit changes."]
        )
        button = "Deactivate all installations"
    path = license_path(key)
    return confirm_page(
        request,
        title=title,
        consequences=consequences,
        action=f"{path}/{action}",
        button=button,
        cancel=path,
        section="licenses",
    )


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
        **audit_values(request.db, queries.license_entries(request.db, detail.license)),
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
    if action in CONFIRMED_ACTIONS and not confirmed(request):
        confirmation = _confirm_action(request, key, action)
        if confirmation is not None:
            return confirmation
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


def _activation_id(request) -> int:
    """The activation id in the path, or 404 (anything but a stored id names none)."""
    raw = request.matchdict["activation"]
    if not raw.isascii() or not raw.isdigit() or len(raw) > 10 or not 0 < int(raw) <= MAX_ID:
        raise HTTPNotFound()
    return int(raw)


@view_config(
    route_name="pages.admin_license_deactivate",
    request_method="POST",
    renderer="admin/licensing/detail.html",
    permission=ADMIN,
)
def deactivate_installation(request):
    """One installation deactivated from the license page's activations table, after the
    confirm step naming its domain."""
    key = license_key(request)
    activation_id = _activation_id(request)
    path = license_path(key)
    if not confirmed(request):
        try:
            detail = license_admin.license_detail(request.db, key)
        except license_admin.LicenseMissing:
            raise license_not_found() from None
        activation = next((a for a in detail.activations if a.id == activation_id), None)
        if activation is None:
            raise HTTPNotFound()
        if activation.active:
            return confirm_page(
                request,
                title=f"Deactivate {activation.domain}?",
                consequences=[
                    f"Deactivate the installation at {activation.domain} "
                    f"({activation.environment}) of license {detail.license.key} "
                    f"({detail.product.name}): it stops validating at its next check and "
                    "gives its seat back.",
                    "The site has to activate again to work; the license and its other "
                    "installations are not changed.",
                ],
                action=f"{path}/activations/{activation_id}/deactivate",
                button=f"Deactivate {activation.domain}",
                cancel=path,
                section="licenses",
            )
    try:
        license_admin.deactivate_activation(request.db, key, acting_admin(request), activation_id)
    except license_admin.LicenseMissing:
        raise license_not_found() from None
    except license_admin.ActionRefused as exc:
        error = refusal_error(exc)
        request.response.status = error.status
        return _detail_page(request, key, {exc.field: exc.message})
    return see_other(request, path, notice="license_deactivate")
