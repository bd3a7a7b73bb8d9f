"""The admin pages of the store: the catalogue's products (list, create, edit (prices,
licensing), archive, release uploads) and its currencies (list, add, edit), with the
colander schemas (ProductSchema, CurrencySchema, CurrencyPatchSchema), services and
streaming upload (receive_release) of the JSON admin routes in views/store/admin_api.py.

Prices are typed in major units (``49.00`` for 4900 cents), one field per enabled
currency (and per currency the product already has a price in): the text is converted
exactly with the currency's decimals (services.store.currencies.parse_major_amount,
no float), then validated as the JSON body's integer ``amount``; a blank field means no
price in that currency.
"""

from __future__ import annotations

import re

import colander
from pyramid.view import view_config

from cmsshop.errors import ApiError
from cmsshop.security import ADMIN
from cmsshop.services.store import currencies, media, products, text
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.confirm import carried_fields, confirm_page, confirmed
from cmsshop.views.shared.forms import FormInvalid, field_errors, posted_value, see_other
from cmsshop.views.shared.json import flatten_errors, query_value, read_page_request
from cmsshop.views.store.admin_api import (
    CurrencyPatchSchema,
    CurrencySchema,
    ProductSchema,
    receive_release,
    service_names,
)

NOTICES = {
    "product_created": "The product was created.",
    "product_saved": "The product was saved.",
    "product_archived": "The product is archived: the shop no longer shows it.",
    "product_unarchived": "The product is no longer archived.",
    "release_uploaded": "The release was uploaded.",
    "currency_created": "The currency was added.",
    "currency_saved": "The currency was saved.",
}
TEXT_FIELDS = (
    "slug",
    "name",
    "summary",
    "description",
    "max_activations",
    "max_quantity",
    "duration_days",
    "features",
    "version_scheme",
    "upgrade_group",
    "tier",
)
CHECKBOXES = ("published", "licensed")
# Form field -> the JSON body's field, for errors the schema reports by JSON name.
ERROR_FIELDS = {
    "licensing.licensed": "licensed",
    "licensing.maxActivations": "max_activations",
    "licensing.maxQuantity": "max_quantity",
    "licensing.durationDays": "duration_days",
    "licensing.features": "features",
    "licensing.upgradeGroup": "upgrade_group",
    "licensing.tier": "tier",
    "versionScheme": "version_scheme",
    "licensing": "form",
    "prices": "form",
}
PRICE_ERROR = re.compile(r"^prices\.(\d+)(?:\..*)?$")
INTEGER = re.compile(r"^[0-9]{1,18}\Z")


def _integer_or_text(raw: str):
    """An integer field: None when blank, an int when it is digits, else the text
    itself (the schema then answers "must be an integer", as it would to JSON)."""
    raw = raw.strip()
    if raw == "":
        return None
    return int(raw) if INTEGER.match(raw) else raw


def price_field(code: str) -> str:
    return f"price_{code}"


def price_currencies(session, product=None) -> list:
    """The currencies the form has a price field for: every enabled one, and any other
    the product already has a price in (so saving the form never drops it unseen)."""
    priced = {price.currency for price in product.prices} if product is not None else set()
    return [
        currency
        for currency in currencies.list_currencies(session, enabled_only=False)
        if currency.enabled or currency.code in priced
    ]


