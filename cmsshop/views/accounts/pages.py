"""The log-in, registration and log-out pages, and the pages of the mailed links
(forgot password, reset password, verify email, a guest receipt's set password): the
JSON routes' schemas and services (cmsshop.services.accounts.login and .tokens),
rendered as forms."""

from __future__ import annotations

from urllib.parse import urlencode

import colander
from pyramid.view import view_config

from cmsshop.errors import ApiError
from cmsshop.models import User
from cmsshop.security import end_session, start_session
from cmsshop.services.accounts import login, tokens
from cmsshop.services.accounts.users import PasswordHasher
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.views.accounts.api import (
    LoginSchema,
    PasswordResetConfirmSchema,
    PasswordResetSchema,
    RegisterSchema,
    VerifyEmailSchema,
    client_ip,
    end_own_session,
    log_in_verified,
)
from cmsshop.views.shared.forms import FormInvalid, field_errors, read_form, safe_next, see_other

NOTICES = {
    "logged_out": "You are logged out.",
    "logged_in": "You are logged in.",
    "email_verified": "Your email address is confirmed. Welcome!",
    "password_reset": "Your password is changed, and every device is logged out. "
    "Log in with the new password.",
    "password_set": "Your password is set and you are logged in.",
}
# What the "check your email" page says after each form that mails a link (fixed texts,
# chosen by a key in the query string; an unknown key gets the generic one).
CHECK_EMAIL_REASONS = {
    "register": "If this email address can be used, we have sent a message to it: follow "
    "the link in it to confirm your address and finish creating your account. If you "
    "already have an account, the message says how to log in.",
    "reset": "If an account exists for this email address, we have sent a link to choose "
    "a new password. The link works once and for a limited time.",
}


def _after_login(request, user: User | None = None) -> str:
    """Where a login lands: a safe ``next`` when there is one, else the console for an
    admin (the shop's own account pages are not where a seller works), else the
    customer's account when the dashboard is on."""
    if user is not None and user.is_admin:
        default = "/admin"
    elif "dashboard" in request.registry.settings["cmsshop.modules"]:
        default = "/account"
    else:
        default = "/"
    return safe_next(request.POST.get("next") or request.GET.get("next"), default)


def _form_page(request, errors: dict, form: dict, status: int = 200) -> dict:
    request.response.status = status
    next_path = safe_next(request.POST.get("next") or request.GET.get("next"), "")
    return {
        "errors": errors,
        "form": form,
        "next": next_path,
        "closed": not request.registry.settings["cmsshop.registration_open"],
        "not_verified": False,
    }


@view_config(route_name="pages.login", request_method="GET", renderer="accounts/login.html")
def login_page(request):
    return _form_page(request, {}, {})


@view_config(route_name="pages.login", request_method="POST", renderer="accounts/login.html")
def login_submit(request):
    try:
        data = read_form(request, LoginSchema())
        user = login.log_in(
            request.db,
            request.find_service(PasswordHasher),
            request.find_service(RateLimiter),
            data["email"],
            data["password"],
            client_ip(request),
        )
    except FormInvalid as exc:
        return _form_page(request, exc.errors, exc.form, 422)
    except ApiError as exc:  # wrong password (401), too many attempts (429), unverified (403)
        form = {"email": request.POST.get("email", "")}
        for name, value in exc.headers.items():
            request.response.headers[name] = value
        page = _form_page(request, {"form": exc.message}, form, exc.status)
        page["not_verified"] = isinstance(exc, login.EmailNotVerified)
        return page
    start_session(request, user)
    return see_other(request, _after_login(request, user))


@view_config(route_name="pages.register", request_method="GET", renderer="accounts/register.html")
def register_page(request):
    return _form_page(request, {}, {})


