"""The account settings pages under ``/account/settings``: name, e-mail change (and the
page of its mailed link), password change, the data download and deleting the account.
The JSON routes' schemas and services (views.accounts.settings_api), rendered as forms
with post/redirect/get.

Served by the always-on accounts module, before the dashboard module's prefix, so an
owner can manage their account whether or not the dashboard is on (like
/account/billing): the templates then leave out the account navigation."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop.errors import ApiError, ValidationFailed
from cmsshop.security import CUSTOMER, end_session
from cmsshop.services.accounts import erasure, profile, tokens
from cmsshop.services.accounts.users import PasswordHasher
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.views.accounts.api import client_ip
from cmsshop.views.accounts.settings_api import (
    DeleteSchema,
    EmailChangeSchema,
    EmailConfirmSchema,
    NameSchema,
    PasswordChangeSchema,
    export_response,
    own_session_id,
)
from cmsshop.views.shared.forms import FormInvalid, field_errors, read_form, see_other

NOTICES = {
    "name_saved": "Your name was saved.",
    "email_change_sent": "We have sent a link to your new address. Your address changes "
    "when you open it.",
    "email_changed": "Your email address is changed.",
    "password_changed": "Your password is changed. Every other device is logged out.",
    "account_deleted": "Your account is deleted.",
}
SETTINGS = "/account/settings"


def _failed(request, exc: ApiError) -> dict[str, str]:
    """A service's refusal as the form's errors, its status and headers on the page."""
    request.response.status = exc.status
    for name, value in exc.headers.items():
        request.response.headers[name] = value
    return field_errors(exc)


def _settings_page(request, form: dict | None = None, errors: dict | None = None) -> dict:
    user = request.user
    return {
        "form": form if form is not None else {"name": user.name},
        "errors": errors or {},
        "activity": [
            (entry, profile.describe(entry.action))
            for entry in profile.recent_activity(request.db, user)
        ],
    }


@view_config(
    route_name="account.settings",
    request_method="GET",
    renderer="accounts/settings.html",
    permission=CUSTOMER,
)
def settings_page(request):
    return _settings_page(request)


@view_config(
    route_name="account.settings",
    request_method="POST",
    renderer="accounts/settings.html",
    permission=CUSTOMER,
)
def save_name(request):
    try:
        data = read_form(request, NameSchema())
        profile.change_name(request.db, request.user, data["name"], client_ip(request))
    except FormInvalid as exc:
        request.response.status = 422
        return _settings_page(request, exc.form, exc.errors)
    except ApiError as exc:
        return _settings_page(
            request, {"name": request.POST.get("name", "")}, _failed(request, exc)
        )
    return see_other(request, SETTINGS, notice="name_saved")


@view_config(
    route_name="account.settings_email",
    request_method="GET",
    renderer="accounts/settings_email.html",
    permission=CUSTOMER,
)
def email_page(request):
    return {"form": {}, "errors": {}}


@view_config(
    route_name="account.settings_email",
    request_method="POST",
    renderer="accounts/settings_email.html",
    permission=CUSTOMER,
)
def request_email_change(request):
    try:
        data = read_form(request, EmailChangeSchema())
        profile.request_email_change(
            request.db,
            request.registry.settings,
            request.find_service(PasswordHasher),
            request.find_service(RateLimiter),
            request.user,
            data["newEmail"],
            data["currentPassword"],
            client_ip(request),
        )
    except FormInvalid as exc:
        request.response.status = 422
        return {"form": exc.form, "errors": exc.errors}
    except ApiError as exc:
        return {
            "form": {"newEmail": request.POST.get("newEmail", "")},
            "errors": _failed(request, exc),
        }
    return see_other(request, SETTINGS, notice="email_change_sent")


def _confirm_vars(token: str) -> dict:
    return {
        "token": token,
        "problem": None,
        "problem_code": None,
        "new_email": None,
        "confirmed": False,
    }


@view_config(
    route_name="account.settings_email_confirm",
    request_method="GET",
    renderer="accounts/confirm_email_change.html",
)
def confirm_email_page(request):
    """A button to press, not the change itself: mail scanners open links, and a GET
    must not use the token up. It names the new address."""
    page = _confirm_vars(request.GET.get("token", ""))
    try:
        row = profile.find_email_change(request.db, page["token"])
    except ApiError as exc:
        request.response.status = exc.status
        return {**page, "problem": exc.message, "problem_code": exc.code}
    return {**page, "new_email": row.new_email}


@view_config(
    route_name="account.settings_email_confirm",
    request_method="POST",
    renderer="accounts/confirm_email_change.html",
)
def confirm_email_change(request):
    page = _confirm_vars("")
    try:
        data = read_form(request, EmailConfirmSchema())
        user = profile.confirm_email_change(
            request.db, request.registry.settings, data["token"], client_ip(request)
        )
    except FormInvalid:
        exc = tokens.InvalidToken()
        request.response.status = exc.status
        return {**page, "problem": exc.message, "problem_code": exc.code}
    except ValidationFailed as exc:
        request.response.status = exc.status
        return {**page, "problem": exc.extra["errors"]["newEmail"], "problem_code": "taken"}
    except ApiError as exc:
        request.response.status = exc.status
        return {**page, "problem": exc.message, "problem_code": exc.code}
    owner = request.user is not None and request.user.id == user.id
    if owner:
        return see_other(request, SETTINGS, notice="email_changed")
    # Opened in a browser logged in as someone else, or as nobody: the page says what
    # changed and leaves that browser's session alone.
    return {**page, "confirmed": True, "new_email": user.email}


@view_config(
    route_name="account.settings_password",
    request_method="GET",
    renderer="accounts/settings_password.html",
    permission=CUSTOMER,
)
def password_page(request):
    return {"form": {}, "errors": {}}


@view_config(
    route_name="account.settings_password",
    request_method="POST",
    renderer="accounts/settings_password.html",
    permission=CUSTOMER,
)
def change_password(request):
    try:
        data = read_form(request, PasswordChangeSchema())
        profile.change_password(
            request.db,
            request.find_service(PasswordHasher),
            request.find_service(RateLimiter),
            request.user,
            data["currentPassword"],
            data["newPassword"],
            own_session_id(request),
            client_ip(request),
        )
    except FormInvalid as exc:
        request.response.status = 422
        return {"form": {}, "errors": exc.errors}
    except ApiError as exc:
        return {"form": {}, "errors": _failed(request, exc)}
    return see_other(request, SETTINGS, notice="password_changed")


@view_config(route_name="account.settings_export", request_method="GET", permission=CUSTOMER)
def export_data(request):
    return export_response(request)


@view_config(
    route_name="account.settings_delete",
    request_method="GET",
    renderer="accounts/settings_delete.html",
    permission=CUSTOMER,
)
def delete_page(request):
    return {"form": {}, "errors": {}, "confirmation_word": erasure.CONFIRMATION}


@view_config(
    route_name="account.settings_delete",
    request_method="POST",
    renderer="accounts/settings_delete.html",
    permission=CUSTOMER,
)
def delete_account(request):
    page = {"form": {}, "errors": {}, "confirmation_word": erasure.CONFIRMATION}
    try:
        data = read_form(request, DeleteSchema())
        erasure.delete_account(
            request.db,
            request.find_service(PasswordHasher),
            request.find_service(RateLimiter),
            request.user,
            data["password"],
            data["confirmation"],
            client_ip(request),
        )
    except FormInvalid as exc:
        request.response.status = 422
        return {**page, "errors": exc.errors}
    except ApiError as exc:
        return {**page, "errors": _failed(request, exc)}
    end_session(request)
    return see_other(request, "/", notice="account_deleted")
