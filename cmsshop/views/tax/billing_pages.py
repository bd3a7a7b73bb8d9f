"""The customer's billing details page, /account/billing: the same checks as the JSON
API (services.tax.billing), field errors at their fields, post/redirect/get on success.

The tax module is always on, so this page answers even when the dashboard module (the
rest of /account) is off: its template then leaves out the account navigation, whose
other links would lead to disabled pages."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop.errors import ValidationFailed
from cmsshop.security import CUSTOMER
from cmsshop.services.tax import billing
from cmsshop.services.tax.vies import IVatIdChecker
from cmsshop.views.shared.forms import field_errors, posted_fields, see_other

NOTICES = {"billing_saved": "Your billing details were saved."}


def billing_form_context(form: dict, errors: dict) -> dict:
    """What a form with the billing fields needs (templates/tax/billing_fields.html)."""
    return {
        "form": form,
        "errors": errors,
        "countries": billing.country_choices(),
        "billing_labels": billing.LABELS,
    }


def posted_billing(request) -> dict[str, str]:
    return posted_fields(request, billing.FIELDS)


def _page(request, form: dict, errors: dict, status: int | None = None) -> dict:
    if status is not None:
        request.response.status = status
    return billing_form_context(form, errors)


@view_config(
    route_name="account.billing",
    request_method="GET",
    renderer="tax/billing.html",
    permission=CUSTOMER,
)
def billing_page(request):
    details = billing.profile_details(billing.load_profile(request.db, request.user.id))
    form = {key: value or "" for key, value in details.as_api().items()} if details else {}
    return _page(request, form, {})


@view_config(
    route_name="account.billing",
    request_method="POST",
    renderer="tax/billing.html",
    permission=CUSTOMER,
)
def save_billing_page(request):
    typed = posted_billing(request)
    try:
        details = billing.check_billing(typed, request.find_service(IVatIdChecker))
    except ValidationFailed as exc:
        return _page(request, typed, field_errors(exc), 422)
    billing.save_profile(request.db, request.user.id, details)
    return see_other(request, "/account/billing", notice="billing_saved")
