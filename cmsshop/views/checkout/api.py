"""POST /api/store/checkout and the development sandbox page; wired by the store module
(cmsshop.modules.checkout: checkout sells what the store lists), served by the payment
machinery."""

from __future__ import annotations

import colander
from pyramid.view import view_config

from cmsshop.errors import ApiError, NotFound, RateLimited, ServiceUnavailable, ValidationFailed
from cmsshop.security import CUSTOMER
from cmsshop.services.checkout import orders as co
from cmsshop.services.payments.registry import PaymentProviders
from cmsshop.views.shared.bodies import order_body
from cmsshop.views.shared.json import StrictMapping, StrictSequence, StrictString, read_json

SLUG = {"type": "string", "minLength": 1, "maxLength": 100}
KEY = {"type": "string", "minLength": 1, "maxLength": 64}


def one_item_form(node, item):
    """An item is exactly one of: a product, a renewal, an upgrade (with its target)."""
    forms = [name for name in ("product", "renew", "upgrade") if item.get(name)]
    if len(forms) != 1:
        raise colander.Invalid(node, 'give exactly one of "product", "renew" or "upgrade"')
    if (item.get("to") is not None) != (forms[0] == "upgrade"):
        raise colander.Invalid(node, '"to" (the product to upgrade to) goes with "upgrade" only')


class ItemSchema(colander.MappingSchema):
    """``{"product": slug}``, ``{"renew": license key}`` or ``{"upgrade": license key,
    "to": slug}`` (services/payments/license_changes.py)."""

    schema_type = StrictMapping
    product = colander.SchemaNode(
        StrictString(), missing=None, validator=colander.Length(min=1, max=100)
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


class CheckoutSchema(colander.MappingSchema):
    schema_type = StrictMapping
    items = ItemsSchema(validator=colander.Length(min=1, max=co.MAX_ITEMS))
    currency = colander.SchemaNode(
        StrictString(), missing=None, validator=colander.Regex(r"^[A-Z]{3}$", "an ISO 4217 code")
    )
    provider = colander.SchemaNode(
        StrictString(), missing=None, validator=colander.Length(min=1, max=40)
    )


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


def place_order(request, items: list[dict], currency: str | None, provider: str | None):
    """services.checkout.orders.place_order for the logged-in customer, its refusals
    as the API's errors (shared by the JSON route and the checkout page)."""
    spec = choose_provider(request, provider)
    try:
        return co.place_order(
            request.registry,
            request.db,
            user=request.user,
            items=items,
            currency=currency,
            spec=spec,
        )
    except co.CheckoutInvalid as exc:
        raise ValidationFailed(exc.errors) from None
    except co.CheckoutUnavailable as exc:
        raise ServiceUnavailable(str(exc), code=exc.code, title="Checkout unavailable") from None
    except co.TooManyPendingOrders as exc:
        raise RateLimited(
            exc.retry_after,
            f"You have {exc.limit} unpaid orders waiting; pay or cancel one first, or wait.",
            code="too_many_pending_orders",
            title="Too many unpaid orders",
        ) from None


def sandbox_order(request):
    """The customer's own order of the sandbox route (404 otherwise); refused on a
    production site. Returns (order, the simulate-payment command)."""
    number = request.matchdict["number"]
    order = co.find_customer_order(request.db, request.user.id, number[:64])
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
    placed = place_order(request, data["items"], data["currency"], data["provider"])
    request.response.status = 201
    return {
        "order": order_body(placed.order),
        "redirectUrl": placed.redirect_url,
        "sandbox": placed.sandbox,
    }


@view_config(
    route_name="store.checkout_sandbox", request_method="GET", renderer="json", permission=CUSTOMER
)
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
