"""The console's "Business and tax" page: the seller's legal identity for invoices and
the tax settings (services.tax.seller). A refused form is shown again as typed with the
message at each field, and nothing is saved."""

from __future__ import annotations

import types

import pycountry
from pyramid.view import view_config

from cmsshop.security import ADMIN
from cmsshop.services.tax import checkout as tax_checkout
from cmsshop.services.tax import logo, seller
from cmsshop.services.tax.rates import EU_COUNTRIES
from cmsshop.util import utcnow
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.forms import see_other

NOTICES = {
    "tax_settings_saved": "The business and tax details are saved.",
    "tax_logo_saved": "The invoice logo is saved.",
    "tax_logo_removed": "The invoice logo is removed.",
}
# Euro cents as the money filter shows them (the threshold counts EUR whatever the shop's
# currencies are).
EURO = types.SimpleNamespace(code="EUR", symbol="€", decimals=2)
COUNTRIES = sorted((c.alpha_2, c.name) for c in pycountry.countries)


def _page(request, form: dict, errors: dict, logo_errors: dict | None = None) -> dict:
    no_store(request)
    profile = seller.shop_profile(request.db, request.registry.settings)
    stored = logo.read_logo(request.db)
    settings = request.registry.settings
    return {
        "euro": EURO,
        "cross_border": tax_checkout.micro_seller_status(request.db, settings, utcnow().year),
        "seller_in_eu": profile.country in EU_COUNTRIES,
        "micro_seller": profile.micro_seller,
        "to_review": tax_checkout.orders_to_review(request.db),
        "logo_url": logo.logo_url(stored) if stored is not None else None,
        "logo_errors": logo_errors or {},
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


def _settings_form(request) -> dict:
    profile = seller.shop_profile(request.db, request.registry.settings)
    form = profile.as_json()
    form["registrations"] = " ".join(profile.registrations)
    return form


def save_uploaded_logo(request) -> str | None:
    """Keep the posted ``logo`` file as the shop's logo; why it was refused, or None.
    Shared with the console's brand page (views/core/brand.py): one logo, one upload."""
    upload = request.POST.get("logo")
    data = b""
    if getattr(upload, "file", None) is not None:
        # One byte past the cap is enough to refuse it, whatever the file's size.
        data = upload.file.read(logo.MAX_BYTES + 1)
    try:
        logo.save_logo(request.db, data)
    except logo.LogoInvalid as exc:
        return str(exc)
    return None


@view_config(
    route_name="pages.admin_tax_logo",
    request_method="POST",
    renderer="admin/tax/settings.html",
    permission=ADMIN,
)
def logo_upload(request):
    """A new invoice logo; a refused file is named at the field and nothing changes."""
    refused = save_uploaded_logo(request)
    if refused is not None:
        request.response.status = 422
        return _page(request, _settings_form(request), {}, {"logo": refused})
    return see_other(request, "/admin/tax/settings#invoice-logo", notice="tax_logo_saved")


@view_config(route_name="pages.admin_tax_logo_remove", request_method="POST", permission=ADMIN)
def logo_remove(request):
    logo.remove_logo(request.db)
    return see_other(request, "/admin/tax/settings#invoice-logo", notice="tax_logo_removed")
