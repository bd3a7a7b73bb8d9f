"""The checkout hand-off as pages: the buy form's POST (the JSON route's schema nodes and
its service, views.checkout.api.place_order), the development sandbox page, and the pages
the provider sends the buyer back to. The return pages only read: the order becomes paid
when the provider's signed webhook arrives, never because a browser came back."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import colander
from pyramid.httpexceptions import HTTPSeeOther
from pyramid.renderers import render_to_response
from pyramid.view import view_config

from cmsshop.errors import ApiError, NotFound, ValidationFailed
from cmsshop.services.checkout import carts, coupons, pricing
from cmsshop.services.legal import documents as legal
from cmsshop.services.payments import simulation
from cmsshop.services.payments.registry import PaymentProviders
from cmsshop.services.store import currencies, text
from cmsshop.services.subscriptions import plans as subscription_plans
from cmsshop.services.tax import billing
from cmsshop.services.tax import checkout as tax_checkout
from cmsshop.views.checkout import carts as cart_views
from cmsshop.views.checkout.api import (
    CheckoutSchema,
    ItemSchema,
    caller,
    checked_billing,
    one_item_form,
    own_order,
    place_order,
    sandbox_order,
)
from cmsshop.views.shared.forms import (
    FormInvalid,
    field_errors,
    posted_fields,
    read_form,
    see_other,
)
from cmsshop.views.shared.json import StrictMapping, query_value, validate
from cmsshop.views.shared.product_page import product_page_values, provider_choices

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
    # A form sends text: the JSON route's node wants a JSON number.
    schema.add(
        colander.SchemaNode(
            colander.Int(),
            name="quantity",
            missing=None,
            validator=colander.Range(1, pricing.QUANTITY_CEILING, min_err="must be at least 1"),
        )
    )
    return schema


def form_errors(errors: dict[str, str]) -> dict[str, str]:
    """The service's errors on the form's fields (its ``items.0.product`` is the form's
    one product, shown above the form)."""
    shown = {}
    for name, message in errors.items():
        if name.startswith("items") and name.endswith(".quantity"):
            shown["quantity"] = message
        elif name.startswith("items"):
            shown["form"] = f"This product: {message}."
        else:
            shown[name] = message
    return shown


def posted_billing(request) -> dict[str, str]:
    """The billing fields a checkout form posted (templates/tax/billing_fields.html)."""
    return posted_fields(request, billing.FIELDS)


def saved_billing_form(request) -> dict[str, str]:
    """The logged-in customer's saved billing details as form values (none for a
    visitor or a customer who has saved none): what a checkout form starts with."""
    if request.user is None:
        return {}
    details = billing.profile_details(billing.load_profile(request.db, request.user.id))
    if details is None:
        return {}
    return {key: value or "" for key, value in details.as_api().items()}


def billing_form_values() -> dict:
    """What a page with the billing fields needs besides its form and errors."""
    return {"countries": billing.country_choices()}


def profile_billing(request) -> billing.BillingDetails:
    """The saved billing details, checked again (VAT ID online too), for a checkout
    posted without billing fields (renewing or upgrading from /account/licenses)."""
    saved = saved_billing_form(request)
    if not saved:
        raise ValidationFailed(
            {
                "billing": "Save your billing details first (your account's Billing details "
                "page, /account/billing): the country decides the tax."
            }
        )
    return checked_billing(request, saved)


def accepts_terms(request) -> bool:
    """The checkout forms' terms box (templates/legal/macros.html) is ticked."""
    return request.POST.get("acceptTerms") == "true"


