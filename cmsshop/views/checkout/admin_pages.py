"""Coupons in the admin console: the list with their use, the form that creates one, a
coupon's page with its usage list, and its Pause/Resume button. The form is read into
the JSON route's body and validated by its schema (views/checkout/admin_api.py), so a
field is refused for the same reason in both.

Amounts are typed in major units (``5.00`` for 500 cents), one field per currency for
the amount off and one for the minimum order; times are typed as UTC
(``datetime-local`` fields, which carry no zone).
"""

from __future__ import annotations

import re

import colander
from pyramid.view import view_config

from cmsshop.errors import ApiError
from cmsshop.security import ADMIN
from cmsshop.services.checkout import coupons_admin
from cmsshop.services.store import currencies
from cmsshop.views.checkout.admin_api import CouponSchema, service_names
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.forms import FormInvalid, field_errors, posted_value, see_other
from cmsshop.views.shared.json import flatten_errors, read_page_request

NOTICES = {
    "coupon_created": "The coupon was created.",
    "coupon_paused": "The coupon is paused: checkouts refuse it until it is resumed.",
    "coupon_resumed": "The coupon is active again.",
}
TEXT_FIELDS = (
    "code",
    "description",
    "kind",
    "percent_off",
    "valid_from",
    "valid_until",
    "max_redemptions",
    "max_per_customer",
)
# The JSON body's field -> the form's.
FORM_FIELDS = {
    "percentOff": "percent_off",
    "validFrom": "valid_from",
    "validUntil": "valid_until",
    "maxRedemptions": "max_redemptions",
    "maxPerCustomer": "max_per_customer",
}
AMOUNT_ERROR = re.compile(r"^amounts\.([A-Z]{3})\.(amountOff|minSubtotal)$")
INTEGER = re.compile(r"^[0-9]{1,12}\Z")
# What a datetime-local field sends (seconds optional), read as UTC.
LOCAL_TIME = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2})?\Z")


def amount_field(code: str) -> str:
    return f"amount_off_{code}"


def minimum_field(code: str) -> str:
    return f"min_subtotal_{code}"


def _integer_or_text(raw: str):
    raw = raw.strip()
    if raw == "":
        return None
    return int(raw) if INTEGER.match(raw) else raw


def _time_or_text(raw: str):
    raw = raw.strip()
    if raw == "":
        return None
    if LOCAL_TIME.match(raw):
        return f"{raw}:00Z" if len(raw) == 16 else f"{raw}Z"
    return raw


class CouponForm:
    """A posted coupon form, as the JSON body of CouponSchema."""

    def __init__(self, request, shown_currencies: list, choices: list[tuple[str, str]]):
        self.currencies = shown_currencies
        self.choices = {slug for slug, _ in choices}
        self.typed: dict = {name: posted_value(request, name) for name in TEXT_FIELDS}
        for currency in shown_currencies:
            for name in (amount_field(currency.code), minimum_field(currency.code)):
                self.typed[name] = posted_value(request, name)
        self.typed["paused"] = "on" if "paused" in request.POST else ""
        self.typed["products"] = [
            slug for slug in request.POST.getall("products") if slug in self.choices
        ]
        self.unknown_products = [
            slug for slug in request.POST.getall("products") if slug not in self.choices
        ]

    def read(self) -> dict:
        """The validated fields in the service's names; FormInvalid if any is wrong."""
        errors: dict[str, str] = {}
        amounts: dict[str, dict] = {}
        for currency in self.currencies:
            values = {}
            for key, name in (
                ("amountOff", amount_field(currency.code)),
                ("minSubtotal", minimum_field(currency.code)),
            ):
                raw = self.typed[name]
                if not raw.strip():
                    continue
                try:
                    values[key] = currencies.parse_major_amount(raw, currency.decimals)
                except ValueError as exc:
                    errors[name] = str(exc)
            if values:
                amounts[currency.code] = values
        if self.unknown_products:
            errors["products"] = "choose products from the list"
        body = {
            "code": self.typed["code"].strip(),
            "description": self.typed["description"].strip(),
            "kind": self.typed["kind"],
            "percentOff": _integer_or_text(self.typed["percent_off"]),
            "amounts": amounts,
            "validFrom": _time_or_text(self.typed["valid_from"]),
            "validUntil": _time_or_text(self.typed["valid_until"]),
            "maxRedemptions": _integer_or_text(self.typed["max_redemptions"]),
            "maxPerCustomer": _integer_or_text(self.typed["max_per_customer"]),
            "products": self.typed["products"],
            "paused": self.typed["paused"] == "on",
        }
        if body["kind"] != "percent":
            body["percentOff"] = None  # the field is shown for both kinds; only one uses it
        try:
            data = CouponSchema().deserialize(body)
        except colander.Invalid as exc:
            errors.update(self.form_errors(flatten_errors(exc)))
        if errors:
            raise FormInvalid(errors, self.typed)
        return service_names(data)

    def form_errors(self, errors: dict[str, str]) -> dict[str, str]:
        """Errors named as in the JSON body (``amounts.EUR.amountOff``) -> form fields."""
        result: dict[str, str] = {}
        for key, message in errors.items():
            match = AMOUNT_ERROR.match(key)
            if match:
                code, part = match.groups()
                field = amount_field(code) if part == "amountOff" else minimum_field(code)
            elif key.startswith("products"):
                field = "products"
            else:
                field = FORM_FIELDS.get(key, key)
            if field not in self.typed:
                field = "form"
            result.setdefault(field, message)
        return result

    def service_errors(self, exc: ApiError) -> dict[str, str]:
        if exc.code == "coupon_exists":
            return {"code": exc.message}
        return self.form_errors(field_errors(exc))