class ProductForm:
    """A posted product form, as the JSON body of ProductSchema."""

    def __init__(self, request, price_currencies: list):
        self.price_currencies = price_currencies
        self.typed = {name: posted_value(request, name) for name in TEXT_FIELDS}
        self.typed["description"] = self.typed["description"].replace("\r\n", "\n")
        for name in CHECKBOXES:
            self.typed[name] = "on" if name in request.POST else ""
        for currency in price_currencies:
            name = price_field(currency.code)
            self.typed[name] = posted_value(request, name)
        # The index of each price in the body -> its form field.
        self.price_fields: list[str] = []

    def read(self) -> dict:
        """The validated fields in the service's names; FormInvalid if any is wrong."""
        errors: dict[str, str] = {}
        prices = []
        for currency in self.price_currencies:
            name = price_field(currency.code)
            raw = self.typed[name]
            if not raw.strip():
                continue
            try:
                amount = currencies.parse_major_amount(raw, currency.decimals)
            except ValueError as exc:
                errors[name] = str(exc)
                continue
            prices.append({"currency": currency.code, "amount": amount})
            self.price_fields.append(name)
        body = {
            "slug": self.typed["slug"].strip(),
            "name": self.typed["name"].strip(),
            "summary": self.typed["summary"].strip(),
            "description": self.typed["description"],
            "published": self.typed["published"] == "on",
            "versionScheme": self.typed["version_scheme"] or "pep440",
            "licensing": {
                "licensed": self.typed["licensed"] == "on",
                "maxActivations": _integer_or_text(self.typed["max_activations"]),
                "maxQuantity": _integer_or_text(self.typed["max_quantity"]),
                "durationDays": _integer_or_text(self.typed["duration_days"]),
                "features": [name for name in re.split(r"[\s,]+", self.typed["features"]) if name],
                "tier": _integer_or_text(self.typed["tier"]) or 0,
            },
            "prices": prices,
        }
        group = self.typed["upgrade_group"].strip()
        if group:
            body["licensing"]["upgradeGroup"] = group
        try:
            data = ProductSchema().deserialize(body)
        except colander.Invalid as exc:
            errors.update(self.form_errors(flatten_errors(exc)))
        if errors:
            raise FormInvalid(errors, self.typed)
        return service_names(data)

    def form_errors(self, errors: dict[str, str]) -> dict[str, str]:
        """Errors named as in the JSON body (``prices.0.amount``) -> form fields."""
        result: dict[str, str] = {}
        for key, message in errors.items():
            match = PRICE_ERROR.match(key)
            if match and int(match.group(1)) < len(self.price_fields):
                field = self.price_fields[int(match.group(1))]
            else:
                field = ERROR_FIELDS.get(key, key if key in self.typed else "form")
            result.setdefault(field, message)
        return result

    def service_errors(self, exc: ApiError) -> dict[str, str]:
        if exc.code == "slug_taken":
            return {"slug": exc.message}
        if exc.code == "product_has_no_release":
            return {"published": "Upload a stable release first: " + exc.message}
        return self.form_errors(field_errors(exc))


def product_form_values(product, price_currencies: list) -> dict:
    """The form of a stored product, as it would be typed."""
    values = {
        "slug": product.slug,
        "name": product.name,
        "summary": product.summary,
        "description": product.description,
        "published": "on" if product.published else "",
        "licensed": "on" if product.licensed else "",
        "max_activations": "" if product.max_activations is None else str(product.max_activations),
        "max_quantity": "" if product.max_quantity is None else str(product.max_quantity),
        "duration_days": "" if product.duration_days is None else str(product.duration_days),
        "features": ", ".join(product.features or []),
        "version_scheme": product.version_scheme,
        "upgrade_group": product.upgrade_group or "",
        "tier": str(product.tier),
    }
    decimals = {currency.code: currency.decimals for currency in price_currencies}
    for price in product.prices:
        if price.currency in decimals:
            values[price_field(price.currency)] = currencies.major_amount_text(
                price.amount, decimals[price.currency]
            )
    return values


# --- list --------------------------------------------------------------------------------


@view_config(
    route_name="pages.admin_products",
    request_method="GET",
    renderer="admin/store/products.html",
    permission=ADMIN,
)
def product_list(request):
    no_store(request)
    q = text.parse_search(query_value(request, "q"))
    page = products.list_products(request.db, read_page_request(request), q=q, public=False)
    return {"admin_section": "products", "page": page, "q": q or ""}


# --- create and edit ---------------------------------------------------------------------


def _new_page(request, form: dict, errors: dict, status: int = 200) -> dict:
    request.response.status = status
    no_store(request)
    return {
        "admin_section": "products",
        "product": None,
        "currencies": price_currencies(request.db),
        "form": form,
        "errors": errors,
        "upload_form": {},
        "upload_errors": {},
        "max_upload_bytes": request.registry.settings["cmsshop.max_upload_bytes"],
    }