@view_config(route_name="pages.register", request_method="POST", renderer="accounts/register.html")
def register_submit(request):
    if not request.registry.settings["cmsshop.registration_open"]:
        return _form_page(request, {}, {}, 403)
    try:
        data = read_form(request, RegisterSchema())
        # New or taken, the same next page: nothing here says whether the email has an
        # account (see services.accounts.login.register); the mail does, to its owner.
        login.register(
            request.db,
            request.registry.settings,
            request.find_service(PasswordHasher),
            request.find_service(RateLimiter),
            data["email"],
            data["password"],
            data["name"],
            client_ip(request),
            next_path=safe_next(request.POST.get("next"), ""),
        )
    except FormInvalid as exc:
        return _form_page(request, exc.errors, exc.form, 422)
    except ApiError as exc:
        return _form_page(request, field_errors(exc), posted_form(request), exc.status)
    return see_other(request, "/check-email?reason=register")


def posted_form(request) -> dict:
    return {name: request.POST.get(name, "") for name in ("email", "name")}


@view_config(route_name="pages.logout", request_method="POST")
def logout_submit(request):
    end_session(request)
    return see_other(request, "/", notice="logged_out")


@view_config(
    route_name="pages.check_email", request_method="GET", renderer="accounts/check_email.html"
)
def check_email_page(request):
    reason = request.GET.get("reason", "")
    return {"message": CHECK_EMAIL_REASONS.get(reason, CHECK_EMAIL_REASONS["reset"])}


@view_config(
    route_name="pages.forgot_password",
    request_method="GET",
    renderer="accounts/forgot_password.html",
)
def forgot_password_page(request):
    return {"errors": {}, "form": {}}


@view_config(
    route_name="pages.forgot_password",
    request_method="POST",
    renderer="accounts/forgot_password.html",
)
def forgot_password_submit(request):
    try:
        data = read_form(request, PasswordResetSchema())
    except FormInvalid as exc:
        request.response.status = 422
        return {"errors": exc.errors, "form": exc.form}
    tokens.request_password_reset(
        request.db,
        request.registry.settings,
        request.find_service(RateLimiter),
        data["email"],
        client_ip(request),
    )
    return see_other(request, "/check-email?reason=reset")


def _link_problem(request, exc: ApiError, template_vars: dict) -> dict:
    """A used, expired or unknown link: the page says so and offers a way on."""
    request.response.status = exc.status
    return {**template_vars, "problem": exc.message, "problem_code": exc.code}


def _query_token(request) -> str:
    return request.GET.get("token", "")


@view_config(
    route_name="pages.reset_password", request_method="GET", renderer="accounts/reset_password.html"
)
def reset_password_page(request):
    token = _query_token(request)
    page = {"errors": {}, "form": {"token": token}, "problem": None, "problem_code": None}
    try:
        tokens.find_token(request.db, tokens.PASSWORD_RESET, token)  # a look, not a use
    except ApiError as exc:
        return _link_problem(request, exc, page)
    return page


@view_config(
    route_name="pages.reset_password",
    request_method="POST",
    renderer="accounts/reset_password.html",
)
def reset_password_submit(request):
    page = {"errors": {}, "form": {}, "problem": None, "problem_code": None}
    try:
        data = read_form(request, PasswordResetConfirmSchema())
        user = tokens.reset_password(
            request.db, request.find_service(PasswordHasher), data["token"], data["password"]
        )
    except FormInvalid as exc:
        if "token" in exc.errors:
            return _link_problem(request, tokens.InvalidToken(), page)
        request.response.status = 422
        return {**page, "errors": exc.errors, "form": exc.form}
    except ApiError as exc:
        return _link_problem(request, exc, page)
    end_own_session(request, user)
    return see_other(request, "/login", notice="password_reset")


def _set_password_vars(request, token: str) -> dict:
    next_path = safe_next(request.params.get("next"), "")
    return {
        "errors": {},
        "form": {"token": token},
        "next": next_path,
        # A spent link's way on: log in, then the same order.
        "login_link": f"/login?{urlencode({'next': next_path})}" if next_path else "/login",
        "problem": None,
        "problem_code": None,
        "address": None,
        "other_user": None,
    }


@view_config(
    route_name="pages.set_password", request_method="GET", renderer="accounts/set_password.html"
)
def set_password_page(request):
    """The form behind a guest receipt's link: it names the account's address (the link
    is anyone's to forward) and who is logged in, if someone else is. A look at the
    token, not a use: mail scanners open links."""
    page = _set_password_vars(request, _query_token(request))
    try:
        owner = tokens.find_set_password_token(request.db, page["form"]["token"])
    except ApiError as exc:
        return _link_problem(request, exc, page)
    return {**page, "address": owner.email, "other_user": _other_user(request, owner.id)}


