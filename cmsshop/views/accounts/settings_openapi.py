"""The OpenAPI part of the owner's account settings (views/accounts/settings_api.py)."""

from __future__ import annotations

from cmsshop import openapi as oa

TIME = {"type": "string", "format": "date-time"}
ACTIVITY = {
    "type": "object",
    "required": ["at", "action", "description", "ip"],
    "properties": {
        "at": TIME,
        "action": {"type": "string", "description": "e.g. account.email_changed"},
        "description": {"type": "string"},
        "ip": {"type": ["string", "null"]},
    },
}
PROFILE = {
    "type": "object",
    "required": ["user", "emailVerified", "createdAt", "activity"],
    "properties": {
        "user": oa.ref("User"),
        "emailVerified": {"type": "boolean"},
        "createdAt": TIME,
        "activity": {
            "type": "array",
            "items": oa.ref("AccountActivity"),
            "description": "The newest changes to the account, newest first.",
        },
    },
}
PASSWORD = {"type": "string", "minLength": 1, "maxLength": 1024}


def _body(required: list[str], properties: dict) -> dict:
    return {
        "type": "object",
        "required": required,
        "additionalProperties": False,
        "properties": properties,
    }


def _status(value: str, **properties) -> dict:
    return {
        "type": "object",
        "required": ["status", *properties],
        "properties": {"status": {"type": "string", "enum": [value]}, **properties},
    }


OPENAPI_SCHEMAS = {"AccountProfile": PROFILE, "AccountActivity": ACTIVITY}

OPENAPI_PATHS = {
    "/api/account/profile": {
        "get": oa.operation(
            "Your profile and recent account activity",
            {**oa.ok(oa.ref("AccountProfile")), **oa.errors(401)},
            tags=["account"],
        ),
        "patch": oa.operation(
            "Change your display name",
            {**oa.ok(oa.ref("AccountProfile")), **oa.errors(401, 403, 415, 422)},
            body=_body(["name"], {"name": {"type": "string", "minLength": 1, "maxLength": 200}}),
            csrf=True,
            tags=["account"],
        ),
    },
    "/api/account/email": {
        "post": oa.operation(
            "Ask to change your email address (current password required): a link is "
            "mailed to the new address and the change applies when it is opened; 422 "
            "`newEmail` when another account uses it; rate limited per account and IP",
            {
                **oa.ok(
                    _status(
                        "check_your_email",
                        newEmail={"type": "string"},
                        message={"type": "string"},
                    ),
                    "Accepted",
                    202,
                ),
                **oa.errors(401, 403, 415, 422, 429),
            },
            body=_body(
                ["newEmail", "currentPassword"],
                {
                    "newEmail": {"type": "string", "format": "email", "maxLength": 320},
                    "currentPassword": PASSWORD,
                },
            ),
            csrf=True,
            tags=["account"],
        )
    },
    "/api/account/email/confirm": {
        "post": oa.operation(
            "Apply an email change with the token of its mailed link (no login needed); "
            "the old address is told",
            {
                **oa.ok(_status("email_changed", email={"type": "string"})),
                **oa.errors(400, 403, 410, 415, 422),
            },
            body=_body(["token"], {"token": {"type": "string", "maxLength": 256}}),
            csrf=True,
            tags=["account"],
        )
    },
    "/api/account/password": {
        "post": oa.operation(
            "Change your password (current password required); every other session of "
            "yours ends, this one stays",
            {
                **oa.ok(_status("password_changed", otherSessionsEnded={"type": "integer"})),
                **oa.errors(401, 403, 415, 422, 429),
            },
            body=_body(
                ["currentPassword", "newPassword"],
                {
                    "currentPassword": PASSWORD,
                    "newPassword": {"type": "string", "minLength": 10, "maxLength": 1024},
                },
            ),
            csrf=True,
            tags=["account"],
        )
    },
    "/api/account/export": {
        "get": oa.operation(
            "Download all your data as a JSON attachment: profile, billing details, "
            "orders with items, invoice and credit-note numbers, licenses with keys and "
            "activations, support tickets, account activity",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["format", "exportedAt", "profile", "orders", "activity"],
                        "properties": {
                            "format": {"type": "integer"},
                            "exportedAt": TIME,
                            "profile": {"type": "object"},
                            "billing": {"type": ["object", "null"]},
                            "orders": {"type": "array", "items": {"type": "object"}},
                            "invoices": {"type": "array", "items": {"type": "object"}},
                            "creditNotes": {"type": "array", "items": {"type": "object"}},
                            "licenses": {"type": "array", "items": {"type": "object"}},
                            "tickets": {"type": "array", "items": {"type": "object"}},
                            "activity": {"type": "array", "items": {"type": "object"}},
                        },
                    }
                ),
                **oa.errors(401),
            },
            tags=["account"],
        )
    },
    "/api/account/delete": {
        "post": oa.operation(
            "Delete your account: password and `confirmation` `DELETE` required. Personal "
            "data is erased; orders and invoices are kept as the law requires; licenses "
            "keep working; the session ends (403 for an admin account)",
            {**oa.ok(_status("deleted")), **oa.errors(401, 403, 415, 422, 429)},
            body=_body(
                ["password", "confirmation"],
                {
                    "password": PASSWORD,
                    "confirmation": {"type": "string", "maxLength": 100},
                },
            ),
            csrf=True,
            tags=["account"],
        )
    },
}
