"""Content management of currencies (admin role, CSRF token)."""

from __future__ import annotations

import colander
from pyramid.view import view_config

from cmsshop import openapi as oa
from cmsshop.security import ADMIN
from cmsshop.services.store import currencies
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.json import StrictMapping, StrictString, read_json
from cmsshop.views.shared.schema import body_schema, bool_node, int_node, text_node, text_schema
from cmsshop.views.store.api import currency_body


class CurrencySchema(colander.MappingSchema):
    schema_type = StrictMapping
    code = colander.SchemaNode(
        StrictString(),
        validator=colander.Regex(currencies.CURRENCY_CODE, "three capital letters, e.g. EUR"),
    )
    name = text_node(100, min_length=1)
    symbol = text_node(8, min_length=1)
    decimals = int_node(0, currencies.MAX_DECIMALS, missing=2)
    enabled = bool_node(missing=True)
    default = bool_node(missing=False)


class CurrencyPatchSchema(colander.MappingSchema):
    """``decimals`` cannot change: stored amounts are minor units of the old decimals."""

    schema_type = StrictMapping
    name = text_node(100, min_length=1, missing=colander.drop)
    symbol = text_node(8, min_length=1, missing=colander.drop)
    enabled = bool_node(missing=colander.drop)
    default = bool_node(missing=colander.drop)


def _code(request) -> str:
    raw = request.matchdict["code"]
    return raw.upper() if len(raw) == 3 and raw.isascii() else raw


@view_config(
    route_name="store.admin_currencies", request_method="GET", renderer="json", permission=ADMIN
)
def list_currencies(request):
    no_store(request)
    found = currencies.list_currencies(request.db, enabled_only=False)
    return {"items": [currency_body(c, admin=True) for c in found]}


@view_config(
    route_name="store.admin_currencies", request_method="POST", renderer="json", permission=ADMIN
)
def create_currency(request):
    data = read_json(request, CurrencySchema())
    currency = currencies.create_currency(request.db, data)
    request.response.status = 201
    return currency_body(currency, admin=True)


@view_config(
    route_name="store.admin_currency", request_method="PATCH", renderer="json", permission=ADMIN
)
def update_currency(request):
    code = _code(request)
    currencies.find_currency(request.db, code)  # 404 before looking at the body
    changes = read_json(request, CurrencyPatchSchema())
    currency = currencies.update_currency(request.db, code, changes)
    return currency_body(currency, admin=True)


ADMIN_CURRENCY = {
    "allOf": [
        oa.ref("Currency"),
        {"type": "object", "required": ["enabled"], "properties": {"enabled": {"type": "boolean"}}},
    ]
}
CONFLICTS = (
    "409: currency_exists, currency_is_default (the default cannot be disabled or unset; "
    "make another currency the default), currency_disabled (a disabled currency cannot be "
    "the default)."
)

OPENAPI_PATHS = {
    "/api/admin/currencies": {
        "get": oa.operation(
            "All currencies, disabled ones too (admin)",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["items"],
                        "properties": {
                            "items": {"type": "array", "items": oa.ref("AdminCurrency")}
                        },
                    }
                ),
                **oa.errors(401, 403),
            },
            tags=["admin", "store"],
        ),
        "post": {
            **oa.operation(
                "Add a currency (admin); default: true makes it the only default",
                {
                    **oa.ok(oa.ref("AdminCurrency"), "Created", 201),
                    **oa.errors(401, 403, 409, 415, 422),
                },
                body=body_schema(
                    {
                        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
                        "name": text_schema(100, min_length=1),
                        "symbol": text_schema(8, min_length=1),
                        "decimals": {
                            "type": "integer",
                            "minimum": 0,
                            "maximum": currencies.MAX_DECIMALS,
                        },
                        "enabled": {"type": "boolean"},
                        "default": {"type": "boolean"},
                    },
                    ["code", "name", "symbol"],
                ),
                csrf=True,
                tags=["admin", "store"],
            ),
            "description": CONFLICTS,
        },
    },
    "/api/admin/currencies/{code}": {
        "patch": {
            **oa.operation(
                "Change a currency: enable/disable, make default, rename (admin)",
                {**oa.ok(oa.ref("AdminCurrency")), **oa.errors(401, 403, 404, 409, 415, 422)},
                params=[oa.path_param("code", {"type": "string"})],
                body=body_schema(
                    {
                        "name": text_schema(100, min_length=1),
                        "symbol": text_schema(8, min_length=1),
                        "enabled": {"type": "boolean"},
                        "default": {"type": "boolean"},
                    },
                    [],
                ),
                csrf=True,
                tags=["admin", "store"],
            ),
            "description": CONFLICTS,
        },
    },
}

OPENAPI_SCHEMAS = {"AdminCurrency": ADMIN_CURRENCY}
