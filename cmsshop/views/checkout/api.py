"""POST /api/store/checkout and the development sandbox page; wired by the store module
(cmsshop.modules.checkout: checkout sells what the store lists), served by the payment
machinery."""

from __future__ import annotations

import contextlib

import colander
from pyramid.view import view_config

from cmsshop.errors import ApiError, NotFound, RateLimited, ServiceUnavailable, ValidationFailed
from cmsshop.models import FREE_PROVIDER
from cmsshop.security import CUSTOMER, visitor_token
from cmsshop.services.checkout import carts, coupons, pricing
from cmsshop.services.checkout import orders as co
from cmsshop.services.payments.registry import PaymentProviders
from cmsshop.services.tax import billing
from cmsshop.services.tax import checkout as tax_checkout
from cmsshop.services.tax.vies import IVatIdChecker
from cmsshop.views.shared.bodies import order_body
from cmsshop.views.shared.json import (
    StrictInt,
    StrictMapping,
    StrictSequence,
    StrictString,
    read_json,
)
from cmsshop.views.shared.schema import bool_node

SLUG = {"type": "string", "minLength": 1, "maxLength": 100}
KEY = {"type": "string", "minLength": 1, "maxLength": 64}


def one_item_form(node, item):
    """An item is exactly one of: a product, a renewal, an upgrade (with its target)."""
    forms = [name for name in ("product", "renew", "upgrade") if item.get(name)]
    if len(forms) != 1:
        raise colander.Invalid(node, 'give exactly one of "product", "renew" or "upgrade"')
    if (item.get("to") is not None) != (forms[0] == "upgrade"):
        raise colander.Invalid(node, '"to" (the product to upgrade to) goes with "upgrade" only')
    if item.get("quantity") is not None and forms[0] != "product":
        raise colander.Invalid(node, '"quantity" goes with "product" only (one per license)')


class ItemSchema(colander.MappingSchema):
    """``{"product": slug, "quantity": n}`` (quantity optional, 1), ``{"renew": license
    key}`` or ``{"upgrade": license key, "to": slug}`` (services/payments/license_changes.py)."""

    schema_type = StrictMapping
    product = colander.SchemaNode(
        StrictString(), missing=None, validator=colander.Length(min=1, max=100)
    )
    quantity = colander.SchemaNode(
        StrictInt(),
        missing=None,
        validator=colander.Range(1, pricing.QUANTITY_CEILING, min_err="must be at least 1"),
    )
    renew = colander.SchemaNode(
        StrictString(), missing=None, validator=colander.Length(min=1, max=64)
    )
    upgrade = colander.SchemaNode(
        StrictString(), missing=None, validator=colander.Length(min=1, max=64)
    )
    to = colander.SchemaNode(
        StrictString(), missing=None, validator=colander.Length(min=1, max=100)
    )


class ItemsSchema(colander.SequenceSchema):
    schema_type = StrictSequence
    item = ItemSchema(validator=one_item_form)


class JsonObject(colander.SchemaType):
    """A JSON object passed on as it is, for a service that checks its fields itself
    (the billing details: services.tax.billing)."""

    def deserialize(self, node, cstruct):
        if cstruct is colander.null:
            return cstruct
        if not isinstance(cstruct, dict):
            raise colander.Invalid(node, "must be an object")
        return cstruct

    def serialize(self, node, appstruct):
        return appstruct


def billing_node() -> colander.SchemaNode:
    """The buyer's billing details: required, since the country decides the tax."""
    return colander.SchemaNode(JsonObject(), name="billing")


def checked_billing(request, values: dict, prefix: str = "billing.") -> billing.BillingDetails:
    """``values`` checked as billing details, the VAT ID online too when configured;
    ValidationFailed naming ``billing.<field>`` (``prefix``) otherwise. Called before
    anything is written, so a refusal changes nothing."""
    try:
        return billing.check_billing(values, request.find_service(IVatIdChecker))
    except ValidationFailed as exc:
        errors = exc.extra["errors"]
        raise ValidationFailed(
            {
                (key if key == "billing" else f"{prefix}{key}"): message
                for key, message in errors.items()
            }
        ) from None


class CheckoutSchema(colander.MappingSchema):
    schema_type = StrictMapping
    billing = billing_node()
    items = ItemsSchema(validator=colander.Length(min=1, max=co.MAX_ITEMS))
    currency = colander.SchemaNode(
        StrictString(), missing=None, validator=colander.Regex(r"^[A-Z]{3}$", "an ISO 4217 code")
    )
    provider = colander.SchemaNode(
        StrictString(), missing=None, validator=colander.Length(min=1, max=40)
    )
    coupon = colander.SchemaNode(
        StrictString(), missing=None, validator=colander.Length(min=1, max=40)
    )
    acceptTerms = bool_node(missing=False)  # noqa: N815 - JSON name


def choose_provider(request, name: str | None):
    """The enabled provider ``name`` (the card provider, else the first, when None); a
    422 on ``provider`` otherwise."""
    known = request.find_service(PaymentProviders)
    if name is None:
        name = "cardprovider" if "cardprovider" in known else next(iter(known.names()), None)
    spec = known.get(name) if name else None
    if spec is None:
        enabled = ", ".join(known.names()) or "none"
        raise ValidationFailed(
            {"provider": f"not an enabled payment provider (enabled: {enabled})"}
        )
    return spec


