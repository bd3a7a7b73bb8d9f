"""Registration, login, logout and the current session."""

from __future__ import annotations

import colander
from pyramid.csrf import get_csrf_token
from pyramid.view import view_config

from cmsshop import openapi as oa
from cmsshop.errors import ApiError
from cmsshop.security import end_session, start_session
from cmsshop.services.accounts import login
from cmsshop.services.accounts.users import PasswordHasher
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


def client_ip(request) -> str:
    return request.client_addr or "unknown"


@view_config(route_name="auth.register", request_method="POST", renderer="json")
def register(request):
    """Create an account and log it in; a taken email gets the same status and body keys
    (``user`` null, no session): see services.accounts.login."""
    if not request.registry.settings["cmsshop.registration_open"]:
        raise ApiError(
            "Registration is closed on this site.",
            code="registration_closed",
            hints=["Ask the site operator for an account."],
        )
    data = read_json(request, RegisterSchema())
    user = login.register(
        request.db,
        request.find_service(PasswordHasher),
        request.find_service(RateLimiter),
        data["email"],
        data["password"],
        data["name"],
        client_ip(request),
    )
    if user is not None:
        start_session(request, user)
    request.response.status = 201
    return session_body(request)


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
    for policy in login.rate_policies(config.get_settings()):
        config.add_rate_policy(*policy)
    config.add_route("auth.register", "/api/auth/register")
    config.add_route("auth.login", "/api/auth/login")
    config.add_route("auth.logout", "/api/auth/logout")
    config.add_route("auth.session", "/api/auth/session")
    config.add_openapi(paths=OPENAPI_PATHS, schemas={"Session": SESSION})
    config.scan("cmsshop.views.auth")
