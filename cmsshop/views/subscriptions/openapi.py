"""OpenAPI of the customer's subscription routes."""

from __future__ import annotations

from cmsshop import openapi as oa
from cmsshop.models import SUBSCRIPTION_STATUSES
from cmsshop.views.shared.bodies import NULLABLE_DATE_TIME
from cmsshop.views.shared.schema import ID_PARAM

TAGS = ["dashboard", "subscriptions"]

SUBSCRIPTION = {
    "type": "object",
    "required": [
        "id",
        "product",
        "licenseKey",
        "status",
        "paidThrough",
        "nextCharge",
        "endsAt",
        "canCancel",
        "canResume",
        "canUpdatePaymentMethod",
        "planChoices",
    ],
    "properties": {
        "id": {"type": "integer"},
        "product": {"type": "string"},
        "licenseKey": {"type": ["string", "null"]},
        "status": {"type": "string", "enum": list(SUBSCRIPTION_STATUSES)},
        "paidThrough": {
            **NULLABLE_DATE_TIME,
            "description": "The end of the latest period paid for (the provider's date)",
        },
        "nextCharge": {
            "type": ["object", "null"],
            "description": "While it renews itself: when, and the last period's amount "
            "(minor units)",
            "required": ["at", "amount", "currency"],
            "properties": {
                "at": {"type": "string", "format": "date-time"},
                "amount": {"type": ["integer", "null"]},
                "currency": {"type": ["string", "null"]},
            },
        },
        "endsAt": {
            **NULLABLE_DATE_TIME,
            "description": "When access ends, once it will not renew",
        },
        "canCancel": {"type": "boolean"},
        "canResume": {"type": "boolean"},
        "canUpdatePaymentMethod": {"type": "boolean"},
        "planChoices": {
            "type": "array",
            "description": "Higher tiers it can change to now (same cycle), with their "
            "amount each period",
            "items": {
                "type": "object",
                "required": ["product", "name", "amount", "currency"],
                "properties": {
                    "product": {"type": "string"},
                    "name": {"type": "string"},
                    "amount": {"type": "integer"},
                    "currency": {"type": "string"},
                },
            },
        },
    },
}
PLAN_BODY = {
    "type": "object",
    "required": ["product"],
    "additionalProperties": False,
    "properties": {"product": {"type": "string", "description": "One of planChoices"}},
}
MONEY = {
    "type": "object",
    "required": ["amount", "currency"],
    "properties": {"amount": {"type": "integer"}, "currency": {"type": "string"}},
}
CHANGE_ERRORS = oa.errors(401, 403, 404, 409, 503)

OPENAPI_PATHS = {
    "/api/dashboard/subscriptions": {
        "get": oa.operation(
            "Your subscriptions, live ones first",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["items"],
                        "properties": {"items": {"type": "array", "items": oa.ref("Subscription")}},
                    }
                ),
                **oa.errors(401, 403),
            },
            tags=TAGS,
        )
    },
    "/api/dashboard/subscriptions/{id}/cancel": {
        "post": oa.operation(
            "Cancel at the end of the period paid for (409 subscription_not_renewing; "
            "503 subscription_provider_unavailable: nothing changed)",
            {**oa.ok(oa.ref("Subscription")), **CHANGE_ERRORS},
            params=[ID_PARAM],
            csrf=True,
            body_required=False,
            tags=TAGS,
        )
    },
    "/api/dashboard/subscriptions/{id}/resume": {
        "post": oa.operation(
            "Take back a scheduled cancellation before the period ends (409 "
            "subscription_not_cancelling)",
            {**oa.ok(oa.ref("Subscription")), **CHANGE_ERRORS},
            params=[ID_PARAM],
            csrf=True,
            body_required=False,
            tags=TAGS,
        )
    },
    "/api/dashboard/subscriptions/{id}/plan-preview": {
        "post": oa.operation(
            "What changing to a higher tier costs now (the provider's proration for the rest "
            "of the period) and each period after (422 for a product not in planChoices; "
            "409 subscription_plan_change_unsupported for a provider that cannot)",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["product", "name", "chargedNow", "then", "nextChargeAt"],
                        "properties": {
                            "product": {"type": "string"},
                            "name": {"type": "string"},
                            "chargedNow": MONEY,
                            "then": MONEY,
                            "nextChargeAt": NULLABLE_DATE_TIME,
                        },
                    }
                ),
                **oa.errors(401, 403, 404, 409, 415, 422, 503),
            },
            params=[ID_PARAM],
            body=PLAN_BODY,
            csrf=True,
            tags=TAGS,
        )
    },
    "/api/dashboard/subscriptions/{id}/plan": {
        "post": oa.operation(
            "Change to a higher tier now: the provider charges the rest of the period at "
            "once, and the license moves when it confirms that payment",
            {**oa.ok(oa.ref("Subscription")), **oa.errors(401, 403, 404, 409, 415, 422, 503)},
            params=[ID_PARAM],
            body=PLAN_BODY,
            csrf=True,
            tags=TAGS,
        )
    },
    "/api/dashboard/subscriptions/{id}/payment-method": {
        "post": oa.operation(
            "Where to send the customer to replace the card: the provider's own page "
            "(a link made now, valid for minutes)",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["redirectUrl"],
                        "properties": {"redirectUrl": {"type": "string", "format": "uri"}},
                    }
                ),
                **CHANGE_ERRORS,
            },
            params=[ID_PARAM],
            csrf=True,
            body_required=False,
            tags=TAGS,
        )
    },
}
OPENAPI_SCHEMAS = {"Subscription": SUBSCRIPTION}


