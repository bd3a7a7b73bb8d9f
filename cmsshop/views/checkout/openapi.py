"""The OpenAPI part of checkout: placing an order and the development sandbox."""

from __future__ import annotations

from cmsshop import openapi as oa
from cmsshop.services.checkout import orders as co
from cmsshop.views.checkout.api import KEY, SLUG
from cmsshop.views.shared.bodies import ORDER_SCHEMA

# The buyer's billing details (schema of the tax feature, views/tax/billing_openapi.py):
# required, since the country decides the tax; errors name billing.<field>, e.g.
# billing.country for an unknown country, billing.vatId for an invalid VAT ID.
BILLING = oa.ref("BillingDetailsInput")
# The buyer's acceptance of the published terms of sale: required (true) only while the
# shop publishes terms; a 422 on acceptTerms otherwise.
ACCEPT_TERMS = {
    "type": "boolean",
    "description": "true: the buyer accepts the terms of sale at /legal/terms. Required "
    "when the shop publishes terms (422 on acceptTerms otherwise)",
}

CART_SCHEMA = {
    "type": "object",
    "required": [
        "id",
        "currency",
        "lines",
        "subtotal",
        "discount",
        "total",
        "coupon",
        "readyToPay",
    ],
    "properties": {
        "id": {"type": "string"},
        "currency": {"type": ["string", "null"]},
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [
                    "product",
                    "name",
                    "quantity",
                    "maxQuantity",
                    "licensed",
                    "seats",
                    "unitAmount",
                    "seenUnitAmount",
                    "discount",
                    "amount",
                    "problem",
                    "problemMessage",
                ],
                "properties": {
                    "product": {"type": ["string", "null"]},
                    "name": {"type": "string"},
                    "quantity": {"type": "integer", "minimum": 1},
                    "maxQuantity": {"type": "integer"},
                    "licensed": {"type": "boolean"},
                    "seats": {
                        "type": ["integer", "null"],
                        "description": "Activations of the one license this line issues "
                        "(quantity x the product's seats); null: not licensed",
                    },
                    "unitAmount": {"type": ["integer", "null"]},
                    "seenUnitAmount": {
                        "type": ["integer", "null"],
                        "description": "The unit price the buyer was shown last",
                    },
                    "discount": {"type": "integer"},
                    "amount": {"type": "integer"},
                    "problem": {"enum": [None, "price_changed", "unavailable"]},
                    "problemMessage": {"type": ["string", "null"]},
                },
            },
        },
        "subtotal": {"type": "integer"},
        "discount": {"type": "integer"},
        "total": {"type": "integer"},
        "coupon": {
            "type": ["object", "null"],
            "required": ["code", "problem"],
            "properties": {
                "code": {"type": "string"},
                "problem": {
                    "type": ["object", "null"],
                    "required": ["code", "message"],
                    "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
                },
            },
        },
        "readyToPay": {
            "type": "boolean",
            "description": "Not empty, nothing changed since the buyer saw it, coupon valid",
        },
    },
}
PLACED_SCHEMA = {
    "type": "object",
    "required": ["order", "redirectUrl", "sandbox", "free"],
    "properties": {
        "order": oa.ref("CheckoutOrder"),
        "redirectUrl": {"type": "string"},
        "sandbox": {"type": "boolean"},
        "free": {
            "type": "boolean",
            "description": "The order cost nothing and is paid and delivered already",
        },
    },
}
OPENAPI_SCHEMAS = {"CheckoutOrder": ORDER_SCHEMA, "Cart": CART_SCHEMA}
CART_ID = oa.path_param("cart")
CART_TAGS = ["store", "checkout"]
CART_ERRORS = (403, 404, 415, 422)


def cart_answer(summary: str, *statuses: int, body=None, params=(), status: int = 200):
    return oa.operation(
        summary,
        {
            **oa.ok(oa.ref("Cart"), "OK" if status == 200 else "Created", status),
            **oa.errors(*statuses),
        },
        body=body,
        params=[CART_ID, *params],
        csrf=True,
        tags=CART_TAGS,
    )


