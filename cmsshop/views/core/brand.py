"""The shop's brand: the console page (/admin/brand), its JSON twin
(/api/admin/settings/brand), the accent's stylesheet and the ``brand`` every HTML page
sees (services.storefront.brand holds the rules)."""

from __future__ import annotations

from pyramid.httpexceptions import HTTPNotFound
from pyramid.response import Response
from pyramid.view import view_config
from sqlalchemy.exc import SQLAlchemyError

from cmsshop.errors import ValidationFailed
from cmsshop.security import ADMIN
from cmsshop.services.storefront import brand as brands
from cmsshop.services.tax import logo
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.forms import posted_value, see_other
from cmsshop.views.shared.json import read_json
from cmsshop.views.tax.seller_pages import save_uploaded_logo

NOTICES = {
    "brand_saved": "The brand is saved.",
    "brand_logo_saved": "The logo is saved.",
    "brand_logo_removed": "The logo is removed.",
    "brand_featured_changed": "The featured products are saved.",
}
BRAND_KEY = "cmsshop.brand"
# The fields as the console names them (its list of recent changes).
LABELS = {
    "shopName": "shop name",
    "accent": "accent colour",
    "headline": "headline",
    "intro": "introduction",
    "featured": "featured products",
}
PAGE = "/admin/brand"


def _error_status(exc) -> int:
    for name in ("status", "code"):  # an ApiError's status, an HTTPException's code
        value = getattr(exc, name, None)
        if isinstance(value, int):
            return value
    return 500


def current_brand(request) -> brands.Brand:
    """The brand, read once per request. An error page of a server error shows the
    defaults: the database may be what failed, and the page must still render."""
    found = request.environ.get(BRAND_KEY)
    if found is None:
        exc = getattr(request, "exception", None)
        if exc is not None and _error_status(exc) >= 500:
            found = brands.default_brand(request.registry.settings)
        else:
            try:
                found = brands.kept_brand(request.db, request.registry.settings)
            except SQLAlchemyError:
                found = brands.default_brand(request.registry.settings)
        request.environ[BRAND_KEY] = found
    return found


def add_brand_globals(event) -> None:
    """``brand`` for every HTML page, and ``site_name`` as the seller named the shop."""
    request = event.get("request")
    if request is None or not str(event.get("renderer_name", "")).endswith(".html"):
        return
    found = current_brand(request)
    event["brand"] = found
    event["site_name"] = found.shop_name


@view_config(route_name="pages.theme_css", request_method="GET")
def theme_css(request):
    """The accent as a CSS custom property. The colour is the URL, so the answer never
    changes and is cached for good; the pages' Content-Security-Policy allows no inline
    style, hence a stylesheet of its own."""
    asked = "#" + request.matchdict["accent"]
    try:
        accent = brands.clean_accent(asked)
    except ValueError:
        accent = ""
    if not accent or accent != asked:  # one URL per colour: the lower-case one the pages link
        raise HTTPNotFound("No such theme.")
    response = Response(
        body=f":root {{ --accent: {accent}; }}\n".encode(),
        content_type="text/css",
        charset="utf-8",
    )
    response.cache_control = "public, max-age=31536000, immutable"
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


# --- the console page -------------------------------------------------------------------


def _page(request, form: dict, errors: dict, *, logo_errors=None, featured_errors=None) -> dict:
    no_store(request)
    values = brands.current_values(request.db)
    featured = brands.featured_cards(request.db, values["featured"])
    shown = {card.product.id for card in featured}
    return {
        "admin_section": "brand",
        "form": form,
        "errors": errors,
        "logo_errors": logo_errors or {},
        "featured_errors": featured_errors or {},
        "featured": featured,
        "choices": [
            (pid, name) for pid, name in brands.product_choices(request.db) if pid not in shown
        ],
        "logo_url": current_brand(request).logo_url,
        "max_featured": brands.MAX_FEATURED,
        "changes": brands.recent_changes(request.db),
        "labels": LABELS,
        "default_name": request.registry.settings.get("cmsshop.site_name") or "cmsshop",
    }


def _saved_form(request) -> dict:
    values = brands.current_values(request.db)
    return {name: values[name] for name in brands.TEXT_FIELDS} | {"accent": values["accent"]}


