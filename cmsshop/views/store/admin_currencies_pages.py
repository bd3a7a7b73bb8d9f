"""The admin pages of the currencies: list, add, edit. Same colander schemas
(CurrencySchema, CurrencyPatchSchema) and service rules (catalogue.currencies: one
enabled default, which cannot be disabled or unset) as views/store/admin_currencies_api.py."""

from __future__ import annotations

import re

import colander
from pyramid.view import view_config

from cmsshop.errors import ApiError
from cmsshop.security import ADMIN
from cmsshop.services.store import currencies
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.forms import FormInvalid, field_errors, posted_value, see_other
from cmsshop.views.shared.json import flatten_errors
from cmsshop.views.store.admin_currencies_api import CurrencyPatchSchema, CurrencySchema

NOTICES = {
    "currency_created": "The currency was added.",
    "currency_saved": "The currency was saved.",
}
CHECKBOXES = ("enabled", "default")
INTEGER = re.compile(r"^[0-9]{1,9}\Z")
# Service refusals that belong to one field of the form.
CONFLICT_FIELDS = {"currency_exists": "code"}


def read_currency_form(request, schema: colander.SchemaNode) -> dict:
    """The form as ``schema``'s JSON body (checkboxes -> booleans, decimals -> an
    integer), validated; FormInvalid with what was typed if not."""
    names = [node.name for node in schema.children]
    typed = {name: posted_value(request, name) for name in names if name not in CHECKBOXES}
    body: dict = {}
    for name, raw in typed.items():
        raw = raw.strip()
        if name == "decimals":
            if raw:
                body[name] = int(raw) if INTEGER.match(raw) else raw
        elif name == "code":
            body[name] = raw.upper() if raw.isascii() else raw
        else:
            body[name] = raw
    for name in CHECKBOXES:
        if name in names:
            typed[name] = "on" if name in request.POST else ""
            body[name] = name in request.POST
    try:
        return schema.deserialize(body)
    except colander.Invalid as exc:
        raise FormInvalid(flatten_errors(exc), typed) from None


def service_errors(exc: ApiError) -> dict[str, str]:
    field = CONFLICT_FIELDS.get(exc.code)
    return {field: exc.message} if field else field_errors(exc)


@view_config(
    route_name="pages.admin_currencies",
    request_method="GET",
    renderer="admin/store/currencies.html",
    permission=ADMIN,
)
def currency_list(request):
    no_store(request)
    return {
        "admin_section": "currencies",
        "currencies": currencies.list_currencies(request.db, enabled_only=False),
    }


def _form_page(request, currency, form: dict, errors: dict, status: int = 200) -> dict:
    request.response.status = status
    no_store(request)
    return {"admin_section": "currencies", "currency": currency, "form": form, "errors": errors}


@view_config(
    route_name="pages.admin_currency_new",
    request_method="GET",
    renderer="admin/store/currency_edit.html",
    permission=ADMIN,
)
def new_currency(request):
    return _form_page(request, None, {"decimals": "2", "enabled": "on"}, {})


@view_config(
    route_name="pages.admin_currency_new",
    request_method="POST",
    renderer="admin/store/currency_edit.html",
    permission=ADMIN,
)
def create_currency(request):
    try:
        currencies.create_currency(request.db, read_currency_form(request, CurrencySchema()))
    except FormInvalid as exc:
        return _form_page(request, None, exc.form, exc.errors, 422)
    except ApiError as exc:
        typed = {
            name: posted_value(request, name) for name in ("code", "name", "symbol", "decimals")
        }
        typed.update({name: "on" if name in request.POST else "" for name in CHECKBOXES})
        return _form_page(request, None, typed, service_errors(exc), exc.status)
    return see_other(request, "/admin/currencies", notice="currency_created")


def _code(request) -> str:
    raw = request.matchdict["code"]
    return raw.upper() if len(raw) == 3 and raw.isascii() else raw


def _stored_form(currency) -> dict:
    return {
        "name": currency.name,
        "symbol": currency.symbol,
        "enabled": "on" if currency.enabled else "",
        "default": "on" if currency.is_default else "",
    }


@view_config(
    route_name="pages.admin_currency_edit",
    request_method="GET",
    renderer="admin/store/currency_edit.html",
    permission=ADMIN,
)
def edit_currency(request):
    currency = currencies.find_currency(request.db, _code(request))
    return _form_page(request, currency, _stored_form(currency), {})


@view_config(
    route_name="pages.admin_currency_edit",
    request_method="POST",
    renderer="admin/store/currency_edit.html",
    permission=ADMIN,
)
def update_currency(request):
    code = _code(request)
    currency = currencies.find_currency(request.db, code)  # 404 before reading the form
    try:
        changes = read_currency_form(request, CurrencyPatchSchema())
        currencies.update_currency(request.db, code, changes)
    except FormInvalid as exc:
        return _form_page(request, currency, exc.form, exc.errors, 422)
    except ApiError as exc:
        typed = {name: posted_value(request, name) for name in ("name", "symbol")}
        typed.update({name: "on" if name in request.POST else "" for name in CHECKBOXES})
        request.db.expire(currency)
        return _form_page(request, currency, typed, service_errors(exc), exc.status)
    return see_other(request, "/admin/currencies", notice="currency_saved")
