"""Coupons in the admin JSON API (admin role, CSRF token on writes): list, create, read,
change (pause and resume included) and a coupon's redemptions. The console's pages
(admin_pages.py) read their forms with the same schema."""

from __future__ import annotations

import datetime as dt
import re

import colander
from pyramid.view import view_config

from cmsshop.models import COUPON_KINDS
from cmsshop.models.meta import MAX_ID
from cmsshop.security import ADMIN
from cmsshop.services.checkout import coupons_admin
from cmsshop.services.store.currencies import CURRENCY_CODE
from cmsshop.util import isoformat_z
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.json import (
    StrictMapping,
    StrictSequence,
    StrictString,
    page_json,
    read_json,
    read_page_request,
)
from cmsshop.views.shared.schema import (
    bool_node,
    nullable_int_node,
    optional,
    slug_node,
    text_node,
)
from cmsshop.views.store.api import MAX_AMOUNT

MAX_CURRENCIES = 50
MAX_PRODUCTS = 100
MAX_DESCRIPTION = 200
# What a client may send as a code (the service stores it upper-case).
CODE_INPUT = r"^[A-Za-z0-9][A-Za-z0-9_-]{2,39}$"
CODE_RULE = "3-40 of A-Z, 0-9, _ and -, starting with a letter or digit"
# RFC 3339 with its offset (Z or +hh:mm); fractions of a second are dropped.
DATE_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)
FIRST_YEAR, LAST_YEAR = 1970, 9998

# JSON names -> the service's.
SERVICE_NAMES = {
    "percentOff": "percent_off",
    "validFrom": "valid_from",
    "validUntil": "valid_until",
    "maxRedemptions": "max_redemptions",
    "maxPerCustomer": "max_per_customer",
}


class UtcDateTime(colander.SchemaType):
    """A time with its offset (``2026-12-01T00:00:00Z``), as aware UTC; null -> None."""

    def deserialize(self, node, cstruct):
        if cstruct is colander.null or cstruct is None:
            return None if cstruct is None else cstruct
        if not isinstance(cstruct, str) or not DATE_TIME.fullmatch(cstruct):
            raise colander.Invalid(node, "a time with its offset, e.g. 2026-12-01T00:00:00Z")
        text = cstruct.upper().replace("Z", "+00:00")
        # Python reads six digits of a fraction at most; a time is kept to the second.
        text = re.sub(r"\.[0-9]+", "", text)
        try:
            value = dt.datetime.fromisoformat(text)
        except ValueError:
            raise colander.Invalid(node, "is not a valid time") from None
        if not FIRST_YEAR <= value.year <= LAST_YEAR:
            raise colander.Invalid(node, f"a year from {FIRST_YEAR} to {LAST_YEAR}")
        return value.astimezone(dt.UTC)

    def serialize(self, node, appstruct):
        return colander.null if appstruct in (colander.null, None) else isoformat_z(appstruct)


class AmountSchema(colander.MappingSchema):
    schema_type = StrictMapping
    amountOff = nullable_int_node(1, MAX_AMOUNT, missing=None)  # noqa: N815
    minSubtotal = nullable_int_node(0, MAX_AMOUNT, missing=None)  # noqa: N815


class CurrencyAmounts(colander.SchemaType):
    """``{"EUR": {"amountOff": 500, "minSubtotal": 2000}}`` -> ``{"EUR": {"amount_off":
    500, "min_subtotal": 2000}}``; errors name the field (``amounts.EUR.amountOff``)."""

    def deserialize(self, node, cstruct):
        if cstruct is colander.null:
            return cstruct
        if not isinstance(cstruct, dict):
            raise colander.Invalid(node, "must be an object keyed by currency code")
        if len(cstruct) > MAX_CURRENCIES:
            raise colander.Invalid(node, f"at most {MAX_CURRENCIES} currencies")
        for key in cstruct:
            if not CURRENCY_CODE.match(key):
                raise colander.Invalid(node, "keys are three-letter currency codes, e.g. EUR")
        schema = colander.SchemaNode(
            StrictMapping(), *[AmountSchema(name=key) for key in cstruct], name=node.name
        )
        data = schema.deserialize(cstruct)
        return {
            currency: {"amount_off": values["amountOff"], "min_subtotal": values["minSubtotal"]}
            for currency, values in data.items()
        }

    def serialize(self, node, appstruct):
        return appstruct


def _unique(node, values):
    if len(set(values)) != len(values):
        raise colander.Invalid(node, "each product once")


class ProductsSchema(colander.SequenceSchema):
    schema_type = StrictSequence
    validator = colander.All(colander.Length(max=MAX_PRODUCTS), _unique)
    product = slug_node()