@view_config(
    route_name="pages.admin_product_new",
    request_method="GET",
    renderer="admin/store/product_edit.html",
    permission=ADMIN,
)
def new_product(request):
    return _new_page(request, {}, {})


@view_config(
    route_name="pages.admin_product_new",
    request_method="POST",
    renderer="admin/store/product_edit.html",
    permission=ADMIN,
)
def create_product(request):
    form = ProductForm(request, price_currencies(request.db))
    try:
        product = products.create_product(request.db, form.read())
    except FormInvalid as exc:
        return _new_page(request, exc.form, exc.errors, 422)
    except ApiError as exc:
        return _new_page(request, form.typed, form.service_errors(exc), exc.status)
    return see_other(request, f"/admin/products/{product.slug}/edit", notice="product_created")


def _find(request):
    return products.find_product(request.db, request.matchdict["slug"], public=False)


def edit_page(
    request,
    product,
    *,
    form: dict | None = None,
    errors: dict | None = None,
    upload_form: dict | None = None,
    upload_errors: dict | None = None,
    image_form: dict | None = None,
    image_errors: dict | None = None,
    alt_errors: dict | None = None,
    alt_typed: dict | None = None,
    status: int = 200,
) -> dict:
    """The edit page; the ``image_*``/``alt_*`` arguments are the image section's
    (views/store/admin_media.py): the upload form as typed and its errors, and per image
    id a refused description and its error."""
    request.response.status = status
    no_store(request)
    shown = price_currencies(request.db, product)
    return {
        "image_form": image_form or {},
        "image_errors": image_errors or {},
        "alt_errors": alt_errors or {},
        "alt_typed": alt_typed or {},
        "max_image_bytes": media.MAX_BYTES,
        "admin_section": "products",
        "product": product,
        "currencies": shown,
        "form": product_form_values(product, shown) if form is None else form,
        "errors": errors or {},
        "upload_form": upload_form or {},
        "upload_errors": upload_errors or {},
        "max_upload_bytes": request.registry.settings["cmsshop.max_upload_bytes"],
    }


@view_config(
    route_name="pages.admin_product_edit",
    request_method="GET",
    renderer="admin/store/product_edit.html",
    permission=ADMIN,
)
def edit_product(request):
    return edit_page(request, _find(request))


@view_config(
    route_name="pages.admin_product_edit",
    request_method="POST",
    renderer="admin/store/product_edit.html",
    permission=ADMIN,
)
def update_product(request):
    product = _find(request)
    if product.published and "published" not in request.POST and not confirmed(request):
        return confirm_page(
            request,
            title=f"Unpublish “{product.name}”?",
            consequences=[
                f"Save the product “{product.name}” as unpublished: the shop stops showing "
                f"it, its URL /products/{product.slug} will answer 404 and it can no longer "
                "be bought; its orders, licenses and downloads stay.",
                *buyers_keep(request, product),
                "Publish it again to bring it back.",
            ],
            action=f"/admin/products/{product.slug}/edit",
            button="Save and unpublish the product",
            cancel=f"/admin/products/{product.slug}/edit",
            section="products",
            fields=carried_fields(request),
        )
    form = ProductForm(request, price_currencies(request.db, product))
    try:
        products.update_product(request.db, product, form.read())
    except FormInvalid as exc:
        return edit_page(request, product, form=exc.form, errors=exc.errors, status=422)
    except ApiError as exc:
        request.db.expire(product)  # the page shows the stored product, not the attempt
        errors = form.service_errors(exc)
        return edit_page(request, product, form=form.typed, errors=errors, status=exc.status)
    return see_other(request, f"/admin/products/{product.slug}/edit", notice="product_saved")


def buyers_keep(request, product) -> list[str]:
    """What the product's buyers keep when it leaves the shop, with their number."""
    buyers, keys = products.active_buyers(request.db, product)
    if not buyers and not keys:
        return []
    who = f"{buyers} buyer{'' if buyers == 1 else 's'}"
    what = "their downloads keep working"
    if keys:
        what += (
            f", and their {keys} license key{'' if keys == 1 else 's'} "
            f"keep{'s' if keys == 1 else ''} activating and validating"
        )
    return [
        f"Warning: {who} {'has' if buyers == 1 else 'have'} it. They keep what they bought: {what}."
    ]


