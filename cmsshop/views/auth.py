"""Registration, login, logout and the current session."""

from __future__ import annotations

import colander
from pyramid.csrf import get_csrf_token
from pyramid.view import view_config

from cmsshop import openapi as oa
from cmsshop.db import take_write_lock
from cmsshop.errors import ApiError, RateLimited
from cmsshop.security import end_session, start_session
from cmsshop.services.accounts import users as accounts
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.views.common import StrictMapping, StrictString, read_json
from cmsshop.views.core import user_body

EMAIL = colander.All(colander.Email(), colander.Length(max=320))


class LoginSchema(colander.MappingSchema):
    schema_type = StrictMapping
    email = colander.SchemaNode(StrictString(), validator=colander.Length(min=3, max=320))
    password = colander.SchemaNode(StrictString(), validator=colander.Length(min=1, max=1024))


class RegisterSchema(colander.MappingSchema):
    schema_type = StrictMapping
    email = colander.SchemaNode(StrictString(), validator=EMAIL)
    password = colander.SchemaNode(StrictString(), validator=colander.Length(min=10, max=1024))
    name = colander.SchemaNode(
        StrictString(), validator=colander.Length(min=1, max=200), missing=""
    )


def session_body(request) -> dict:
    return {"user": user_body(request.user), "csrfToken": get_csrf_token(request)}


LOGIN_EMAIL_POLICY = "login.email"
LOGIN_IP_POLICY = "login.ip"
REGISTER_IP_POLICY = "register.ip"


def _client_ip(request) -> str:
    return request.client_addr or "unknown"


@view_config(route_name="auth.register", request_method="POST", renderer="json")
def register(request):
    """Create an account and log it in.

    A taken email gets the same status and body keys as a new one (``user`` is null and no
    session starts), not a 409: registration must not be a way to test which emails have
    accounts. The per-IP policy bounds how many addresses one client can try.
    """
    if not request.registry.settings["cmsshop.registration_open"]:
        raise ApiError(
            "Registration is closed on this site.",
            code="registration_closed",
            hints=["Ask the site operator for an account."],
        )
    data = read_json(request, RegisterSchema())
    refusal = request.find_service(RateLimiter).count([(REGISTER_IP_POLICY, _client_ip(request))])
    if refusal is not None:
        raise RateLimited(refusal.retry_after, "Too many registrations; wait before trying again.")
    # The user row is this request's first write (see login).
    take_write_lock(request.db)
    hasher = request.find_service(accounts.PasswordHasher)
    try:
        user = accounts.create_user(
            request.db, hasher, data["email"], data["password"], data["name"]
        )
    except accounts.EmailTaken:
        user = None
    if user is not None:
        start_session(request, user)
    request.response.status = 201
    return session_body(request)


@view_config(route_name="auth.login", request_method="POST", renderer="json")
def login(request):
    data = read_json(request, LoginSchema())
    # The attempt is counted (reserved) before the password is checked, in one atomic
    # statement shared by every process, so N parallel guesses check at most the limit;
    # a right password takes its attempt back.
    limiter = request.find_service(RateLimiter)
    checks = [
        (LOGIN_EMAIL_POLICY, accounts.normalise_email(data["email"])),
        (LOGIN_IP_POLICY, _client_ip(request)),
    ]
    refusal = limiter.count(checks)
    if refusal is not None:
        raise RateLimited(refusal.retry_after, "Too many failed logins; wait before trying again.")
    user = accounts.authenticate(
        request.db, request.find_service(accounts.PasswordHasher), data["email"], data["password"]
    )
    if user is None:
        raise ApiError(
            "The email or password is wrong.",
            code="invalid_credentials",
            hints=["Check both and try again."],
        )
    limiter.refund(checks)
    # The session row is this request's first write: on SQLite, queue for the write lock
    # now (the counters above committed after this request's read snapshot began).
    take_write_lock(request.db)
    start_session(request, user)
    return session_body(request)


@view_config(route_name="auth.logout", request_method="POST", renderer="json")
def logout(request):
    end_session(request)
    return {"user": None}


@view_config(route_name="auth.session", request_method="GET", renderer="json")
def current_session(request):
    return session_body(request)


CREDENTIALS = {
    "type": "object",
    "required": ["email", "password"],
    "additionalProperties": False,
    "properties": {"email": {"type": "string"}, "password": {"type": "string"}},
}
SESSION = {
    "type": "object",
    "required": ["user", "csrfToken"],
    "properties": {"user": oa.ref("User"), "csrfToken": {"type": "string"}},
}

OPENAPI_PATHS = {
    "/api/auth/register": {
        "post": oa.operation(
            "Create a customer account and log in (a taken email: the same answer, no session)",
            {**oa.ok(oa.ref("Session"), "Created", 201), **oa.errors(403, 415, 422, 429)},
            body={
                "type": "object",
                "required": ["email", "password"],
                "additionalProperties": False,
                "properties": {
                    "email": {"type": "string", "format": "email"},
                    "password": {"type": "string", "minLength": 10},
                    "name": {"type": "string"},
                },
            },
            csrf=True,
            tags=["auth"],
        )
    },
    "/api/auth/login": {
        "post": oa.operation(
            "Log in (starts a new session)",
            {**oa.ok(oa.ref("Session")), **oa.errors(401, 403, 415, 422, 429)},
            body=CREDENTIALS,
            csrf=True,
            tags=["auth"],
        )
    },
    "/api/auth/logout": {
        "post": oa.operation(
            "Log out (the session cookie stops working everywhere)",
            {
                **oa.ok({"type": "object", "properties": {"user": {"type": "null"}}}),
                **oa.errors(403),
            },
            csrf=True,
            tags=["auth"],
        )
    },
    "/api/auth/session": {
        "get": oa.operation(
            "The current user (or null) and CSRF token",
            {**oa.ok(oa.ref("Session")), **oa.errors()},
            tags=["auth"],
        )
    },
}


def includeme(config) -> None:
    settings = config.get_settings()
    limit, window = settings["cmsshop.login_max_failures"], settings["cmsshop.login_failure_window"]
    config.add_rate_policy(LOGIN_EMAIL_POLICY, limit, window)
    # An address shared by many people (an office, a NAT) gets four times the allowance.
    config.add_rate_policy(LOGIN_IP_POLICY, limit * 4, window)
    config.add_rate_policy(
        REGISTER_IP_POLICY,
        settings["cmsshop.register_max_per_ip"],
        settings["cmsshop.register_window"],
    )
    config.add_route("auth.register", "/api/auth/register")
    config.add_route("auth.login", "/api/auth/login")
    config.add_route("auth.logout", "/api/auth/logout")
    config.add_route("auth.session", "/api/auth/session")
    config.add_openapi(paths=OPENAPI_PATHS, schemas={"Session": SESSION})
    config.scan("cmsshop.views.auth")
