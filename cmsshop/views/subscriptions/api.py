"""The customer's subscriptions as JSON, and the changes shared with the account page."""

from __future__ import annotations

import colander
from pyramid.view import view_config

from cmsshop.errors import ApiError
from cmsshop.security import CUSTOMER
from cmsshop.services.payments.registry import PaymentProviders
from cmsshop.services.subscriptions import selfservice
from cmsshop.util import isoformat_z
from cmsshop.views.shared.json import parse_path_id, read_json
from cmsshop.views.shared.schema import slug_node


def subscription_body(card: selfservice.SubscriptionCard) -> dict:
    next_charge = None
    if card.next_charge_at is not None:
        next_charge = {
            "at": isoformat_z(card.next_charge_at),
            "amount": card.next_charge_amount,
            "currency": card.currency,
        }
    return {
        "id": card.id,
        "product": card.product,
        "licenseKey": card.license_key,
        "status": card.status,
        "paidThrough": isoformat_z(card.paid_through),
        "nextCharge": next_charge,
        "endsAt": isoformat_z(card.ends_at),
        "canCancel": card.can_cancel,
        "canResume": card.can_resume,
        "canUpdatePaymentMethod": card.can_update_payment,
        "planChoices": [
            {
                "product": choice.product.slug,
                "name": choice.product.name,
                "amount": choice.amount,
                "currency": choice.currency,
            }
            for choice in card.plan_choices
        ],
    }


class PlanSchema(colander.MappingSchema):
    product = slug_node()


def plan_preview_body(choice, preview) -> dict:
    return {
        "product": choice.product.slug,
        "name": choice.product.name,
        "chargedNow": {"amount": preview.charged_now, "currency": preview.currency},
        "then": {"amount": preview.next_amount, "currency": choice.currency},
        "nextChargeAt": isoformat_z(preview.next_at),
    }


def preview_plan(request, slug):
    """(the choice, the provider's preview) of a plan change; shared with the page."""
    try:
        return selfservice.preview_plan_change(
            request.find_service(PaymentProviders),
            request.registry,
            request.db,
            own_subscription(request),
            slug,
        )
    except selfservice.ProviderRefused as exc:
        raise _unavailable(exc) from None


def change_plan(request, slug) -> None:
    try:
        selfservice.change_plan(
            request.find_service(PaymentProviders),
            request.registry,
            request.db,
            request.registry.settings,
            own_subscription(request),
            slug,
        )
    except selfservice.ProviderRefused as exc:
        raise _unavailable(exc) from None


def own_subscription(request):
    return selfservice.customer_subscription(
        request.db, request.user.id, parse_path_id(request.matchdict["id"])
    )


def _unavailable(exc: Exception) -> ApiError:
    return ApiError(
        "The payment provider could not be reached; nothing changed. Try again shortly.",
        code="subscription_provider_unavailable",
    )


def change_cancellation(request, *, cancel: bool) -> None:
    """Cancel at the period end, or resume (shared by the JSON route and the page)."""
    subscription = own_subscription(request)
    try:
        selfservice.set_cancellation(
            request.find_service(PaymentProviders),
            request.registry,
            request.db,
            request.registry.settings,
            subscription,
            cancel=cancel,
        )
    except selfservice.ProviderRefused as exc:
        raise _unavailable(exc) from None


def payment_method_url(request) -> str:
    """The provider's page where the customer replaces the card."""
    subscription = own_subscription(request)
    back = f"{request.registry.settings['cmsshop.base_url'].rstrip('/')}/account/subscriptions"
    try:
        return selfservice.payment_method_url(
            request.find_service(PaymentProviders), request.registry, subscription, back
        )
    except selfservice.ProviderRefused as exc:
        raise _unavailable(exc) from None


def _card_of(request, subscription_id: int) -> dict:
    cards = selfservice.customer_subscriptions(request.db, request.user.id)
    return subscription_body(next(card for card in cards if card.id == subscription_id))


@view_config(
    route_name="subscriptions.list", request_method="GET", renderer="json", permission=CUSTOMER
)
def list_subscriptions(request):
    request.response.cache_control = "no-store"
    cards = selfservice.customer_subscriptions(request.db, request.user.id)
    return {"items": [subscription_body(card) for card in cards]}


@view_config(
    route_name="subscriptions.cancel", request_method="POST", renderer="json", permission=CUSTOMER
)
def cancel(request):
    change_cancellation(request, cancel=True)
    request.response.cache_control = "no-store"
    return _card_of(request, parse_path_id(request.matchdict["id"]))


@view_config(
    route_name="subscriptions.resume", request_method="POST", renderer="json", permission=CUSTOMER
)
def resume(request):
    change_cancellation(request, cancel=False)
    request.response.cache_control = "no-store"
    return _card_of(request, parse_path_id(request.matchdict["id"]))


@view_config(
    route_name="subscriptions.payment_method",
    request_method="POST",
    renderer="json",
    permission=CUSTOMER,
)
def payment_method(request):
    request.response.cache_control = "no-store"
    return {"redirectUrl": payment_method_url(request)}


@view_config(
    route_name="subscriptions.plan_preview",
    request_method="POST",
    renderer="json",
    permission=CUSTOMER,
)
def plan_preview(request):
    own_subscription(request)  # 404 before looking at the body
    data = read_json(request, PlanSchema())
    request.response.cache_control = "no-store"
    return plan_preview_body(*preview_plan(request, data["product"]))


@view_config(
    route_name="subscriptions.plan", request_method="POST", renderer="json", permission=CUSTOMER
)
def plan(request):
    own_subscription(request)
    data = read_json(request, PlanSchema())
    change_plan(request, data["product"])
    request.response.cache_control = "no-store"
    return _card_of(request, parse_path_id(request.matchdict["id"]))
