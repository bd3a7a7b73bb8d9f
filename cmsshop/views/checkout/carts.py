"""The cart as JSON (/api/store/carts...) and what the cart page shares with it: whose
cart a request may touch, the cart's JSON body, checking a cart out (logged in or as a
guest) with the service's refusals as the API's errors."""

from __future__ import annotations

import colander
from pyramid.view import view_config

from cmsshop.errors import ApiError, NotFound, ValidationFailed
from cmsshop.services.accounts import guests
from cmsshop.services.accounts.users import normalise_email
from cmsshop.services.checkout import carts, coupons, orders, pricing
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.services.store import text
from cmsshop.views.checkout.api import (
    billing_node,
    caller,
    cart_changed,
    checked_billing,
    choose_provider,
    coupon_error,
    network_country,
    order_placed_body,
    placing_errors,
)
from cmsshop.views.shared.json import StrictInt, StrictMapping, StrictString, read_json
from cmsshop.views.shared.schema import bool_node

EMAIL_MAX = 320


# --- whose cart ------------------------------------------------------------------------


def own_cart_or_none(request):
    user_id, visitor = caller(request)
    return carts.own_cart(request.db, user_id=user_id, visitor=visitor)


def cart_of_route(request):
    """The cart the URL names if it is the caller's; 404 otherwise (whoever's it is)."""
    user_id, visitor = caller(request)
    cart_id = request.matchdict["cart"]
    cart = None
    if len(cart_id) <= 64:
        cart = carts.find_cart(request.db, cart_id, user_id=user_id, visitor=visitor)
    if cart is None:
        raise NotFound("You have no cart with this id.", code="cart_not_found")
    return cart


def open_own_cart(request, currency: str | None = None):
    user_id, visitor = caller(request)
    if user_id is None and visitor is None:
        # Only a request with the visitor cookie passes the CSRF check, so this is rare.
        raise ApiError("A cart needs the site's cookie; load any page first.", code="bad_request")
    return carts.open_cart(request.db, user_id=user_id, visitor=visitor, currency=currency)


# --- the service's refusals as the API's errors -----------------------------------------


# --- the cart's JSON ------------------------------------------------------------------------


def cart_body(view: carts.CartView) -> dict:
    problem = view.coupon_problem
    return {
        "id": view.cart.id,
        "currency": view.currency,
        "lines": [
            {
                "product": line.slug,
                "name": line.name,
                "quantity": line.quantity,
                "maxQuantity": line.max_quantity,
                "licensed": line.licensed,
                "seats": line.seats,
                "unitAmount": line.unit_amount,
                "seenUnitAmount": line.seen_amount,
                "discount": line.discount,
                "amount": line.amount,
                "problem": line.problem,
                "problemMessage": line.problem_message,
            }
            for line in view.lines
        ],
        "subtotal": view.subtotal,
        "discount": view.discount,
        "total": view.total,
        "coupon": (
            None
            if view.coupon_code is None
            else {
                "code": view.coupon_code,
                "problem": None if problem is None else {"code": problem[0], "message": problem[1]},
            }
        ),
        "readyToPay": not view.empty and not view.changed and problem is None,
    }


def priced(request, cart) -> carts.CartView:
    user_id, _ = caller(request)
    return carts.view_cart(request.db, cart, user_id=user_id)


# --- checking a cart out ------------------------------------------------------------------


def guest_buyer(request, email: str | None, name: str | None) -> orders.Buyer:
    """The buyer of a cart checked out without logging in: the address typed (its
    format checked as registration checks it), rate limited as registration is."""
    if not email:
        raise ValidationFailed({"email": "your e-mail address: the receipt goes there"})
    address = normalise_email(email)
    guests.check_guest_checkout_rate(request.find_service(RateLimiter), address, client_ip(request))
    _, visitor = caller(request)
    return orders.Buyer(email=address, name=name or None, visitor_hash=visitor)


def client_ip(request) -> str:
    return request.client_addr or "unknown"


def check_out_cart(
    request,
    cart,
    *,
    provider: str | None,
    email: str | None,
    name: str | None,
    billing_details,
    accept_terms: bool = False,
):
    """Place the order of ``cart`` (the caller's) with ``billing_details`` (checked by
    views.checkout.api.checked_billing): every refusal is the API's error and changes
    nothing; returns services.checkout.orders.PlacedOrder."""
    view = priced(request, cart)
    if view.empty:
        raise ApiError("Your cart is empty.", code="cart_empty")
    if view.changed:
        raise cart_changed(
            {
                f"lines.{i}": line.problem_message
                for i, line in enumerate(view.lines)
                if line.problem
            }
        )
    if view.coupon_problem:
        raise ApiError(
            view.coupon_problem[1],
            code=view.coupon_problem[0],
            extra={"errors": {"coupon": view.coupon_problem[1]}},
        )
    if request.user is not None:
        buyer = orders.Buyer(user_id=request.user.id)
    else:
        buyer = guest_buyer(request, email, name)
    spec = choose_provider(request, provider) if view.total > 0 else None
    with placing_errors():
        return orders.place_order(
            request.registry,
            request.db,
            buyer=buyer,
            items=carts.checkout_items(view),
            currency=view.currency,
            spec=spec,
            coupon_code=view.coupon_code,
            cart_id=cart.id,
            billing=billing_details,
            evidence_country=network_country(request),
            accept_terms=accept_terms,
        )


