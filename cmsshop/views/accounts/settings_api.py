"""The account owner's self-service as JSON, under ``/api/account``: profile and name,
e-mail change (asked, then confirmed by the mailed link), password change, the export
of all their data, and deleting the account (services.accounts.profile, .export and
.erasure)."""

from __future__ import annotations

import json

import colander
from pyramid.response import Response
from pyramid.view import view_config

from cmsshop.security import CUSTOMER, end_session
from cmsshop.services.accounts import erasure, export, profile
from cmsshop.services.accounts.users import PasswordHasher
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.util import isoformat_z
from cmsshop.views.accounts.api import EMAIL, NEW_PASSWORD, TOKEN, client_ip
from cmsshop.views.shared.bodies import user_body
from cmsshop.views.shared.json import StrictMapping, StrictString, read_json

PASSWORD = colander.Length(min=1, max=1024)
NAME = colander.Length(min=1, max=200)


class NameSchema(colander.MappingSchema):
    schema_type = StrictMapping
    name = colander.SchemaNode(StrictString(), validator=NAME)


class EmailChangeSchema(colander.MappingSchema):
    schema_type = StrictMapping
    newEmail = colander.SchemaNode(StrictString(), validator=EMAIL)  # noqa: N815
    currentPassword = colander.SchemaNode(StrictString(), validator=PASSWORD)  # noqa: N815


class EmailConfirmSchema(colander.MappingSchema):
    schema_type = StrictMapping
    token = colander.SchemaNode(StrictString(), validator=TOKEN)


class PasswordChangeSchema(colander.MappingSchema):
    schema_type = StrictMapping
    currentPassword = colander.SchemaNode(StrictString(), validator=PASSWORD)  # noqa: N815
    newPassword = colander.SchemaNode(StrictString(), validator=NEW_PASSWORD)  # noqa: N815


class DeleteSchema(colander.MappingSchema):
    schema_type = StrictMapping
    password = colander.SchemaNode(StrictString(), validator=PASSWORD)
    confirmation = colander.SchemaNode(StrictString(), validator=colander.Length(max=100))


def activity_body(entry) -> dict:
    return {
        "at": isoformat_z(entry.created_at),
        "action": entry.action,
        "description": profile.describe(entry.action),
        "ip": entry.ip,
    }


def profile_body(request) -> dict:
    user = request.user
    return {
        "user": user_body(user),
        "emailVerified": user.email_verified,
        "createdAt": isoformat_z(user.created_at),
        "activity": [activity_body(entry) for entry in profile.recent_activity(request.db, user)],
    }


def own_session_id(request) -> str | None:
    session = request.user_session
    return session.id if session is not None else None


def export_response(request) -> Response:
    """The owner's data as a JSON attachment, never cached."""
    user = request.user
    body = json.dumps(export.account_data(request.db, user), ensure_ascii=False, indent=2)
    response = Response(body=body.encode(), content_type="application/json", charset="utf-8")
    response.content_disposition = f'attachment; filename="{export.export_file_name(user)}"'
    response.cache_control = "no-store"
    return response


@view_config(
    route_name="account.api_profile", request_method="GET", renderer="json", permission=CUSTOMER
)
def get_profile(request):
    """The owner's profile and recent account activity."""
    return profile_body(request)


@view_config(
    route_name="account.api_profile", request_method="PATCH", renderer="json", permission=CUSTOMER
)
def patch_profile(request):
    """Change the display name."""
    data = read_json(request, NameSchema())
    profile.change_name(request.db, request.user, data["name"], client_ip(request))
    return profile_body(request)


@view_config(
    route_name="account.api_email", request_method="POST", renderer="json", permission=CUSTOMER
)
def request_email_change(request):
    """202: a confirmation link is mailed to ``newEmail``; the address changes when it is
    opened (POST /api/account/email/confirm)."""
    data = read_json(request, EmailChangeSchema())
    new_email = profile.request_email_change(
        request.db,
        request.registry.settings,
        request.find_service(PasswordHasher),
        request.find_service(RateLimiter),
        request.user,
        data["newEmail"],
        data["currentPassword"],
        client_ip(request),
    )
    request.response.status = 202
    return {
        "status": "check_your_email",
        "newEmail": new_email,
        "message": "We have sent a link to the new address. Your address changes when you open it.",
    }


@view_config(route_name="account.api_email_confirm", request_method="POST", renderer="json")
def confirm_email_change(request):
    """Apply an e-mail change with the mailed token (no login needed: the link proves
    the new mailbox, and the owner asked for it with their password)."""
    data = read_json(request, EmailConfirmSchema())
    user = profile.confirm_email_change(
        request.db, request.registry.settings, data["token"], client_ip(request)
    )
    return {"status": "email_changed", "email": user.email}


@view_config(
    route_name="account.api_password", request_method="POST", renderer="json", permission=CUSTOMER
)
def change_password(request):
    """Change the password; every other session of the owner ends, this one stays."""
    data = read_json(request, PasswordChangeSchema())
    ended = profile.change_password(
        request.db,
        request.find_service(PasswordHasher),
        request.find_service(RateLimiter),
        request.user,
        data["currentPassword"],
        data["newPassword"],
        own_session_id(request),
        client_ip(request),
    )
    return {"status": "password_changed", "otherSessionsEnded": ended}


@view_config(route_name="account.api_export", request_method="GET", permission=CUSTOMER)
def export_data(request):
    """All the owner's data as a JSON attachment (services.accounts.export)."""
    return export_response(request)


@view_config(
    route_name="account.api_delete", request_method="POST", renderer="json", permission=CUSTOMER
)
def delete_account(request):
    """Delete the account (services.accounts.erasure); the session ends."""
    data = read_json(request, DeleteSchema())
    erasure.delete_account(
        request.db,
        request.find_service(PasswordHasher),
        request.find_service(RateLimiter),
        request.user,
        data["password"],
        data["confirmation"],
        client_ip(request),
    )
    end_session(request)
    return {"status": "deleted"}