# --- the admin API ------------------------------------------------------------------------

ADMIN_TAGS = ["admin", "subscriptions"]
ADMIN_SUBSCRIPTION_FIELDS = {
    "id": {"type": "integer"},
    "provider": {"type": "string"},
    "providerSubscriptionId": {"type": "string"},
    "customer": {"type": "string", "description": "The customer's e-mail address"},
    "product": {"type": ["string", "null"]},
    "licenseKey": {"type": ["string", "null"]},
    "status": {"type": "string", "enum": list(SUBSCRIPTION_STATUSES)},
    "paidThrough": NULLABLE_DATE_TIME,
    "currentPeriodEnd": NULLABLE_DATE_TIME,
    "cancelAtPeriodEnd": {"type": "boolean"},
    "syncedAt": NULLABLE_DATE_TIME,
    "endedAt": NULLABLE_DATE_TIME,
    "createdAt": NULLABLE_DATE_TIME,
}
ADMIN_SUBSCRIPTION = {
    "type": "object",
    "required": list(ADMIN_SUBSCRIPTION_FIELDS),
    "properties": ADMIN_SUBSCRIPTION_FIELDS,
}
ADMIN_SUBSCRIPTION_DETAIL = {
    "type": "object",
    "required": [*ADMIN_SUBSCRIPTION_FIELDS, "orderNumber", "periods", "timeline"],
    "properties": {
        **ADMIN_SUBSCRIPTION_FIELDS,
        "orderNumber": {"type": "string", "description": "The order that bought it"},
        "periods": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["invoice", "orderNumber", "start", "end", "amount", "currency"],
                "properties": {
                    "invoice": {"type": "string", "description": "The provider's invoice id"},
                    "orderNumber": {"type": "string"},
                    "start": {"type": "string", "format": "date-time"},
                    "end": {"type": "string", "format": "date-time"},
                    "amount": {"type": "integer"},
                    "currency": {"type": "string"},
                },
            },
        },
        "timeline": {
            "type": "array",
            "description": "Periods, provider events and license changes, newest first",
            "items": {
                "type": "object",
                "required": ["at", "kind", "text", "orderNumber"],
                "properties": {
                    "at": {"type": "string", "format": "date-time"},
                    "kind": {"type": "string", "enum": ["period", "event", "license"]},
                    "text": {"type": "string"},
                    "orderNumber": {"type": ["string", "null"]},
                },
            },
        },
    },
}
ADMIN_PATHS = {
    "/api/admin/subscriptions": {
        "get": oa.operation(
            "Subscriptions, newest first, of one status or all (admin)",
            {**oa.ok(oa.page_of(oa.ref("AdminSubscription"))), **oa.errors(401, 403, 422)},
            params=[
                *oa.PAGING_PARAMS,
                oa.query_param(
                    "status", {"type": "string", "enum": list(SUBSCRIPTION_STATUSES)}, "Filter"
                ),
            ],
            tags=ADMIN_TAGS,
        )
    },
    "/api/admin/subscriptions/{id}": {
        "get": oa.operation(
            "One subscription with its paid periods and timeline (admin)",
            {**oa.ok(oa.ref("AdminSubscriptionDetail")), **oa.errors(401, 403, 404)},
            params=[ID_PARAM],
            tags=ADMIN_TAGS,
        )
    },
    "/api/admin/subscriptions/{id}/resync": {
        "post": oa.operation(
            "Repair the subscription from the provider's account of it: paid invoices not "
            "recorded yet are recorded, each once, and the status is the provider's "
            "(admin; error says why the provider could not be asked, nothing changed then)",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["changes", "error"],
                        "properties": {
                            "changes": {"type": "array", "items": {"type": "string"}},
                            "error": {"type": ["string", "null"]},
                        },
                    }
                ),
                **oa.errors(401, 403, 404),
            },
            params=[ID_PARAM],
            csrf=True,
            body_required=False,
            tags=ADMIN_TAGS,
        )
    },
}
ADMIN_SCHEMAS = {
    "AdminSubscription": ADMIN_SUBSCRIPTION,
    "AdminSubscriptionDetail": ADMIN_SUBSCRIPTION_DETAIL,
}