@view_config(
    route_name="pages.admin_brand",
    request_method="GET",
    renderer="admin/core/brand.html",
    permission=ADMIN,
)
def brand_page(request):
    return _page(request, _saved_form(request), {})


@view_config(
    route_name="pages.admin_brand",
    request_method="POST",
    renderer="admin/core/brand.html",
    permission=ADMIN,
)
def brand_submit(request):
    """The shop's name, accent and home page text; the featured list is kept as it is."""
    typed = {name: posted_value(request, name) for name in (*brands.TEXT_FIELDS, "accent")}
    current = brands.current_values(request.db)
    try:
        values = brands.clean(request.db, {**typed, "featured": current["featured"]})
    except brands.BrandInvalid as exc:
        request.response.status = 422
        return _page(request, typed, exc.errors)
    brands.save_brand(request.db, values, request.user, ip=request.client_addr)
    return see_other(request, PAGE, notice="brand_saved")


@view_config(
    route_name="pages.admin_brand_logo",
    request_method="POST",
    renderer="admin/core/brand.html",
    permission=ADMIN,
)
def brand_logo(request):
    """The shop's one logo (also on invoices), uploaded as the tax page uploads it."""
    refused = save_uploaded_logo(request)
    if refused is not None:
        request.response.status = 422
        return _page(request, _saved_form(request), {}, logo_errors={"logo": refused})
    request.environ.pop(BRAND_KEY, None)
    return see_other(request, PAGE + "#logo", notice="brand_logo_saved")


@view_config(route_name="pages.admin_brand_logo_remove", request_method="POST", permission=ADMIN)
def brand_logo_remove(request):
    logo.remove_logo(request.db)
    return see_other(request, PAGE + "#logo", notice="brand_logo_removed")


@view_config(
    route_name="pages.admin_brand_featured",
    request_method="POST",
    renderer="admin/core/brand.html",
    permission=ADMIN,
)
def brand_featured(request):
    """One change to the featured list: add a product, move one up or down, remove one."""
    move, raw_id = posted_value(request, "move"), posted_value(request, "product")
    current = brands.current_values(request.db)
    errors = {}
    if move not in brands.MOVES:
        errors["product"] = "choose what to do with the product"
    elif not raw_id.isdigit():
        errors["product"] = "choose a product"
    else:
        featured = brands.move_featured(current["featured"], int(raw_id), move)
        try:
            values = brands.clean(request.db, {**current, "featured": featured})
        except brands.BrandInvalid as exc:
            errors = {"product": exc.errors.get("featured", "could not be saved")}
        else:
            brands.save_brand(request.db, values, request.user, ip=request.client_addr)
            return see_other(request, PAGE + "#featured", notice="brand_featured_changed")
    request.response.status = 422
    return _page(request, _saved_form(request), {}, featured_errors=errors)


# --- the JSON API -----------------------------------------------------------------------


def _typed(data) -> dict:
    """The body's fields, each of the JSON type it takes; ValidationFailed if not."""
    if not isinstance(data, dict):
        raise ValidationFailed({"body": "a JSON object"})
    errors = {}
    for name, value in data.items():
        if name not in brands.FIELDS:
            errors[name] = "not a setting of the brand"
        elif name == "featured":
            if not isinstance(value, list) or not all(
                isinstance(item, int) and not isinstance(item, bool) for item in value
            ):
                errors[name] = "a list of product ids"
        elif value is not None and not isinstance(value, str):
            errors[name] = "a string, or null for the default"
    if errors:
        raise ValidationFailed(errors)
    return data


@view_config(route_name="core.admin_brand", request_method="GET", renderer="json", permission=ADMIN)
def get_brand(request):
    return brands.read_brand(request.db, request.registry.settings).as_json()


@view_config(route_name="core.admin_brand", request_method="PUT", renderer="json", permission=ADMIN)
def put_brand(request):
    """Partial: a field left out keeps its value; null or "" goes back to the default."""
    update = _typed(read_json(request))
    current = brands.current_values(request.db)
    try:
        values = brands.clean(request.db, {**current, **update})
    except brands.BrandInvalid as exc:
        raise ValidationFailed(exc.errors) from None
    brands.save_brand(request.db, values, request.user, ip=request.client_addr)
    return brands.read_brand(request.db, request.registry.settings).as_json()