CART_PATHS = {
    "/api/store/carts": {
        "post": oa.operation(
            "The visitor's cart (anonymous or logged in): created (201) by the first call, "
            "the same cart (200) after",
            {
                **oa.ok(oa.ref("Cart"), "The cart the caller has"),
                **oa.ok(oa.ref("Cart"), "Created", 201),
                **oa.errors(400, 403, 415, 422),
            },
            body={
                "type": "object",
                "additionalProperties": False,
                "properties": {"currency": {"type": "string", "pattern": "^[A-Z]{3}$"}},
            },
            csrf=True,
            tags=CART_TAGS,
        )
    },
    "/api/store/carts/{cart}": {
        "get": oa.operation(
            "The cart priced now: lines, discount, totals, and what changed since the buyer saw it",
            {**oa.ok(oa.ref("Cart")), **oa.errors(404)},
            params=[CART_ID],
            tags=CART_TAGS,
        ),
        "patch": cart_answer(
            "Change the cart's currency (its prices become the ones the buyer saw)",
            *CART_ERRORS,
            body={
                "type": "object",
                "additionalProperties": False,
                "properties": {"currency": {"type": "string", "pattern": "^[A-Z]{3}$"}},
            },
        ),
    },
    "/api/store/carts/{cart}/lines/{product}": {
        "put": cart_answer(
            "Set a product's quantity in the cart (added if absent). For a licensed "
            "product the quantity is the number of seat packs: one license with quantity x "
            "the product's seats",
            *CART_ERRORS,
            body={
                "type": "object",
                "required": ["quantity"],
                "additionalProperties": False,
                "properties": {"quantity": {"type": "integer", "minimum": 1}},
            },
            params=[oa.path_param("product")],
        ),
        "delete": cart_answer(
            "Remove a product from the cart", 403, 404, params=[oa.path_param("product")]
        ),
    },
    "/api/store/carts/{cart}/coupon": {
        "put": cart_answer(
            "Apply a discount code (one per order); refused with the coupon's own code "
            "(coupon_unknown, coupon_expired, ...)",
            *CART_ERRORS,
            body={
                "type": "object",
                "required": ["code"],
                "additionalProperties": False,
                "properties": {"code": {"type": "string", "minLength": 1, "maxLength": 40}},
            },
        ),
        "delete": cart_answer("Remove the discount code", 403, 404),
    },
    "/api/store/carts/{cart}/accept-prices": {
        "post": cart_answer(
            "Accept today's prices (and drop products no longer for sale) after a change",
            403,
            404,
        )
    },
    "/api/store/carts/{cart}/checkout": {
        "post": oa.operation(
            "Place the cart's order: logged in, or as a guest with an e-mail address (the "
            "order goes to that address's account; the answer is the same either way). A "
            "free order is delivered at once; otherwise go to redirectUrl to pay",
            {
                **oa.ok(PLACED_SCHEMA, "Created", 201),
                **oa.errors(403, 404, 409, 415, 422, 429, 503),
            },
            body={
                "type": "object",
                "required": ["billing"],
                "additionalProperties": False,
                "properties": {
                    "provider": {"type": "string", "minLength": 1, "maxLength": 40},
                    "email": {
                        "type": "string",
                        "format": "email",
                        "maxLength": 320,
                        "description": "Required when not logged in",
                    },
                    "name": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 200,
                        "description": "A guest's name, for the account the order goes to",
                    },
                    "billing": BILLING,
                    "acceptTerms": ACCEPT_TERMS,
                },
            },
            params=[CART_ID],
            csrf=True,
            tags=CART_TAGS,
        )
    },
}

OPENAPI_PATHS = {
    **CART_PATHS,
    "/api/store/checkout": {
        "post": oa.operation(
            "Place an order (priced from the database, committed as pending) and get the "
            "provider's payment page",
            {
                **oa.ok(PLACED_SCHEMA, "Created", 201),
                **oa.errors(401, 403, 415, 422, 429, 503),
            },
            body={
                "type": "object",
                "required": ["items", "billing"],
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
                                    "properties": {
                                        "product": SLUG,
                                        "quantity": {
                                            "type": "integer",
                                            "minimum": 1,
                                            "description": "seat packs of a licensed product",
                                        },
                                    },
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
                    "coupon": {"type": "string", "minLength": 1, "maxLength": 40},
                    "billing": BILLING,
                    "acceptTerms": ACCEPT_TERMS,
                },
            },
            csrf=True,
            tags=["store", "payments"],
        )
    },
    "/api/store/checkout/sandbox/{number}": {
        "get": oa.operation(
            "Development payment sandbox: how to simulate the provider's webhook (the "
            "customer's order, or the guest order this browser placed)",
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
                **oa.errors(404),
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
