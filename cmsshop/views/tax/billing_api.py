"""The customer's billing details as JSON: ``GET``/``PUT /api/account/billing``
(services.tax.billing). PUT checks the VAT ID as checkout does, VIES included when
configured, and answers with the saved details and that check."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop.security import CUSTOMER
from cmsshop.services.tax import billing
from cmsshop.services.tax.vies import IVatIdChecker
from cmsshop.views.shared.json import read_json


def billing_body(details: billing.BillingDetails | None) -> dict | None:
    return details.as_api() if details is not None else None


@view_config(
    route_name="tax.account_billing", request_method="GET", renderer="json", permission=CUSTOMER
)
def get_billing(request):
    """The logged-in customer's saved billing details (``billing`` null until saved)."""
    profile = billing.load_profile(request.db, request.user.id)
    return {"billing": billing_body(billing.profile_details(profile))}


@view_config(
    route_name="tax.account_billing", request_method="PUT", renderer="json", permission=CUSTOMER
)
def put_billing(request):
    """Replace the saved billing details: 422 by field (``country``, ``vatId``...)."""
    details = billing.check_billing(read_json(request), request.find_service(IVatIdChecker))
    billing.save_profile(request.db, request.user.id, details)
    return {"billing": billing_body(details), "vatIdCheck": details.vat_id_check}