def _set_archived(request, archived: bool):
    product = _find(request)
    products.update_product(request.db, product, {"archived": archived})
    notice = "product_archived" if archived else "product_unarchived"
    return see_other(request, f"/admin/products/{product.slug}/edit", notice=notice)


@view_config(route_name="pages.admin_product_archive", request_method="POST", permission=ADMIN)
def archive_product(request):
    product = _find(request)
    if not product.archived and not confirmed(request):
        return confirm_page(
            request,
            title=f"Archive “{product.name}”?",
            consequences=[
                f"Archive the product “{product.name}” ({product.slug}): the shop stops "
                f"showing it, its URL /products/{product.slug} will answer 404 and it can "
                "no longer be bought.",
                "Its orders, licenses and downloads stay; you can unarchive it later.",
                *buyers_keep(request, product),
            ],
            action=f"/admin/products/{product.slug}/archive",
            button="Archive the product",
            cancel=f"/admin/products/{product.slug}/edit",
            section="products",
        )
    return _set_archived(request, True)


@view_config(route_name="pages.admin_product_unarchive", request_method="POST", permission=ADMIN)
def unarchive_product(request):
    return _set_archived(request, False)


# --- release upload ----------------------------------------------------------------------
#
# CSRF without buffering the upload: Pyramid checks the X-CSRF-Token header first and
# reads the csrf_token *form field* only when the header is absent -- and reading it
# makes WebOb parse the whole multipart body. So static/upload.js sends the form with
# XMLHttpRequest and the header (and shows a <progress> bar): WebOb never parses the
# body, the file streams from the request into ReleaseWriter as in the JSON route. The
# form's action carries no secret. Without JavaScript the plain form submit still works:
# Pyramid then finds csrf_token in the parsed form (cgi.FieldStorage spools the file to a
# temporary file, not memory; the body was already held to cmsshop.max_upload_bytes, and
# to an admin's session, by cmsshop.server and tweens.check_body), and the same streaming
# reader reads the body again from the start, skipping the csrf_token field.

UPLOAD_ERROR_FIELDS = {"version_exists": "version", "payload_too_large": "file"}


@view_config(
    route_name="pages.admin_product_releases",
    request_method="POST",
    renderer="admin/store/product_edit.html",
    permission=ADMIN,
)
def upload_release(request):
    product = _find(request)
    typed: dict = {}
    try:
        receive_release(request, product, skip_fields=("csrf_token",), typed=typed)
    except ApiError as exc:
        field = UPLOAD_ERROR_FIELDS.get(exc.code)
        errors = {field: exc.message} if field else field_errors(exc)
        fields = {"version", "channel", "changelog", "file", "requires", "requiresPhp", "tested"}
        if not set(errors) <= fields:
            errors = {"form": exc.message}
        return edit_page(
            request, product, upload_form=typed, upload_errors=errors, status=exc.status
        )
    return see_other(request, f"/admin/products/{product.slug}/edit", notice="release_uploaded")


# --- currencies ---------------------------------------------------------------------------

CURRENCY_CHECKBOXES = ("enabled", "default")
CURRENCY_INTEGER = re.compile(r"^[0-9]{1,9}\Z")
# Service refusals that belong to one field of the form.
CONFLICT_FIELDS = {"currency_exists": "code"}


def read_currency_form(request, schema: colander.SchemaNode) -> dict:
    """The form as ``schema``'s JSON body (checkboxes -> booleans, decimals -> an
    integer), validated; FormInvalid with what was typed if not."""
    names = [node.name for node in schema.children]
    typed = {name: posted_value(request, name) for name in names if name not in CURRENCY_CHECKBOXES}
    body: dict = {}
    for name, raw in typed.items():
        raw = raw.strip()
        if name == "decimals":
            if raw:
                body[name] = int(raw) if CURRENCY_INTEGER.match(raw) else raw
        elif name == "code":
            body[name] = raw.upper() if raw.isascii() else raw
        else:
            body[name] = raw
    for name in CURRENCY_CHECKBOXES:
        if name in names:
            typed[name] = "on" if name in request.POST else ""
            body[name] = name in request.POST
    try:
        return schema.deserialize(body)
    except colander.Invalid as exc:
        raise FormInvalid(flatten_errors(exc), typed) from None


