"""The OpenAPI part of the accounts module: registration, login, the session and the
mailed links."""

from __future__ import annotations

from cmsshop import openapi as oa

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

CHECK_YOUR_EMAIL_SCHEMA = {
    "type": "object",
    "required": ["status", "message"],
    "properties": {
        "status": {"type": "string", "enum": ["check_your_email"]},
        "message": {"type": "string"},
    },
}

OPENAPI_PATHS = {
    "/api/auth/register": {
        "post": oa.operation(
            "Register: a new email gets an unverified account and a verification link by "
            "mail; a taken one gets a mail to its owner. The same 202 answer for both, and "
            "no session (log in after following the link)",
            {**oa.ok(oa.ref("CheckYourEmail"), "Accepted", 202), **oa.errors(403, 415, 422, 429)},
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
    "/api/auth/password-reset": {
        "post": oa.operation(
            "Ask for a password-reset link by mail: always 202 with the same body, whether "
            "the email has an account or not (rate limited per email and IP, silently)",
            {**oa.ok(oa.ref("CheckYourEmail"), "Accepted", 202), **oa.errors(403, 415, 422)},
            body={
                "type": "object",
                "required": ["email"],
                "additionalProperties": False,
                "properties": {"email": {"type": "string", "format": "email"}},
            },
            csrf=True,
            tags=["auth"],
        )
    },
    "/api/auth/password-reset/confirm": {
        "post": oa.operation(
            "Set a new password with the mailed token (single use); confirms the email and "
            "ends every session of the account",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["status", "user", "csrfToken"],
                        "properties": {
                            "status": {"type": "string", "enum": ["password_changed"]},
                            "user": {"type": "null"},
                            "csrfToken": {"type": "string"},
                        },
                    }
                ),
                **oa.errors(400, 403, 410, 415, 422),
            },
            body={
                "type": "object",
                "required": ["token", "password"],
                "additionalProperties": False,
                "properties": {
                    "token": {"type": "string", "maxLength": 256},
                    "password": {"type": "string", "minLength": 10},
                },
            },
            csrf=True,
            tags=["auth"],
        )
    },
    "/api/auth/verify-email": {
        "post": oa.operation(
            "Confirm the email with the mailed token (single use) and log in, unless another "
            "user is logged in (their session stays without switch)",
            {**oa.ok(oa.ref("Session")), **oa.errors(400, 403, 410, 415, 422)},
            body={
                "type": "object",
                "required": ["token"],
                "additionalProperties": False,
                "properties": {
                    "token": {"type": "string", "maxLength": 256},
                    "switch": {
                        "type": "boolean",
                        "default": False,
                        "description": "When another user is logged in: true ends their "
                        "session and logs in the link's user; false (the default) confirms "
                        "the address and keeps their session (the answer shows them).",
                    },
                },
            },
            csrf=True,
            tags=["auth"],
        )
    },
    "/api/auth/login": {
        "post": oa.operation(
            "Log in (starts a new session); 403 email_not_verified for the right password of "
            "an account whose email is not confirmed yet",
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
OPENAPI_SCHEMAS = {"Session": SESSION, "CheckYourEmail": CHECK_YOUR_EMAIL_SCHEMA}