class CouponSchema(colander.MappingSchema):
    schema_type = StrictMapping
    code = colander.SchemaNode(
        StrictString(allow_empty=True), validator=colander.Regex(CODE_INPUT, CODE_RULE)
    )
    description = text_node(MAX_DESCRIPTION, missing="")
    kind = colander.SchemaNode(StrictString(), validator=colander.OneOf(COUPON_KINDS))
    percentOff = nullable_int_node(1, 100, missing=None)  # noqa: N815
    amounts = colander.SchemaNode(CurrencyAmounts(), missing={})
    validFrom = colander.SchemaNode(UtcDateTime(), missing=None)  # noqa: N815
    validUntil = colander.SchemaNode(UtcDateTime(), missing=None)  # noqa: N815
    maxRedemptions = nullable_int_node(1, MAX_ID, missing=None)  # noqa: N815
    maxPerCustomer = nullable_int_node(1, MAX_ID, missing=None)  # noqa: N815
    products = ProductsSchema(missing=[])
    paused = bool_node(missing=False)


def coupon_patch_schema() -> colander.SchemaNode:
    """Every field optional; ``code`` and ``kind`` are accepted only as they are."""
    return optional(CouponSchema())


def service_names(data: dict) -> dict:
    return {SERVICE_NAMES.get(name, name): value for name, value in data.items()}


# --- bodies --------------------------------------------------------------------------------


def coupon_body(card: coupons_admin.CouponCard) -> dict:
    coupon = card.coupon
    return {
        "code": coupon.code,
        "description": coupon.description,
        "kind": coupon.kind,
        "percentOff": coupon.percent_off,
        "amounts": {
            amount.currency: {"amountOff": amount.amount_off, "minSubtotal": amount.min_subtotal}
            for amount in coupon.amounts
        },
        "validFrom": isoformat_z(coupon.valid_from),
        "validUntil": isoformat_z(coupon.valid_until),
        "maxRedemptions": coupon.max_redemptions,
        "maxPerCustomer": coupon.max_per_customer,
        "products": card.product_slugs,
        "paused": coupon.paused,
        "state": card.state,
        "counted": coupon.reserved,
        "redemptions": dict(card.redemptions),
        "createdAt": isoformat_z(coupon.created_at),
        "updatedAt": isoformat_z(coupon.updated_at),
    }


def redemption_body(row) -> dict:
    redemption, number, email = row
    return {
        "order": number,
        "customer": email,
        "status": redemption.status,
        "discount": redemption.discount,
        "currency": redemption.currency,
        "createdAt": isoformat_z(redemption.created_at),
        "updatedAt": isoformat_z(redemption.updated_at),
    }


# --- views ---------------------------------------------------------------------------------


@view_config(
    route_name="store.admin_coupons", request_method="GET", renderer="json", permission=ADMIN
)
def list_coupons(request):
    no_store(request)
    page = coupons_admin.list_coupons(request.db, read_page_request(request))
    return page_json(page, coupon_body)


@view_config(
    route_name="store.admin_coupons", request_method="POST", renderer="json", permission=ADMIN
)
def create_coupon(request):
    data = service_names(read_json(request, CouponSchema()))
    coupon = coupons_admin.create_coupon(request.db, data)
    request.response.status = 201
    return coupon_body(coupons_admin.card(request.db, coupon))


@view_config(
    route_name="store.admin_coupon", request_method="GET", renderer="json", permission=ADMIN
)
def show_coupon(request):
    no_store(request)
    coupon = coupons_admin.find_coupon(request.db, request.matchdict["code"])
    return coupon_body(coupons_admin.card(request.db, coupon))


@view_config(
    route_name="store.admin_coupon", request_method="PATCH", renderer="json", permission=ADMIN
)
def update_coupon(request):
    code = request.matchdict["code"]
    coupons_admin.find_coupon(request.db, code)  # 404 before looking at the body
    changes = service_names(read_json(request, coupon_patch_schema()))
    coupon, notes = coupons_admin.update_coupon(request.db, code, changes)
    return {**coupon_body(coupons_admin.card(request.db, coupon)), "notes": notes}


@view_config(
    route_name="store.admin_coupon_redemptions",
    request_method="GET",
    renderer="json",
    permission=ADMIN,
)
def list_redemptions(request):
    no_store(request)
    coupon = coupons_admin.find_coupon(request.db, request.matchdict["code"])
    page = coupons_admin.list_redemptions(request.db, coupon, read_page_request(request))
    return page_json(page, redemption_body)
