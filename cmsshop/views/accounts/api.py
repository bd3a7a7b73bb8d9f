"""Registration, login, logout, the current session, and the mailed links: password
reset and email verification (services.accounts.login and .tokens)."""

from __future__ import annotations

import colander
from pyramid.csrf import get_csrf_token
from pyramid.view import view_config

from cmsshop.errors import ApiError
from cmsshop.security import end_session, start_session
from cmsshop.services.accounts import login, tokens
from cmsshop.services.accounts.users import PasswordHasher
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.views.shared.bodies import user_body
from cmsshop.views.shared.json import StrictBool, StrictMapping, StrictString, read_json

EMAIL = colander.All(colander.Email(), colander.Length(max=320))
NEW_PASSWORD = colander.Length(min=10, max=1024)
# Far longer than any token we mail (43 characters); the service checks the alphabet.
TOKEN = colander.Length(min=1, max=256)


class LoginSchema(colander.MappingSchema):
    schema_type = StrictMapping
    email = colander.SchemaNode(StrictString(), validator=colander.Length(min=3, max=320))
    password = colander.SchemaNode(StrictString(), validator=colander.Length(min=1, max=1024))


class RegisterSchema(colander.MappingSchema):
    schema_type = StrictMapping
    email = colander.SchemaNode(StrictString(), validator=EMAIL)
    password = colander.SchemaNode(StrictString(), validator=NEW_PASSWORD)
    name = colander.SchemaNode(
        StrictString(), validator=colander.Length(min=1, max=200), missing=""
    )


class PasswordResetSchema(colander.MappingSchema):
    schema_type = StrictMapping
    email = colander.SchemaNode(StrictString(), validator=EMAIL)


class PasswordResetConfirmSchema(colander.MappingSchema):
    schema_type = StrictMapping
    token = colander.SchemaNode(StrictString(), validator=TOKEN)
    password = colander.SchemaNode(StrictString(), validator=NEW_PASSWORD)


class VerifyEmailSchema(colander.MappingSchema):
    schema_type = StrictMapping
    token = colander.SchemaNode(StrictString(), validator=TOKEN)
    # Only an explicit choice ends someone else's session (see log_in_verified).
    switch = colander.SchemaNode(StrictBool(), missing=False)


# The one answer to a registration and to a reset request, whatever the email: it must
# not tell whether an account exists.
CHECK_YOUR_EMAIL = {
    "status": "check_your_email",
    "message": "If this email address can be used, we have sent a message to it. "
    "Follow the link in it to continue.",
}


def session_body(request) -> dict:
    return {"user": user_body(request.user), "csrfToken": get_csrf_token(request)}


def client_ip(request) -> str:
    return request.client_addr or "unknown"


@view_config(route_name="auth.register", request_method="POST", renderer="json")
def register(request):
    """202 and the same body for a new email (an unverified account, a verification link
    mailed) and a taken one (its owner mailed instead); nobody is logged in."""
    if not request.registry.settings["cmsshop.registration_open"]:
        raise ApiError(
            "Registration is closed on this site.",
            code="registration_closed",
            hints=["Ask the site operator for an account."],
        )
    data = read_json(request, RegisterSchema())
    login.register(
        request.db,
        request.registry.settings,
        request.find_service(PasswordHasher),
        request.find_service(RateLimiter),
        data["email"],
        data["password"],
        data["name"],
        client_ip(request),
    )
    request.response.status = 202
    return dict(CHECK_YOUR_EMAIL)


@view_config(route_name="auth.login", request_method="POST", renderer="json")
def log_in(request):
    data = read_json(request, LoginSchema())
    user = login.log_in(
        request.db,
        request.find_service(PasswordHasher),
        request.find_service(RateLimiter),
        data["email"],
        data["password"],
        client_ip(request),
    )
    start_session(request, user)
    return session_body(request)


@view_config(route_name="auth.password_reset", request_method="POST", renderer="json")
def request_password_reset(request):
    """Always 202 with one body: a link is mailed if the email has an account (and the
    rate limits allow; past them nothing is sent, and nothing says so)."""
    data = read_json(request, PasswordResetSchema())
    tokens.request_password_reset(
        request.db,
        request.registry.settings,
        request.find_service(RateLimiter),
        data["email"],
        client_ip(request),
    )
    request.response.status = 202
    return dict(CHECK_YOUR_EMAIL)


def end_own_session(request, user) -> None:
    """After a password reset: if this browser was logged in as ``user``, its session
    row is gone with the others; answer as the anonymous visitor it now is."""
    if request.user_session is not None and request.user_session.user_id == user.id:
        request.user_session = None
        request.user = None


@view_config(route_name="auth.password_reset_confirm", request_method="POST", renderer="json")
def confirm_password_reset(request):
    data = read_json(request, PasswordResetConfirmSchema())
    user = tokens.reset_password(
        request.db, request.find_service(PasswordHasher), data["token"], data["password"]
    )
    end_own_session(request, user)
    return {"status": "password_changed", **session_body(request)}


def log_in_verified(request, user, switch: bool) -> bool:
    """After ``user``'s address is confirmed by its link: log them in if nobody is logged
    in; keep the session if it is already theirs; if someone else is logged in, keep
    that session unless the visitor chose ``switch``. A link is anyone's to send, so
    pressing it must not quietly swap the visitor into the sender's account (login
    CSRF). True when the browser is now logged in as ``user``."""
    current = request.user
    if current is not None and current.id == user.id:
        return True
    if current is not None and not switch:
        return False
    start_session(request, user)  # ends the other user's session first
    return True


@view_config(route_name="auth.verify_email", request_method="POST", renderer="json")
def verify_email(request):
    """Confirm the address with the mailed token and log in, unless someone else is
    logged in and ``switch`` is not true: then their session stays, as the answer shows."""
    data = read_json(request, VerifyEmailSchema())
    user = tokens.verify_email(request.db, data["token"])
    log_in_verified(request, user, data["switch"])
    return session_body(request)


@view_config(route_name="auth.logout", request_method="POST", renderer="json")
def logout(request):
    end_session(request)
    return {"user": None}


@view_config(route_name="auth.session", request_method="GET", renderer="json")
def current_session(request):
    return session_body(request)
