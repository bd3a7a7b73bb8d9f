"""The console's "Business and tax" page: the seller's legal identity for invoices and
the tax settings (services.tax.seller). A refused form is shown again as typed with the
message at each field, and nothing is saved."""

from __future__ import annotations

import pycountry
from pyramid.view import view_config

from cmsshop.security import ADMIN
from cmsshop.services.tax import seller
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.forms import see_other

NOTICES = {"tax_settings_saved": "The business and tax details are saved."}
COUNTRIES = sorted((c.alpha_2, c.name) for c in pycountry.countries)


def _page(request, form: dict, errors: dict) -> dict:
    no_store(request)
    profile = seller.shop_profile(request.db, request.registry.settings)
    return {
        "admin_section": "tax",
        "missing": [seller.LABELS[field].lower() for field in profile.missing],
        "labels": seller.LABELS,
        "form": form,
        "errors": errors,
        "countries": COUNTRIES,
    }


@view_config(
    route_name="pages.admin_tax_settings",
    request_method="GET",
    renderer="admin/tax/settings.html",
    permission=ADMIN,
)
def settings_page(request):
    profile = seller.shop_profile(request.db, request.registry.settings)
    form = profile.as_json()
    form["registrations"] = " ".join(profile.registrations)
    return _page(request, form, {})


@view_config(
    route_name="pages.admin_tax_settings",
    request_method="POST",
    renderer="admin/tax/settings.html",
    permission=ADMIN,
)
def settings_submit(request):
    typed = {field: request.POST.get(field, "") for field in seller.FIELDS}
    try:
        values = seller.clean(typed)
    except seller.ProfileInvalid as exc:
        request.response.status = 422
        return _page(request, typed, exc.errors)
    seller.save_settings(request.db, values, request.user.id)
    return see_other(request, "/admin/tax/settings", notice="tax_settings_saved")
