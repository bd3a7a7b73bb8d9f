"""The OpenAPI part of checkout: placing an order and the development sandbox."""

from __future__ import annotations

from cmsshop import openapi as oa
from cmsshop.services.checkout import orders as co
from cmsshop.views.checkout.api import KEY, SLUG
from cmsshop.views.shared.bodies import ORDER_SCHEMA

OPENAPI_SCHEMAS = {"CheckoutOrder": ORDER_SCHEMA}

OPENAPI_PATHS = {
    "/api/store/checkout": {
        "post": oa.operation(
            "Place an order (priced from the database, committed as pending) and get the "
            "provider's payment page",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["order", "redirectUrl", "sandbox"],
                        "properties": {
                            "order": oa.ref("CheckoutOrder"),
                            "redirectUrl": {"type": "string"},
                            "sandbox": {"type": "boolean"},
                        },
                    },
                    "Created",
                    201,
                ),
                **oa.errors(401, 403, 415, 422, 429, 503),
            },
            body={
                "type": "object",
                "required": ["items"],
                "additionalProperties": False,
                "properties": {
                    "items": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": co.MAX_ITEMS,
                        "items": {
                            "oneOf": [
                                {
                                    "type": "object",
                                    "description": "buy a product",
                                    "required": ["product"],
                                    "additionalProperties": False,
                                    "properties": {"product": SLUG},
                                },
                                {
                                    "type": "object",
                                    "description": "renew your license: one more duration "
                                    "from its current expiry",
                                    "required": ["renew"],
                                    "additionalProperties": False,
                                    "properties": {"renew": KEY},
                                },
                                {
                                    "type": "object",
                                    "description": "upgrade your license to a higher tier; "
                                    "the price difference is charged",
                                    "required": ["upgrade", "to"],
                                    "additionalProperties": False,
                                    "properties": {"upgrade": KEY, "to": SLUG},
                                },
                            ]
                        },
                    },
                    "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
                    "provider": {"type": "string", "minLength": 1, "maxLength": 40},
                },
            },
            csrf=True,
            tags=["store", "payments"],
        )
    },
    "/api/store/checkout/sandbox/{number}": {
        "get": oa.operation(
            "Development payment sandbox: how to simulate the provider's webhook",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["order", "sandbox", "message", "command"],
                        "properties": {
                            "order": oa.ref("CheckoutOrder"),
                            "sandbox": {"const": True},
                            "message": {"type": "string"},
                            "command": {"type": "string"},
                        },
                    }
                ),
                **oa.errors(401, 404),
            },
            params=[oa.path_param("number")],
            tags=["store", "payments"],
        )
    },
}
