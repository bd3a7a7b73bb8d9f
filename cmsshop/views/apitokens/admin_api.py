"""API tokens as JSON (an admin's browser session only: no token may list, mint or
revoke tokens, see services/apitokens/scopes): the list, creating one (its value is in
that answer and nowhere else, ever), revoking one."""

from __future__ import annotations

import datetime as dt
import re

import colander
from pyramid.view import view_config

from cmsshop.errors import NotFound, ValidationFailed
from cmsshop.models import API_TOKEN_SCOPES
from cmsshop.security import ADMIN
from cmsshop.services.apitokens import tokens
from cmsshop.util import isoformat_z, utcnow
from cmsshop.views.shared.json import (
    StrictMapping,
    StrictSequence,
    StrictString,
    parse_path_id,
    read_json,
)
from cmsshop.views.shared.schema import text_node

MAX_NAME = 100
TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?(Z|[+-][0-9]{2}:[0-9]{2})",
    re.IGNORECASE,
)
# A token lives at most this long: an expiry decades away is a typo, or no expiry at all.
MAX_LIFETIME = dt.timedelta(days=5 * 366)


class UtcTime(colander.SchemaType):
    """``2027-01-31T00:00:00Z`` (any offset), as aware UTC; null stays None."""

    def deserialize(self, node, cstruct):
        if cstruct is colander.null or cstruct is None:
            return cstruct
        if not isinstance(cstruct, str) or not TIME.fullmatch(cstruct):
            raise colander.Invalid(node, "a time with its offset, e.g. 2027-01-31T00:00:00Z")
        text = re.sub(r"\.[0-9]+", "", cstruct.upper().replace("Z", "+00:00"))
        try:
            return dt.datetime.fromisoformat(text).astimezone(dt.UTC)
        except (ValueError, OverflowError):
            raise colander.Invalid(node, "is not a valid time") from None

    def serialize(self, node, appstruct):
        return colander.null if appstruct in (colander.null, None) else isoformat_z(appstruct)


class ScopesSchema(colander.SequenceSchema):
    schema_type = StrictSequence
    validator = colander.Length(
        min=1, max=len(API_TOKEN_SCOPES), min_err="choose at least one scope"
    )
    scope = colander.SchemaNode(
        StrictString(),
        validator=colander.OneOf(API_TOKEN_SCOPES),
    )


def not_blank(node, value):
    if not value.strip():
        raise colander.Invalid(node, "must not be blank")


def name_node():
    node = text_node(MAX_NAME, min_length=1)
    node.validator = colander.All(node.validator, not_blank)
    return node


class ApiTokenSchema(colander.MappingSchema):
    schema_type = StrictMapping
    name = name_node()
    scopes = ScopesSchema()
    expiresAt = colander.SchemaNode(UtcTime(), missing=None)  # noqa: N815


def check_expiry(expires_at: dt.datetime | None, field: str = "expiresAt") -> None:
    """422 unless ``expires_at`` is None or in the future, and not beyond MAX_LIFETIME."""
    if expires_at is None:
        return
    now = utcnow()
    if expires_at <= now:
        raise ValidationFailed({field: "must be in the future"})
    if expires_at > now + MAX_LIFETIME:
        raise ValidationFailed({field: "at most five years from now"})


def token_body(token) -> dict:
    owner = token.created_by
    status = tokens.token_status(token)
    return {
        "id": token.id,
        "name": token.name,
        "prefix": token.prefix,
        "scopes": list(token.scopes),
        "createdAt": isoformat_z(token.created_at),
        "createdBy": {"id": owner.id, "email": owner.email},
        "expiresAt": isoformat_z(token.expires_at),
        "lastUsedAt": isoformat_z(token.last_used_at),
        "lastUsedIp": token.last_used_ip,
        "revokedAt": isoformat_z(token.revoked_at),
        "status": status,
        "active": status == "active",
    }


def private_no_store(request) -> None:
    """Token lists and, above all, a new token's value: no cache anywhere keeps them."""
    request.response.headers["Cache-Control"] = "private, no-store"


def token_from_path(request):
    token = tokens.find_token(request.db, parse_path_id(request.matchdict["id"]))
    if token is None:
        raise NotFound("There is no API token with this id.", code="api_token_not_found")
    return token


@view_config(
    route_name="apitokens.admin_tokens", request_method="GET", renderer="json", permission=ADMIN
)
def list_tokens(request):
    private_no_store(request)
    return {"items": [token_body(token) for token in tokens.list_tokens(request.db)]}


@view_config(
    route_name="apitokens.admin_tokens", request_method="POST", renderer="json", permission=ADMIN
)
def create_token(request):
    private_no_store(request)
    data = read_json(request, ApiTokenSchema())
    check_expiry(data["expiresAt"])
    token, value = tokens.create_token(
        request.db,
        name=data["name"],
        scopes=data["scopes"],
        created_by=request.user,
        expires_at=data["expiresAt"],
    )
    request.response.status = 201
    return {**token_body(token), "token": value}


@view_config(
    route_name="apitokens.admin_token", request_method="DELETE", renderer="json", permission=ADMIN
)
def revoke_token(request):
    private_no_store(request)
    token = token_from_path(request)
    tokens.revoke_token(token)
    return token_body(token)