def service_errors(exc: ApiError) -> dict[str, str]:
    field = CONFLICT_FIELDS.get(exc.code)
    return {field: exc.message} if field else field_errors(exc)


@view_config(
    route_name="pages.admin_currencies",
    request_method="GET",
    renderer="admin/store/currencies.html",
    permission=ADMIN,
)
def currency_list(request):
    no_store(request)
    return {
        "admin_section": "currencies",
        "currencies": currencies.list_currencies(request.db, enabled_only=False),
    }


def _form_page(request, currency, form: dict, errors: dict, status: int = 200) -> dict:
    request.response.status = status
    no_store(request)
    return {"admin_section": "currencies", "currency": currency, "form": form, "errors": errors}


@view_config(
    route_name="pages.admin_currency_new",
    request_method="GET",
    renderer="admin/store/currency_edit.html",
    permission=ADMIN,
)
def new_currency(request):
    return _form_page(request, None, {"decimals": "2", "enabled": "on"}, {})


@view_config(
    route_name="pages.admin_currency_new",
    request_method="POST",
    renderer="admin/store/currency_edit.html",
    permission=ADMIN,
)
def create_currency(request):
    try:
        currencies.create_currency(request.db, read_currency_form(request, CurrencySchema()))
    except FormInvalid as exc:
        return _form_page(request, None, exc.form, exc.errors, 422)
    except ApiError as exc:
        typed = {
            name: posted_value(request, name) for name in ("code", "name", "symbol", "decimals")
        }
        typed.update({name: "on" if name in request.POST else "" for name in CURRENCY_CHECKBOXES})
        return _form_page(request, None, typed, service_errors(exc), exc.status)
    return see_other(request, "/admin/currencies", notice="currency_created")


def _code(request) -> str:
    raw = request.matchdict["code"]
    return raw.upper() if len(raw) == 3 and raw.isascii() else raw


def _stored_form(currency) -> dict:
    return {
        "name": currency.name,
        "symbol": currency.symbol,
        "enabled": "on" if currency.enabled else "",
        "default": "on" if currency.is_default else "",
    }


@view_config(
    route_name="pages.admin_currency_edit",
    request_method="GET",
    renderer="admin/store/currency_edit.html",
    permission=ADMIN,
)
def edit_currency(request):
    currency = currencies.find_currency(request.db, _code(request))
    return _form_page(request, currency, _stored_form(currency), {})


@view_config(
    route_name="pages.admin_currency_edit",
    request_method="POST",
    renderer="admin/store/currency_edit.html",
    permission=ADMIN,
)
def update_currency(request):
    code = _code(request)
    currency = currencies.find_currency(request.db, code)  # 404 before reading the form
    disabling = currency.enabled and not currency.is_default and "enabled" not in request.POST
    if disabling and not confirmed(request):
        return confirm_page(
            request,
            title=f"Disable {currency.code}?",
            consequences=[
                f"Disable {currency.code} ({currency.name}): the shop stops offering it, so "
                f"no new cart, checkout or price list is in {currency.code}.",
                f"Prices already set in {currency.code} and past orders in it stay; "
                "enable it again to offer it.",
            ],
            action=f"/admin/currencies/{currency.code}/edit",
            button=f"Save and disable {currency.code}",
            cancel=f"/admin/currencies/{currency.code}/edit",
            section="currencies",
            fields=carried_fields(request),
        )
    try:
        changes = read_currency_form(request, CurrencyPatchSchema())
        currencies.update_currency(request.db, code, changes)
    except FormInvalid as exc:
        return _form_page(request, currency, exc.form, exc.errors, 422)
    except ApiError as exc:
        typed = {name: posted_value(request, name) for name in ("name", "symbol")}
        typed.update({name: "on" if name in request.POST else "" for name in CURRENCY_CHECKBOXES})
        request.db.expire(currency)
        return _form_page(request, currency, typed, service_errors(exc), exc.status)
    return see_other(request, "/admin/currencies", notice="currency_saved")