def accept_terms_step(request, item: dict, errors=None):
    """The account page's one-button renewals and upgrades have no room for the terms
    box: their post without it answers this step, which carries the item and asks."""
    fields = [(name, value) for name, value in item.items() if isinstance(value, str)]
    fields += [
        (name, request.POST[name])
        for name in ("currency", "provider")
        if isinstance(request.POST.get(name), str)
    ]
    response = render_to_response(
        "legal/accept_terms.html",
        {
            "what": "renew your license" if "renew" in item else "upgrade your license",
            "fields": fields,
            "errors": errors or {},
            "form": {},
        },
        request,
    )
    response.headers["Cache-Control"] = "private, no-store"
    return response


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
    if not accepts_terms(request) and legal.latest(request.db, "terms") is not None:
        # Asked again, with why, when the step's own form came back unticked.
        again = request.POST.get("termsStep") == "1"
        errors = {legal.TermsNotAccepted.field: legal.TermsNotAccepted.message} if again else None
        return accept_terms_step(request, item, errors)
    try:
        # The JSON route's rules for an item (one form, lengths, storable text).
        posted = {key: value for key, value in item.items() if value is not None}
        checked = validate(ItemSchema(validator=one_item_form), posted)
        details = profile_billing(request)
        placed = place_order(
            request,
            [{key: value for key, value in checked.items() if value is not None}],
            request.POST.get("currency") or None,
            request.POST.get("provider") or None,
            billing_details=details,
            accept_terms=accepts_terms(request),
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
        # No account needed: the product goes into the visitor's cart, paid as a guest.
        return cart_add(request)
    typed = {
        name: request.POST.get(name, "")
        for name in ("currency", "provider", "quantity", "acceptTerms")
    }
    typed.update(posted_billing(request))
    try:
        data = read_form(request, checkout_form_schema())
        details = checked_billing(request, posted_billing(request), prefix="")
        placed = place_order(
            request,
            [{"product": data["product"], "quantity": data["quantity"] or 1}],
            data["currency"],
            data["provider"],
            billing_details=details,
            accept_terms=accepts_terms(request),
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
    """The order ``number`` of the logged-in customer, or the guest order this browser
    placed (its status and lines only); a 404 page for anyone else's."""
    order = None
    if number and ORDER_NUMBER.match(number):
        order = own_order(request, number)
    if order is None and request.user is None:
        # Back from the provider after the login session ended: log in to see it.
        raise HTTPSeeOther(location=f"/login?{urlencode({'next': request.path_qs})}")
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
)
def sandbox_page(request):
    read_own_order(request, request.matchdict["number"])
    order, command = sandbox_order(request)
    return {
        **order_values(request, order),
        "command": command,
        # The "Simulate payment" button (views.checkout.sandbox).
        "simulate": simulation.offered(
            request.registry.settings, request.find_service(PaymentProviders), order
        ),
    }


@view_config(
    route_name="pages.checkout_success",
    request_method="GET",
    renderer="checkout/success.html",
)
def success_page(request):
    order = read_own_order(request, query_value(request, "order"))
    return {
        **order_values(request, order),
        "poll_seconds": POLL_SECONDS if order.status == "pending" else None,
        "dashboard": "dashboard" in request.registry.settings["cmsshop.modules"]
        and request.user is not None,
        "guest": request.user is None,
    }


@view_config(
    route_name="pages.checkout_cancel",
    request_method="GET",
    renderer="checkout/cancel.html",
)
def cancel_page(request):
    order = read_own_order(request, query_value(request, "order"))
    return order_values(request, order)


# --- the cart page and its forms ---------------------------------------------------------
# Every form answers 303 to /cart when it worked, or the cart page again with the error
# beside its field (422) when it did not: no notice travels in a URL.


def cart_values(request, cart, errors=None, form=None) -> dict:
    view = cart_views.priced(request, cart) if cart is not None else None
    currency = view.currency if view is not None else None
    product_ids = [line.product_id for line in cart.lines] if cart is not None else []
    return {
        "view": view,
        # A subscription is said to be one before the buyer pays: on the button and under it.
        "billing_cycle": subscription_plans.billing_cycle(request.db, product_ids),
        # Its free trial, when this buyer gets one (one per customer and product).
        "trial_days": subscription_plans.trial_offered(
            request.db, product_ids, request.user.id if request.user is not None else None
        ),
        "currency_row": currencies.find_currency(request.db, currency) if currency else None,
        "currency_choices": [
            (c.code, c.code) for c in currencies.list_currencies(request.db, enabled_only=True)
        ],
        "provider_choices": provider_choices(request),
        "tax_note": tax_checkout.price_note(request.db, request.registry.settings),
        "errors": errors or {},
        # The saved billing details fill the pay form; what was typed wins.
        "form": {**saved_billing_form(request), **(form or {})},
        **billing_form_values(),
    }


def refused_page(request, template: str, values: dict):
    """``template`` shown again with the refusal beside its field: a 422."""
    response = render_to_response(template, values, request)
    response.status = 422
    response.headers["Cache-Control"] = "private, no-store"  # the visitor's own form
    return response


def cart_page_with_errors(request, cart, errors: dict, form=None):
    return refused_page(request, "checkout/cart.html", cart_values(request, cart, errors, form))


@view_config(route_name="pages.cart", request_method="GET", renderer="checkout/cart.html")
def cart_page(request):
    # The visitor's own cart: kept by no cache, not even the browser's.
    request.response.headers["Cache-Control"] = "private, no-store"
    return cart_values(request, cart_views.own_cart_or_none(request))


@view_config(route_name="pages.cart_add", request_method="POST", renderer="checkout/cart.html")
def cart_add(request):
    """The product page's "Add to cart" (and "Buy" for a visitor who is not logged in)."""
    slug = posted_slug(request)
    if slug is None:
        raise NotFound("There is no such product.", code="product_not_found")
    quantity = posted_quantity(request)
    currency = request.POST.get("currency", "")
    cart, _ = cart_views.open_own_cart(request)
    try:
        if not cart.lines and currency and currency != cart.currency:
            # The product page's currency choice sets an empty cart's currency.
            carts.set_currency(request.db, cart, currency)
        if quantity is None:
            raise pricing.CheckoutInvalid({"quantity": "a whole number, at least 1"})
        carts.set_quantity(request.db, cart, slug, quantity, add=True)
    except pricing.CheckoutInvalid as exc:
        errors = {
            ("form" if name == "product" else name): message for name, message in exc.errors.items()
        }
        typed = posted_fields(request, ("currency", "provider", "quantity"))
        values = product_page_values(request, slug, None, errors=errors, form=typed)
        if "quantity" in errors and values["max_quantity"] <= 1:
            # No quantity field to mark: say it above the form.
            errors["form"] = (
                f"{values['product'].name} is in your cart already: {errors.pop('quantity')}."
            )
        return refused_page(request, "store/product.html", values)
    return see_other(request, "/cart")


def posted_quantity(request) -> int | None:
    raw = request.POST.get("quantity", "1").strip() or "1"
    if not raw.isascii() or not raw.isdigit() or len(raw) > 6:
        return None
    return int(raw)


def posted_cart(request):
    cart = cart_views.own_cart_or_none(request)
    if cart is None:
        return None
    return cart


@view_config(route_name="pages.cart_update", request_method="POST", renderer="checkout/cart.html")
def cart_update(request):
    cart = posted_cart(request)
    if cart is None:
        return see_other(request, "/cart")
    action = request.POST.get("action", "update")
    try:
        if action == "currency":
            carts.set_currency(request.db, cart, request.POST.get("currency", ""))
            return see_other(request, "/cart")
        slug = posted_slug(request)
        if slug is None:
            return see_other(request, "/cart")
        if action == "remove":
            carts.remove_line(request.db, cart, slug)
            return see_other(request, "/cart")
        quantity = posted_quantity(request)
        if quantity is None or quantity < 1:
            raise pricing.CheckoutInvalid(
                {f"quantity.{slug}": "a whole number, at least 1 (or press Remove)"}
            )
        try:
            carts.set_quantity(request.db, cart, slug, quantity)
        except pricing.CheckoutInvalid as exc:
            raise pricing.CheckoutInvalid(
                {f"{k}.{slug}" if k == "quantity" else "form": v for k, v in exc.errors.items()}
            ) from None
    except pricing.CheckoutInvalid as exc:
        return cart_page_with_errors(request, cart, exc.errors)
    return see_other(request, "/cart")


@view_config(route_name="pages.cart_coupon", request_method="POST", renderer="checkout/cart.html")
def cart_coupon(request):
    cart = posted_cart(request)
    if cart is None:
        return see_other(request, "/cart")
    if request.POST.get("action") == "remove":
        carts.clear_coupon(request.db, cart)
        return see_other(request, "/cart")
    code = request.POST.get("code", "")
    user_id, _ = caller(request)
    try:
        carts.set_coupon(request.db, cart, code, user_id=user_id)
    except coupons.CouponRefused as exc:
        return cart_page_with_errors(request, cart, {"code": exc.message}, {"code": code[:40]})
    return see_other(request, "/cart")


@view_config(route_name="pages.cart_prices", request_method="POST", renderer="checkout/cart.html")
def cart_accept_prices(request):
    cart = posted_cart(request)
    if cart is not None:
        carts.accept_prices(request.db, cart)
    return see_other(request, "/cart")


@view_config(route_name="pages.cart_checkout", request_method="POST", renderer="checkout/cart.html")
def cart_checkout(request):
    """Pay for the cart: to the provider's page, the sandbox, or (a free order) straight
    to the success page. A refusal shows the cart again with why; any price or total in
    the form is never read (the server prices the cart)."""
    cart = posted_cart(request)
    if cart is None:
        return see_other(request, "/cart")
    typed = {
        **posted_fields(request, ("email", "name", "provider", "acceptTerms")),
        **posted_billing(request),
    }
    try:
        data = read_form(request, cart_views.CartCheckoutSchema())
        details = checked_billing(request, posted_billing(request), prefix="")
        placed = cart_views.check_out_cart(
            request,
            cart,
            provider=data["provider"],
            email=data["email"],
            name=data["name"],
            billing_details=details,
            accept_terms=accepts_terms(request),
        )
    except FormInvalid as exc:
        return cart_page_with_errors(request, cart, exc.errors, typed)
    except ApiError as exc:
        if exc.status == 429:
            raise
        return cart_page_with_errors(request, cart, field_errors(exc), typed)
    if placed.sandbox:
        return see_other(request, f"/checkout/sandbox/{placed.order.number}")
    return HTTPSeeOther(location=placed.redirect_url)
