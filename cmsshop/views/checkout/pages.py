"""The checkout hand-off as pages: the buy form's POST (the JSON route's schema nodes and
its service, views.checkout.api.place_order), the development sandbox page, and the pages
the provider sends the buyer back to. The return pages only read: the order becomes paid
when the provider's signed webhook arrives, never because a browser came back."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import colander
from pyramid.httpexceptions import HTTPSeeOther
from pyramid.view import view_config

from cmsshop.errors import NotFound, ValidationFailed
from cmsshop.security import CUSTOMER
from cmsshop.services.checkout import orders as co
from cmsshop.services.store import currencies, text
from cmsshop.views.checkout.api import (
    CheckoutSchema,
    ItemSchema,
    one_item_form,
    place_order,
    sandbox_order,
)
from cmsshop.views.shared.forms import FormInvalid, field_errors, read_form, see_other
from cmsshop.views.shared.json import StrictMapping, query_value, validate
from cmsshop.views.shared.product_page import product_page_values

ORDER_NUMBER = re.compile(r"^[A-Z0-9-]{1,32}$")
# How often the return page asks again while the provider's webhook is awaited
# (static/checkout-status.js says why it is not a meta refresh).
POLL_SECONDS = 5


def checkout_form_schema() -> colander.SchemaNode:
    """The buy form: one product, with the JSON route's own nodes for each field."""
    json_schema = CheckoutSchema()
    schema = colander.SchemaNode(StrictMapping())
    product = ItemSchema()["product"].clone()
    product.missing = colander.required
    schema.add(product)
    schema.add(json_schema["currency"].clone())
    schema.add(json_schema["provider"].clone())
    return schema


def form_errors(errors: dict[str, str]) -> dict[str, str]:
    """The service's errors on the form's fields (its ``items.0.product`` is the form's
    one product, shown above the form)."""
    shown = {}
    for name, message in errors.items():
        if name.startswith("items"):
            shown["form"] = f"This product: {message}."
        else:
            shown[name] = message
    return shown


def posted_slug(request) -> str | None:
    slug = request.POST.get("product", "")
    return slug if text.is_slug(slug) else None


def license_item(request) -> dict | None:
    """A renewal or upgrade posted from /account/licenses (None: a product purchase)."""
    if "renew" in request.POST:
        return {"renew": request.POST.get("renew")}
    if "upgrade" in request.POST:
        return {"upgrade": request.POST.get("upgrade"), "to": request.POST.get("to")}
    return None


def license_checkout(request, item: dict):
    """Check out a renewal or upgrade; a refusal is an error page naming why (the
    account's licenses page offers only what can be bought, so this is rare)."""
    if request.user is None:
        return see_other(request, f"/login?{urlencode({'next': '/account/licenses'})}")
    try:
        # The JSON route's rules for an item (one form, lengths, storable text).
        posted = {key: value for key, value in item.items() if value is not None}
        checked = validate(ItemSchema(validator=one_item_form), posted)
        placed = place_order(
            request,
            [{key: value for key, value in checked.items() if value is not None}],
            request.POST.get("currency") or None,
            request.POST.get("provider") or None,
        )
    except ValidationFailed as exc:
        errors = field_errors(exc)
        raise ValidationFailed(errors, message="; ".join(errors.values())) from None
    if placed.sandbox:
        return see_other(request, f"/checkout/sandbox/{placed.order.number}")
    return HTTPSeeOther(location=placed.redirect_url)


@view_config(route_name="pages.checkout", request_method="POST", renderer="store/product.html")
def checkout_submit(request):
    item = license_item(request)
    if item is not None:
        return license_checkout(request, item)
    slug = posted_slug(request)
    if request.user is None:
        # Log in (or register), then come back to the product to buy it.
        back = f"/products/{slug}" if slug else "/products"
        return see_other(request, f"/login?{urlencode({'next': back})}")
    typed = {name: request.POST.get(name, "") for name in ("currency", "provider")}
    try:
        data = read_form(request, checkout_form_schema())
        placed = place_order(
            request, [{"product": data["product"]}], data["currency"], data["provider"]
        )
    except FormInvalid as exc:
        errors, typed = form_errors(exc.errors), {**typed, **exc.form}
    except ValidationFailed as exc:
        errors = form_errors(field_errors(exc))
    else:
        if placed.sandbox:
            return see_other(request, f"/checkout/sandbox/{placed.order.number}")
        return HTTPSeeOther(location=placed.redirect_url)
    if slug is None:
        raise NotFound("There is no such product.", code="product_not_found")
    request.response.status = 422
    return product_page_values(request, slug, None, errors=errors, form=typed)


def read_own_order(request, number: str | None):
    """The logged-in customer's order ``number``; a 404 page for anyone else's."""
    order = None
    if number and ORDER_NUMBER.match(number):
        order = co.find_customer_order(request.db, request.user.id, number)
    if order is None:
        raise NotFound("You have no order with this number.", code="order_not_found")
    return order


def order_values(request, order) -> dict:
    return {
        "order": order,
        "order_currency": currencies.find_currency(request.db, order.currency),
    }


@view_config(
    route_name="pages.checkout_sandbox",
    request_method="GET",
    renderer="checkout/sandbox.html",
    permission=CUSTOMER,
)
def sandbox_page(request):
    read_own_order(request, request.matchdict["number"])
    order, command = sandbox_order(request)
    return {**order_values(request, order), "command": command}


@view_config(
    route_name="pages.checkout_success",
    request_method="GET",
    renderer="checkout/success.html",
    permission=CUSTOMER,
)
def success_page(request):
    order = read_own_order(request, query_value(request, "order"))
    return {
        **order_values(request, order),
        "poll_seconds": POLL_SECONDS if order.status == "pending" else None,
        "dashboard": "dashboard" in request.registry.settings["cmsshop.modules"],
    }


@view_config(
    route_name="pages.checkout_cancel",
    request_method="GET",
    renderer="checkout/cancel.html",
    permission=CUSTOMER,
)
def cancel_page(request):
    order = read_own_order(request, query_value(request, "order"))
    return order_values(request, order)