def shown_currencies(session) -> list:
    return [c for c in currencies.list_currencies(session, enabled_only=False) if c.enabled]


def currency_table(session) -> dict:
    return {c.code: c for c in currencies.list_currencies(session, enabled_only=False)}


# --- list ----------------------------------------------------------------------------------


@view_config(
    route_name="pages.admin_coupons",
    request_method="GET",
    renderer="admin/checkout/coupons.html",
    permission=ADMIN,
)
def coupon_list(request):
    no_store(request)
    page = coupons_admin.list_coupons(request.db, read_page_request(request))
    return {
        "admin_section": "coupons",
        "page": page,
        "currencies": currency_table(request.db),
    }


# --- create --------------------------------------------------------------------------------


def _new_page(request, form: dict, errors: dict, status: int = 200) -> dict:
    request.response.status = status
    no_store(request)
    return {
        "admin_section": "coupons",
        "currencies": shown_currencies(request.db),
        "choices": coupons_admin.product_choices(request.db),
        "form": form,
        "errors": errors,
    }


@view_config(
    route_name="pages.admin_coupon_new",
    request_method="GET",
    renderer="admin/checkout/coupon_new.html",
    permission=ADMIN,
)
def new_coupon(request):
    return _new_page(request, {"kind": "percent", "products": []}, {})


@view_config(
    route_name="pages.admin_coupon_new",
    request_method="POST",
    renderer="admin/checkout/coupon_new.html",
    permission=ADMIN,
)
def create_coupon(request):
    form = CouponForm(
        request, shown_currencies(request.db), coupons_admin.product_choices(request.db)
    )
    try:
        coupon = coupons_admin.create_coupon(request.db, form.read())
    except FormInvalid as exc:
        return _new_page(request, exc.form, exc.errors, 422)
    except ApiError as exc:
        return _new_page(request, form.typed, form.service_errors(exc), exc.status)
    return see_other(request, f"/admin/coupons/{coupon.code}", notice="coupon_created")


# --- one coupon ----------------------------------------------------------------------------


@view_config(
    route_name="pages.admin_coupon",
    request_method="GET",
    renderer="admin/checkout/coupon.html",
    permission=ADMIN,
)
def show_coupon(request):
    no_store(request)
    coupon = coupons_admin.find_coupon(request.db, request.matchdict["code"])
    page = coupons_admin.list_redemptions(request.db, coupon, read_page_request(request))
    return {
        "admin_section": "coupons",
        "card": coupons_admin.card(request.db, coupon),
        "page": page,
        "currencies": currency_table(request.db),
    }


def _set_paused(request, paused: bool):
    coupon = coupons_admin.set_paused(request.db, request.matchdict["code"], paused)
    notice = "coupon_paused" if paused else "coupon_resumed"
    return see_other(request, f"/admin/coupons/{coupon.code}", notice=notice)


@view_config(route_name="pages.admin_coupon_pause", request_method="POST", permission=ADMIN)
def pause_coupon(request):
    return _set_paused(request, True)


@view_config(route_name="pages.admin_coupon_resume", request_method="POST", permission=ADMIN)
def resume_coupon(request):
    return _set_paused(request, False)