# --- routes ---------------------------------------------------------------------------------


def _currency_node():
    return colander.SchemaNode(
        StrictString(), missing=None, validator=colander.Regex(r"^[A-Z]{3}$", "an ISO 4217 code")
    )


class NewCartSchema(colander.MappingSchema):
    schema_type = StrictMapping
    currency = _currency_node()


class CartChangeSchema(colander.MappingSchema):
    schema_type = StrictMapping
    currency = _currency_node()


class LineSchema(colander.MappingSchema):
    schema_type = StrictMapping
    quantity = colander.SchemaNode(
        StrictInt(), validator=colander.Range(1, None, min_err="must be at least 1")
    )


class CouponSchema(colander.MappingSchema):
    schema_type = StrictMapping
    code = colander.SchemaNode(StrictString(), validator=colander.Length(min=1, max=40))


class CartCheckoutSchema(colander.MappingSchema):
    schema_type = StrictMapping
    provider = colander.SchemaNode(
        StrictString(), missing=None, validator=colander.Length(min=1, max=40)
    )
    email = colander.SchemaNode(
        StrictString(),
        missing=None,
        validator=colander.All(colander.Email(), colander.Length(max=EMAIL_MAX)),
    )
    name = colander.SchemaNode(
        StrictString(), missing=None, validator=colander.Length(min=1, max=200)
    )


class CartCheckoutBody(CartCheckoutSchema):
    """The JSON body: the form's fields and the billing details (a form posts those as
    fields of their own: views.checkout.pages)."""

    billing = billing_node()
    acceptTerms = bool_node(missing=False)  # noqa: N815 - JSON name


def cart_answer(request, cart) -> dict:
    return cart_body(priced(request, cart))


@view_config(route_name="store.carts", request_method="POST", renderer="json")
def create_cart(request):
    """The caller's cart, created now (201) or the one they have (200)."""
    data = read_json(request, NewCartSchema())
    if data["currency"] is not None:
        problem = pricing.currency_problem(request.db, data["currency"])
        if problem:
            raise ValidationFailed({"currency": problem})
    cart, created = open_own_cart(request, data["currency"])
    if created:
        request.response.status = 201
    return cart_answer(request, cart)


@view_config(route_name="store.cart", request_method="GET", renderer="json")
def get_cart(request):
    return cart_answer(request, cart_of_route(request))


@view_config(route_name="store.cart", request_method="PATCH", renderer="json")
def change_cart(request):
    cart = cart_of_route(request)
    data = read_json(request, CartChangeSchema())
    if data["currency"] is not None:
        try:
            carts.set_currency(request.db, cart, data["currency"])
        except pricing.CheckoutInvalid as exc:
            raise ValidationFailed(exc.errors) from None
    return cart_answer(request, cart)


def route_slug(request) -> str:
    slug = request.matchdict["product"]
    if not text.is_slug(slug):
        raise NotFound("There is no such product.", code="product_not_found")
    return slug


@view_config(route_name="store.cart_line", request_method="PUT", renderer="json")
def put_line(request):
    """Set the quantity of a product in the cart (adding it if it is not there)."""
    cart = cart_of_route(request)
    slug = route_slug(request)
    data = read_json(request, LineSchema())
    try:
        carts.set_quantity(request.db, cart, slug, data["quantity"])
    except pricing.CheckoutInvalid as exc:
        if "product" in exc.errors and "no longer" in exc.errors["product"]:
            raise NotFound("There is no such product for sale.", code="product_not_found") from None
        raise ValidationFailed(exc.errors) from None
    return cart_answer(request, cart)


@view_config(route_name="store.cart_line", request_method="DELETE", renderer="json")
def delete_line(request):
    cart = cart_of_route(request)
    if not carts.remove_line(request.db, cart, route_slug(request)):
        raise NotFound("This product is not in your cart.", code="cart_line_not_found")
    return cart_answer(request, cart)


@view_config(route_name="store.cart_coupon", request_method="PUT", renderer="json")
def put_coupon(request):
    cart = cart_of_route(request)
    data = read_json(request, CouponSchema())
    user_id, _ = caller(request)
    try:
        carts.set_coupon(request.db, cart, data["code"], user_id=user_id)
    except coupons.CouponRefused as exc:
        raise coupon_error(exc) from None
    return cart_answer(request, cart)


@view_config(route_name="store.cart_coupon", request_method="DELETE", renderer="json")
def delete_coupon(request):
    cart = cart_of_route(request)
    carts.clear_coupon(request.db, cart)
    return cart_answer(request, cart)


@view_config(route_name="store.cart_prices", request_method="POST", renderer="json")
def accept_prices(request):
    cart = cart_of_route(request)
    carts.accept_prices(request.db, cart)
    return cart_answer(request, cart)


@view_config(route_name="store.cart_checkout", request_method="POST", renderer="json")
def checkout_cart(request):
    cart = cart_of_route(request)
    data = read_json(request, CartCheckoutBody())
    details = checked_billing(request, data["billing"])
    placed = check_out_cart(
        request,
        cart,
        provider=data["provider"],
        email=data["email"],
        name=data["name"],
        billing_details=details,
        accept_terms=data["acceptTerms"],
    )
    request.response.status = 201
    return order_placed_body(placed)
