"""The account's subscriptions page (/account/subscriptions) and its buttons."""

from __future__ import annotations

from pyramid.httpexceptions import HTTPSeeOther
from pyramid.view import view_config

from cmsshop.security import CUSTOMER
from cmsshop.services.payments.registry import PaymentProviders
from cmsshop.services.store.currencies import list_currencies
from cmsshop.services.subscriptions import selfservice
from cmsshop.views.shared.forms import see_other
from cmsshop.views.subscriptions.api import (
    change_cancellation,
    change_plan,
    payment_method_url,
    preview_plan,
)

NOTICES = {
    "subscription_plan_requested": "The change is asked of the payment provider: your "
    "license moves to the new plan as soon as it confirms the payment.",
    "subscription_cancelled": "Your subscription ends at the end of the period you paid for.",
    "subscription_resumed": "Your subscription renews itself again.",
}


@view_config(
    route_name="account.subscriptions",
    request_method="GET",
    renderer="subscriptions/account.html",
    permission=CUSTOMER,
)
def subscriptions_page(request):
    request.response.cache_control = "no-store"
    return {
        "account_section": "subscriptions",
        "subscriptions": selfservice.customer_subscriptions(request.db, request.user.id),
        # Providers without a cancellation at the period end: their button says so.
        "cancels_at_once": {
            spec.name
            for spec in request.find_service(PaymentProviders)
            if getattr(spec.provider, "cancels_at_once", False)
        },
        "currencies": {c.code: c for c in list_currencies(request.db, enabled_only=False)},
    }


@view_config(route_name="account.subscription_cancel", request_method="POST", permission=CUSTOMER)
def cancel(request):
    change_cancellation(request, cancel=True)
    return see_other(request, "/account/subscriptions", notice="subscription_cancelled")


@view_config(route_name="account.subscription_resume", request_method="POST", permission=CUSTOMER)
def resume(request):
    change_cancellation(request, cancel=False)
    return see_other(request, "/account/subscriptions", notice="subscription_resumed")


@view_config(
    route_name="account.subscription_payment_method", request_method="POST", permission=CUSTOMER
)
def payment_method(request):
    return HTTPSeeOther(location=payment_method_url(request))


def _posted_product(request) -> str:
    slug = request.POST.get("product", "")
    return slug if isinstance(slug, str) else ""


@view_config(
    route_name="account.subscription_plan_preview",
    request_method="POST",
    renderer="subscriptions/plan_change.html",
    permission=CUSTOMER,
)
def plan_preview(request):
    """What the change costs, before the customer confirms it."""
    choice, preview = preview_plan(request, _posted_product(request))
    request.response.cache_control = "no-store"
    return {
        "account_section": "subscriptions",
        "subscription_id": request.matchdict["id"],
        "choice": choice,
        "preview": preview,
        "currencies": {c.code: c for c in list_currencies(request.db, enabled_only=False)},
    }


@view_config(route_name="account.subscription_plan", request_method="POST", permission=CUSTOMER)
def plan(request):
    change_plan(request, _posted_product(request))
    return see_other(request, "/account/subscriptions", notice="subscription_plan_requested")