def place_order(
    request,
    items: list[dict],
    currency: str | None,
    provider: str | None,
    coupon: str | None = None,
    *,
    billing_details: billing.BillingDetails,
    accept_terms: bool = False,
):
    """services.checkout.orders.place_order for the logged-in customer, its refusals
    as the API's errors (shared by the JSON route and the checkout page)."""
    try:
        spec = choose_provider(request, provider)
    except ValidationFailed:
        spec = None  # a free order needs no provider; place_order says so otherwise
        if provider is not None:
            raise
    with placing_errors():
        return co.place_order(
            request.registry,
            request.db,
            buyer=co.Buyer(user_id=request.user.id),
            items=items,
            currency=currency,
            spec=spec,
            coupon_code=coupons.normalise_code(coupon) if coupon else None,
            billing=billing_details,
            evidence_country=network_country(request),
            accept_terms=accept_terms,
        )


def network_country(request) -> str | None:
    """The buyer's network address's country, as the trusted proxy states it (if the
    shop configured the header: services.tax.checkout.network_country)."""
    return tax_checkout.network_country(request.registry.settings, request.headers)


@contextlib.contextmanager
def placing_errors():
    """services.checkout.orders.place_order's refusals as the API's errors (the JSON
    routes and the pages alike)."""
    try:
        yield
    except pricing.CheckoutInvalid as exc:
        raise ValidationFailed(exc.errors) from None
    except pricing.PricesChanged as exc:
        raise cart_changed(exc.changes) from None
    except coupons.CouponRefused as exc:
        raise coupon_error(exc) from None
    except co.CheckoutUnavailable as exc:
        raise ServiceUnavailable(str(exc), code=exc.code, title="Checkout unavailable") from None
    except co.TooManyPendingOrders as exc:
        raise RateLimited(
            exc.retry_after,
            f"You have {exc.limit} unpaid orders waiting; pay or cancel one first, or wait.",
            code="too_many_pending_orders",
            title="Too many unpaid orders",
        ) from None


def cart_changed(problems: dict[str, str]) -> ApiError:
    """A price changed or a product left the shop since the buyer saw it (409)."""
    return ApiError(
        "Something in your cart changed since you saw it: review the cart, then pay.",
        code="cart_changed",
        hints=(
            "GET the cart to see the new prices; accept them with "
            "POST /api/store/carts/{cart}/accept-prices (unavailable products are removed).",
        ),
        extra={"errors": problems},
    )


def coupon_error(exc: coupons.CouponRefused) -> ApiError:
    """A refused coupon as the API's error: its own code, the message on ``coupon``."""
    return ApiError(exc.message, code=exc.code, extra={"errors": {"coupon": exc.message}})


def order_placed_body(placed) -> dict:
    """The answer to a placed order: where to send the buyer (the provider's page, the
    development sandbox, or, for a free order already delivered, the success page)."""
    return {
        "order": order_body(placed.order),
        "redirectUrl": placed.redirect_url,
        "sandbox": placed.sandbox,
        "free": placed.order.provider == FREE_PROVIDER,
    }


def caller(request) -> tuple[int | None, str | None]:
    """(user id, visitor hash) of the request: the customer's, or the anonymous
    visitor's cookie (neither without a cookie)."""
    if request.user is not None:
        return request.user.id, None
    token = visitor_token(request)
    return None, carts.visitor_hash(token) if token else None


def own_order(request, number: str):
    """Order ``number`` of the logged-in customer, or the guest order this browser
    placed; None for anyone else's."""
    user_id, visitor = caller(request)
    if user_id is not None:
        return co.find_customer_order(request.db, user_id, number)
    if visitor is not None:
        return co.find_visitor_order(request.db, visitor, number)
    return None


def sandbox_order(request):
    """The caller's own order of the sandbox route (the customer's, or the guest's who
    placed it; 404 otherwise); refused on a production site. Returns (order, the
    simulate-payment command)."""
    number = request.matchdict["number"]
    order = own_order(request, number[:64])
    if order is None:
        raise NotFound("You have no order with this number.", code="order_not_found")
    if request.registry.settings["cmsshop.environment"] == "production":
        raise ApiError(
            "The payment sandbox is not available on a production site.",
            code="sandbox_disabled",
        )
    command = (
        f"cmsshop-admin development.ini simulate-payment {order.number} --provider {order.provider}"
    )
    return order, command


@view_config(
    route_name="store.checkout", request_method="POST", renderer="json", permission=CUSTOMER
)
def checkout(request):
    data = read_json(request, CheckoutSchema())
    details = checked_billing(request, data["billing"])
    items = [{k: v for k, v in item.items() if v is not None} for item in data["items"]]
    placed = place_order(
        request,
        items,
        data["currency"],
        data["provider"],
        data["coupon"],
        billing_details=details,
        accept_terms=data["acceptTerms"],
    )
    request.response.status = 201
    return order_placed_body(placed)


@view_config(route_name="store.checkout_sandbox", request_method="GET", renderer="json")
def sandbox(request):
    """Where checkout sends the buyer when no provider account is configured."""
    order, command = sandbox_order(request)
    return {
        "order": order_body(order),
        "sandbox": True,
        "message": "No payment provider account is configured, so no real payment page "
        "exists. Simulate the provider's webhook from a shell; the order becomes paid only "
        "when that signed webhook arrives.",
        "command": command,
    }
