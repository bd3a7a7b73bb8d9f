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

# --- coupons in the admin API --------------------------------------------------------------

COUPON_ADMIN_TAGS = ["admin", "store", "checkout"]
COUPON_CODE = {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{2,39}$"}
NULLABLE_TIME = {"type": ["string", "null"], "format": "date-time"}
COUPON_AMOUNTS = {
    "type": "object",
    "description": "Per currency code: amountOff (fixed coupons) and minSubtotal (the "
    "minimum order, before discount), in minor units",
    "maxProperties": 50,
    "propertyNames": {"pattern": "^[A-Z]{3}$"},
    "additionalProperties": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "amountOff": {"type": ["integer", "null"], "minimum": 1, "maximum": 10**15},
            "minSubtotal": {"type": ["integer", "null"], "minimum": 0, "maximum": 10**15},
        },
    },
}
COUPON_FIELDS = {
    "code": COUPON_CODE,
    "description": {"type": "string", "maxLength": 200},
    "kind": {"enum": ["percent", "fixed"]},
    "percentOff": {"type": ["integer", "null"], "minimum": 1, "maximum": 100},
    "amounts": COUPON_AMOUNTS,
    "validFrom": NULLABLE_TIME,
    "validUntil": {**NULLABLE_TIME, "description": "Exclusive"},
    "maxRedemptions": {"type": ["integer", "null"], "minimum": 1, "maximum": 2**31 - 1},
    "maxPerCustomer": {"type": ["integer", "null"], "minimum": 1, "maximum": 2**31 - 1},
    "products": {
        "type": "array",
        "maxItems": 100,
        "uniqueItems": True,
        "items": SLUG,
        "description": "Slugs of the products it discounts; empty: every product",
    },
    "paused": {"type": "boolean"},
}
COUPON_SCHEMA = {
    "type": "object",
    "required": [*COUPON_FIELDS, "state", "counted", "redemptions", "createdAt", "updatedAt"],
    "properties": {
        **COUPON_FIELDS,
        "code": {"type": "string"},
        "description": {"type": "string"},
        "state": {
            "enum": ["active", "paused", "scheduled", "expired", "used_up"],
            "description": "Whether a checkout could use it now, or the first reason why not",
        },
        "counted": {
            "type": "integer",
            "description": "Redemptions counted against maxRedemptions (reserved + redeemed)",
        },
        "redemptions": {
            "type": "object",
            "required": ["reserved", "redeemed", "released"],
            "properties": {
                name: {"type": "integer"} for name in ("reserved", "redeemed", "released")
            },
        },
        "createdAt": {"type": "string", "format": "date-time"},
        "updatedAt": {"type": "string", "format": "date-time"},
        "notes": {
            "type": "array",
            "items": {"type": "string"},
            "description": "After a change: what the admin should know (a cap below the "
            "redemptions already counted)",
        },
    },
}
REDEMPTION_SCHEMA = {
    "type": "object",
    "required": ["order", "customer", "status", "discount", "currency", "createdAt", "updatedAt"],
    "properties": {
        "order": {"type": "string"},
        "customer": {"type": "string", "description": "The buyer's e-mail address"},
        "status": {"enum": ["reserved", "redeemed", "released"]},
        "discount": {"type": "integer"},
        "currency": {"type": "string"},
        "createdAt": {"type": "string", "format": "date-time"},
        "updatedAt": {"type": "string", "format": "date-time"},
    },
}
COUPON_PARAM = oa.path_param("code")
COUPON_PATHS = {
    "/api/admin/coupons": {
        "get": oa.operation(
            "Coupons, newest first, with their redemptions by status (admin)",
            {**oa.ok(oa.page_of(oa.ref("Coupon"))), **oa.errors(401, 403, 422)},
            params=oa.PAGING_PARAMS,
            tags=COUPON_ADMIN_TAGS,
        ),
        "post": oa.operation(
            "Create a coupon (admin); 409 coupon_exists",
            {
                **oa.ok(oa.ref("Coupon"), "Created", 201),
                **oa.errors(401, 403, 409, 415, 422),
            },
            body={
                "type": "object",
                "additionalProperties": False,
                "required": ["code", "kind"],
                "properties": COUPON_FIELDS,
            },
            csrf=True,
            tags=COUPON_ADMIN_TAGS,
        ),
    },
    "/api/admin/coupons/{code}": {
        "get": oa.operation(
            "One coupon (admin); the code in any case",
            {**oa.ok(oa.ref("Coupon")), **oa.errors(401, 403, 404)},
            params=[COUPON_PARAM],
            tags=COUPON_ADMIN_TAGS,
        ),
        "patch": oa.operation(
            "Change a coupon (admin): pause or resume, dates, caps, description, amounts and "
            "products (sent ones replace all); code and kind are fixed once created. A cap "
            "below the redemptions already counted is allowed and noted in notes",
            {**oa.ok(oa.ref("Coupon")), **oa.errors(401, 403, 404, 415, 422)},
            params=[COUPON_PARAM],
            body={"type": "object", "additionalProperties": False, "properties": COUPON_FIELDS},
            csrf=True,
            tags=COUPON_ADMIN_TAGS,
        ),
    },
    "/api/admin/coupons/{code}/redemptions": {
        "get": oa.operation(
            "A coupon's redemptions, newest first: order, customer, status, discount (admin)",
            {**oa.ok(oa.page_of(oa.ref("CouponRedemption"))), **oa.errors(401, 403, 404, 422)},
            params=[COUPON_PARAM, *oa.PAGING_PARAMS],
            tags=COUPON_ADMIN_TAGS,
        )
    },
}
OPENAPI_PATHS.update(COUPON_PATHS)
OPENAPI_SCHEMAS.update({"Coupon": COUPON_SCHEMA, "CouponRedemption": REDEMPTION_SCHEMA})
