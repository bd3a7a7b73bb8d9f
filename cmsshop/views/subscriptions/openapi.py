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


def change(summary: str, answer: dict, body: dict | None = None) -> dict:
    """A POST on one of the customer's subscriptions: asked of the provider (503 when it
    cannot be reached), 409 when it makes no sense now; a body adds 415 and 422."""
    errors = (401, 403, 404, 409, 415, 422, 503) if body else (401, 403, 404, 409, 503)
    return oa.operation(
        summary,
        {**oa.ok(answer), **oa.errors(*errors)},
        params=[ID_PARAM],
        body=body,
        body_required=body is not None,
        csrf=True,
        tags=TAGS,
    )


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
        "post": change(
            "Cancel at the end of the period paid for (409 subscription_not_renewing; "
            "503 subscription_provider_unavailable: nothing changed)",
            oa.ref("Subscription"),
        )
    },
    "/api/dashboard/subscriptions/{id}/resume": {
        "post": change(
            "Take back a scheduled cancellation before the period ends (409 "
            "subscription_not_cancelling)",
            oa.ref("Subscription"),
        )
    },
    "/api/dashboard/subscriptions/{id}/plan-preview": {
        "post": change(
            "What changing to a higher tier costs now (the provider's proration for the rest "
            "of the period) and each period after (422 for a product not in planChoices; "
            "409 subscription_plan_change_unsupported for a provider that cannot, "
            "subscription_in_trial during a free trial)",
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
            },
            body=PLAN_BODY,
        )
    },
    "/api/dashboard/subscriptions/{id}/plan": {
        "post": change(
            "Change to a higher tier now: the provider charges the rest of the period at "
            "once, and the license moves when it confirms that payment",
            oa.ref("Subscription"),
            body=PLAN_BODY,
        )
    },
    "/api/dashboard/subscriptions/{id}/payment-method": {
        "post": change(
            "Where to send the customer to replace the card: the provider's own page "
            "(a link made now, valid for minutes)",
            {
                "type": "object",
                "required": ["redirectUrl"],
                "properties": {"redirectUrl": {"type": "string", "format": "uri"}},
            },
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