@view_config(
    route_name="pages.set_password", request_method="POST", renderer="accounts/set_password.html"
)
def set_password_submit(request):
    """Set the first password, then log in as the account (ending whoever's session
    this browser had: the page said so) and go on to ``next``, the order, a local path
    only."""
    page = _set_password_vars(request, "")
    try:
        data = read_form(request, PasswordResetConfirmSchema())
        user = tokens.set_first_password(
            request.db, request.find_service(PasswordHasher), data["token"], data["password"]
        )
    except FormInvalid as exc:
        if "token" in exc.errors:
            return _link_problem(request, tokens.InvalidToken(), page)
        try:
            owner = tokens.find_set_password_token(request.db, exc.form.get("token"))
        except ApiError as problem:
            return _link_problem(request, problem, page)
        request.response.status = 422
        return {
            **page,
            "errors": exc.errors,
            "form": exc.form,
            "address": owner.email,
            "other_user": _other_user(request, owner.id),
        }
    except ApiError as exc:
        return _link_problem(request, exc, page)
    start_session(request, user)
    return see_other(request, page["next"] or _after_login(request), notice="password_set")


class FormSwitch(colander.SchemaType):
    """The "log out and log in as" button: pressed, it posts ``switch=1``; the other
    button posts nothing, so absent falls to the node's ``missing`` (false)."""

    def deserialize(self, node, cstruct):
        if cstruct is colander.null:
            return cstruct
        if cstruct == "1":
            return True
        raise colander.Invalid(node, "must be 1 or absent")


def verify_form_schema() -> colander.SchemaNode:
    """The JSON route's VerifyEmailSchema, its ``switch`` read from a button."""
    # A clone: the JSON route's ``switch`` must stay a strict boolean.
    schema = VerifyEmailSchema().clone()
    schema["switch"].typ = FormSwitch()
    return schema


def _verify_vars(request, token: str) -> dict:
    return {
        "token": token,
        "next": safe_next(request.params.get("next"), ""),
        "problem": None,
        "problem_code": None,
        "address": None,
        # Who is logged in, when not the link's owner: the page then asks before
        # switching (a link is anyone's to send).
        "other_user": None,
        "confirmed": False,
    }


def _other_user(request, user_id: int):
    current = request.user
    return current if current is not None and current.id != user_id else None


@view_config(
    route_name="pages.verify_email", request_method="GET", renderer="accounts/verify_email.html"
)
def verify_email_page(request):
    """A button to press, not the verification itself: mail scanners open links, and a
    GET must not use the token up. It names the address the link confirms, and who is
    logged in if that is someone else."""
    page = _verify_vars(request, _query_token(request))
    try:
        row = tokens.find_token(request.db, tokens.VERIFY_EMAIL, page["token"])
    except ApiError as exc:
        return _link_problem(request, exc, page)
    owner = request.db.get(User, row.user_id)
    return {**page, "address": owner.email, "other_user": _other_user(request, owner.id)}


@view_config(
    route_name="pages.verify_email", request_method="POST", renderer="accounts/verify_email.html"
)
def verify_email_submit(request):
    page = _verify_vars(request, "")
    try:
        data = read_form(request, verify_form_schema())
        user = tokens.verify_email(request.db, data["token"])
    except FormInvalid as exc:
        if "token" in exc.errors:
            return _link_problem(request, tokens.InvalidToken(), page)
        request.response.status = 422
        return {**page, "problem": "Press one of the page's buttons.", "problem_code": "form"}
    except ApiError as exc:
        return _link_problem(request, exc, page)
    other_user = _other_user(request, user.id)
    if not log_in_verified(request, user, data["switch"]):
        # Confirmed, and the visitor stays who they were: the page says both.
        return {**page, "confirmed": True, "address": user.email, "other_user": other_user}
    return see_other(request, page["next"] or _after_login(request), notice="email_verified")
