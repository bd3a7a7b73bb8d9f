"""The console's API tokens page: the tokens with their last use and status, the form
that creates one (its value is shown on the answer to that post, once: never stored, so
never redirected to), and each token's revoke button (with a confirm step)."""

from __future__ import annotations

import datetime as dt

import colander
from pyramid.view import view_config

from cmsshop.errors import ValidationFailed
from cmsshop.models import API_TOKEN_SCOPES
from cmsshop.security import ADMIN
from cmsshop.services.apitokens import tokens
from cmsshop.services.apitokens.scopes import SCOPE_DESCRIPTIONS
from cmsshop.views.apitokens.admin_api import (
    ScopesSchema,
    check_expiry,
    name_node,
    private_no_store,
    token_from_path,
)
from cmsshop.views.shared.confirm import confirm_page, confirmed
from cmsshop.views.shared.forms import FormInvalid, field_errors, posted_value, read_form, see_other
from cmsshop.views.shared.json import flatten_errors
from cmsshop.views.shared.schema import IsoDate

NOTICES = {
    "api_token_revoked": "The API token is revoked: it stops working at once.",
    "api_token_already_revoked": "That API token was already revoked.",
}
INDEX = "apitokens/admin/index.html"
PATH = "/admin/api-tokens"


class ConsoleTokenSchema(colander.MappingSchema):
    name = name_node()
    expires = colander.SchemaNode(IsoDate(), missing=None)


def index_values(request, *, form=None, errors=None, status=200) -> dict:
    request.response.status = status
    private_no_store(request)
    return {
        "tokens": [(token, tokens.token_status(token)) for token in tokens.list_tokens(request.db)],
        "scopes": [(scope, SCOPE_DESCRIPTIONS[scope]) for scope in API_TOKEN_SCOPES],
        "form": form or {"name": "", "scopes": [], "expires": ""},
        "errors": errors or {},
    }


@view_config(
    route_name="pages.admin_api_tokens", request_method="GET", renderer=INDEX, permission=ADMIN
)
def tokens_page(request):
    return index_values(request)


def read_token_form(request) -> dict:
    """The create form as the JSON route's fields; FormInvalid when it does not validate."""
    typed = {
        "name": posted_value(request, "name"),
        "expires": posted_value(request, "expires"),
        "scopes": [value for value in request.POST.getall("scopes") if isinstance(value, str)],
    }
    errors = {}
    try:
        data = read_form(request, ConsoleTokenSchema())
    except FormInvalid as exc:
        errors.update(exc.errors)
        data = {}
    try:
        data["scopes"] = ScopesSchema().deserialize(typed["scopes"])
    except colander.Invalid as exc:
        errors["scopes"] = "; ".join(sorted(set(flatten_errors(exc).values())))
    expires_at = None
    if data.get("expires"):
        # The token stops working as that day begins (UTC): "expires on 31 January".
        expires_at = dt.datetime.combine(data["expires"], dt.time(), tzinfo=dt.UTC)
        try:
            check_expiry(expires_at, "expires")
        except ValidationFailed as exc:
            errors.update(field_errors(exc))
    if errors:
        raise FormInvalid(errors, typed)
    return {"name": data["name"], "scopes": data["scopes"], "expires_at": expires_at}


@view_config(
    route_name="pages.admin_api_tokens",
    request_method="POST",
    renderer="apitokens/admin/created.html",
    permission=ADMIN,
)
def create_submit(request):
    try:
        data = read_token_form(request)
    except FormInvalid as exc:
        request.override_renderer = INDEX
        return index_values(request, form=exc.form, errors=exc.errors, status=422)
    token, value = tokens.create_token(
        request.db,
        name=data["name"],
        scopes=data["scopes"],
        created_by=request.user,
        expires_at=data["expires_at"],
    )
    private_no_store(request)
    return {"token": token, "value": value, "descriptions": SCOPE_DESCRIPTIONS}


@view_config(route_name="pages.admin_api_token_revoke", request_method="POST", permission=ADMIN)
def revoke_submit(request):
    token = token_from_path(request)
    if token.revoked_at is not None:
        return see_other(request, PATH, notice="api_token_already_revoked")
    if not confirmed(request):
        return confirm_page(
            request,
            title=f"Revoke the API token {token.name}?",
            consequences=[
                f"Revoke the API token “{token.name}” ({token.prefix}…): every call made "
                "with it is refused from now on.",
                "A revoked token cannot be restored; make a new one for the integration "
                "that used it.",
            ],
            action=f"{PATH}/{token.id}/revoke",
            button=f"Revoke {token.name}",
            cancel=PATH,
            section="api-tokens",
        )
    tokens.revoke_token(token)
    return see_other(request, PATH, notice="api_token_revoked")
