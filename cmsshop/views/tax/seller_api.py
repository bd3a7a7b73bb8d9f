"""The seller's legal identity and tax settings as JSON for the console's automation:
GET and PUT /api/admin/settings/seller (admin only). PUT is partial: a field left out
keeps its value; the result is checked as the console's form checks it (422 with a
message per field, nothing saved)."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop.errors import ValidationFailed
from cmsshop.security import ADMIN
from cmsshop.services.tax import logo, seller
from cmsshop.views.shared.json import read_json


def seller_body(request) -> dict:
    profile = seller.shop_profile(request.db, request.registry.settings)
    stored = logo.read_logo(request.db)
    return {
        **profile.as_json(),
        "missing": seller.missing_identity(profile),
        "sources": dict(profile.sources),
        "logoUrl": logo.logo_url(stored) if stored is not None else None,
    }


def _typed(data) -> dict:
    """The body's fields, each of the JSON type its kind takes; ValidationFailed if not."""
    if not isinstance(data, dict):
        raise ValidationFailed({"body": "a JSON object"})
    errors = {}
    for field, value in data.items():
        kind = seller.FIELDS[field][2] if field in seller.FIELDS else None
        if kind is None:
            errors[field] = "not a setting of the seller"
        elif kind == "bool" and not isinstance(value, bool):
            errors[field] = "true or false"
        elif kind == "codes" and not (
            isinstance(value, list) and all(isinstance(item, str) for item in value)
        ):
            errors[field] = "a list of country or region codes"
        elif kind in ("text", "lines") and not isinstance(value, str):
            errors[field] = "a string"
    if errors:
        raise ValidationFailed(errors)
    return data


@view_config(route_name="tax.admin_seller", request_method="GET", renderer="json", permission=ADMIN)
def get_seller(request):
    return seller_body(request)


@view_config(route_name="tax.admin_seller", request_method="PUT", renderer="json", permission=ADMIN)
def put_seller(request):
    update = _typed(read_json(request))
    current = seller.shop_profile(request.db, request.registry.settings).as_json()
    try:
        values = seller.clean({**current, **update})
    except seller.ProfileInvalid as exc:
        raise ValidationFailed(exc.errors) from None
    seller.save_settings(request.db, values, request.user.id)
    return seller_body(request)
