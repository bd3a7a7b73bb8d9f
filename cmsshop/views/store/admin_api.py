"""Content management of the store (admin role, CSRF token): products and their release
files, and the currencies (one enabled default, which cannot be disabled or unset)."""

from __future__ import annotations

import colander
import multipart
from pyramid.view import view_config

from cmsshop.errors import ApiError, NotFound, UnsupportedMediaType, ValidationFailed
from cmsshop.models import INTERVALS, RELEASE_CHANNELS, VERSION_SCHEMES, Release
from cmsshop.models.subscriptions import MAX_TRIAL_DAYS
from cmsshop.security import ADMIN
from cmsshop.services.checkout import pricing
from cmsshop.services.store import currencies, products, releases, text
from cmsshop.services.subscriptions import plans as subscription_plans
from cmsshop.views.shared.bodies import release_body
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.json import (
    FeatureList,
    StrictMapping,
    StrictSequence,
    StrictString,
    page_json,
    query_value,
    read_json,
    read_page_request,
)
from cmsshop.views.shared.schema import (
    MAX_MARKDOWN,
    bool_node,
    int_node,
    nullable_int_node,
    optional,
    slug_node,
    text_node,
)
from cmsshop.views.store.api import MAX_AMOUNT, currency_body, product_body

MAX_ACTIVATIONS = 1_000_000
# A seller's per-order limit can never exceed what checkout accepts of anything.
MAX_QUANTITY = pricing.QUANTITY_CEILING
MAX_DURATION_DAYS = 36_500  # a century; also keeps license expiry dates representable
MAX_PRICES = 50
UPLOAD_CHUNK = 256 * 1024

# --- bodies ------------------------------------------------------------------------------


def _unique_currencies(node, prices):
    seen = set()
    for price in prices:
        if price["currency"] in seen:
            raise colander.Invalid(node, f"{price['currency']} is listed twice")
        seen.add(price["currency"])


class PriceSchema(colander.MappingSchema):
    schema_type = StrictMapping
    currency = colander.SchemaNode(
        StrictString(), validator=colander.Regex(currencies.CURRENCY_CODE, "e.g. EUR")
    )
    amount = int_node(0, MAX_AMOUNT)


class PricesSchema(colander.SequenceSchema):
    schema_type = StrictSequence
    validator = colander.All(colander.Length(max=MAX_PRICES), _unique_currencies)
    price = PriceSchema()


class LicensingSchema(colander.MappingSchema):
    schema_type = StrictMapping
    licensed = bool_node(missing=False)
    maxActivations = nullable_int_node(0, MAX_ACTIVATIONS, missing=None)  # noqa: N815
    # The most one order may buy; null: 100 seat packs if licensed, else 1.
    maxQuantity = nullable_int_node(1, MAX_QUANTITY, missing=None)  # noqa: N815
    durationDays = nullable_int_node(1, MAX_DURATION_DAYS, missing=None)  # noqa: N815
    # Flags a new license of the product carries (existing licenses keep theirs).
    features = colander.SchemaNode(FeatureList(), missing=[])
    # Upgrades move a license to a product of the same group with a higher tier.
    upgradeGroup = colander.SchemaNode(  # noqa: N815
        StrictString(),
        missing=None,
        validator=colander.Regex(r"^[a-z0-9][a-z0-9_-]{0,49}$", "1-50 of a-z 0-9 _ -"),
    )
    tier = int_node(0, 1000, missing=0)


class ProductSchema(colander.MappingSchema):
    schema_type = StrictMapping
    slug = slug_node()
    name = text_node(200, min_length=1)
    summary = text_node(500, missing="")
    description = text_node(MAX_MARKDOWN, multiline=True, missing="")
    published = bool_node(missing=False)
    # How release versions compare (services/store/versions.py).
    versionScheme = colander.SchemaNode(  # noqa: N815
        StrictString(),
        missing="pep440",
        validator=colander.OneOf(VERSION_SCHEMES),
    )
    licensing = LicensingSchema(
        missing={
            "licensed": False,
            "maxActivations": None,
            "maxQuantity": None,
            "durationDays": None,
            "features": [],
            "upgradeGroup": None,
            "tier": 0,
        }
    )
    prices = PricesSchema(missing=[])


# JSON names of the licensing object -> the service's field names.
LICENSING_NAMES = {
    "licensed": "licensed",
    "maxActivations": "max_activations",
    "maxQuantity": "max_quantity",
    "durationDays": "duration_days",
    "features": "features",
    "upgradeGroup": "upgrade_group",
    "tier": "tier",
}


def read_product(request, schema: colander.SchemaNode) -> dict:
    """A validated product body, its licensing object in the service's field names."""
    data = read_json(request, schema)
    return service_names(data)


def service_names(data: dict) -> dict:
    """A validated ProductSchema body with the service's field names."""
    if "versionScheme" in data:
        data["version_scheme"] = data.pop("versionScheme")
    if "licensing" in data:
        data["licensing"] = {LICENSING_NAMES[k]: v for k, v in data["licensing"].items()}
    return data


def product_patch_schema() -> colander.SchemaNode:
    schema = optional(ProductSchema())
    schema.add(bool_node(name="archived", missing=colander.drop))
    return schema


# --- views -------------------------------------------------------------------------------


def admin_product_body(card: products.ProductCard) -> dict:
    return product_body(card, admin=True)


def _card(request, product) -> dict:
    (card,) = products.load_cards(request.db, [product], public=False)
    return admin_product_body(card)


@view_config(
    route_name="store.admin_products", request_method="GET", renderer="json", permission=ADMIN
)
def list_products(request):
    no_store(request)
    page_request = read_page_request(request)
    q = text.parse_search(query_value(request, "q"))
    page = products.list_products(request.db, page_request, q=q, public=False)
    return page_json(page, admin_product_body)


@view_config(
    route_name="store.admin_products", request_method="POST", renderer="json", permission=ADMIN
)
def create_product(request):
    data = read_product(request, ProductSchema())
    product = products.create_product(request.db, data)
    request.response.status = 201
    return _card(request, product)


@view_config(
    route_name="store.admin_product", request_method="GET", renderer="json", permission=ADMIN
)
def show_product(request):
    no_store(request)
    product = products.find_product(request.db, request.matchdict["slug"], public=False)
    return _card(request, product)


@view_config(
    route_name="store.admin_product", request_method="PATCH", renderer="json", permission=ADMIN
)
def update_product(request):
    product = products.find_product(request.db, request.matchdict["slug"], public=False)
    changes = read_product(request, product_patch_schema())
    products.update_product(request.db, product, changes)
    return _card(request, product)


@view_config(
    route_name="store.admin_product", request_method="DELETE", renderer="json", permission=ADMIN
)
def delete_product(request):
    product = products.find_product(request.db, request.matchdict["slug"], public=False)
    slug = product.slug
    archived, paths = products.delete_product(request.db, product)
    if paths:
        files = releases.absolute_paths(request.registry.settings["cmsshop.storage_dir"], paths)
        # Only once the deletion has committed: a rolled-back request keeps its files.
        request.tm.get().addAfterCommitHook(
            lambda committed: committed and releases.remove_quietly(*files)
        )
    if archived:
        return {
            "slug": slug,
            "deleted": False,
            "archived": True,
            "message": "The product has orders or coupons naming it, so it was archived "
            "(hidden) instead of deleted.",
        }
    return {"slug": slug, "deleted": True, "archived": False, "message": "The product was deleted."}


# --- release upload ----------------------------------------------------------------------


def _malformed(detail: str) -> ApiError:
    return ApiError(
        f"The multipart body could not be read: {detail}",
        code="malformed_multipart",
        hints=["Send multipart/form-data with a `version` field and a `file` part."],
    )


# The text parts of a release upload: name -> (most bytes, the message past it). UTF-8
# takes up to 4 bytes a character, so the byte caps sit above the character limits the
# release service checks.
TEXT_PART_LIMITS = {
    "version": (200, "at most 50 characters"),
    "channel": (80, "one of: " + ", ".join(RELEASE_CHANNELS)),
    "changelog": (4 * releases.MAX_CHANGELOG, f"at most {releases.MAX_CHANGELOG} characters"),
    "requires": (80, "at most 20 characters"),
    "requiresPhp": (80, "at most 20 characters"),
    "tested": (80, "at most 20 characters"),
}


class _UploadReader:
    """Streams a multipart/form-data body: ``version`` into memory (it is tiny), ``file``
    straight into a :class:`releases.ReleaseWriter`."""

    def __init__(self, request, product, skip_fields: tuple[str, ...] = ()):
        self.request = request
        self.product = product
        # Small fields read and dropped (the page form's csrf_token, already checked).
        self.skip_fields = skip_fields
        self.skipped_bytes = 0
        settings = request.registry.settings
        self.storage_dir = settings["cmsshop.storage_dir"]
        self.max_bytes = settings["cmsshop.max_upload_bytes"]
        # The small text parts as received: version, and optionally channel and changelog.
        self.text_parts: dict[str, bytearray] = {}
        self.raw_file_name: str | None = None
        self.writer: releases.ReleaseWriter | None = None

    def read(self) -> None:
        request = self.request
        if (request.content_type or "").lower() != "multipart/form-data":
            raise UnsupportedMediaType(
                "This route accepts multipart/form-data.",
                hints=["Send the fields `version` and `file` as multipart/form-data."],
            )
        _, options = multipart.parse_options_header(request.headers.get("Content-Type", ""))
        boundary = options.get("boundary")
        if not boundary:
            raise _malformed("the Content-Type has no boundary")
        try:
            parser = multipart.PushMultipartParser(
                boundary,
                content_length=request.content_length if request.content_length else -1,
                max_segment_count=9,
            )
            with parser:
                part = None
                stream = request.body_file
                if request.is_body_seekable:
                    # pyramid_retry runs a retried attempt on the same (spooled) body.
                    stream.seek(0)
                while True:
                    chunk = stream.read(UPLOAD_CHUNK)
                    for event in parser.parse(chunk):
                        part = self._on_event(part, event)
                    if not chunk or parser.closed:
                        break
        except (multipart.MultipartError, UnicodeDecodeError) as exc:
            raise _malformed(str(exc) or type(exc).__name__) from None

    def _on_event(self, part, event):
        if isinstance(event, multipart.MultipartSegment):
            if event.name in self.skip_fields and event.filename is None:
                return "skip"
            if event.name in TEXT_PART_LIMITS and event.name not in self.text_parts:
                self.text_parts[event.name] = bytearray()
            elif event.name == "file" and self.writer is None:
                self.raw_file_name = event.filename
                if "version" in self.text_parts:
                    # The version came first: refuse a duplicate before storing any bytes.
                    version = releases.check_version(self.version(), self.product.version_scheme)
                    releases.ensure_version_free(self.request.db, self.product, version)
                self.writer = releases.ReleaseWriter(self.storage_dir, self.max_bytes)
            else:
                raise ValidationFailed(
                    {event.name or "body": "unexpected or repeated part"},
                    hints=[
                        "Send one `version` field, optionally one each of `channel`, "
                        "`changelog`, `requires`, `requiresPhp` and `tested`, and one "
                        "`file` part."
                    ],
                )
            return event.name
        if event is None:
            return None
        if part in TEXT_PART_LIMITS:
            received = self.text_parts[part]
            received.extend(event)
            limit, message = TEXT_PART_LIMITS[part]
            if len(received) > limit:
                raise ValidationFailed({part: message})
        elif part == "file":
            self.writer.write(event)
        elif part == "skip":
            self.skipped_bytes += len(event)
            if self.skipped_bytes > 1024:
                raise ValidationFailed({"body": "a form field is too long"})
        return part

    @property
    def version_bytes(self) -> bytearray | None:
        return self.text_parts.get("version")

    def text(self, name: str) -> str | None:
        received = self.text_parts.get(name)
        if received is None:
            return None
        try:
            return received.decode("utf-8")
        except UnicodeDecodeError:
            raise ValidationFailed({name: "must be UTF-8 text"}) from None

    def version(self) -> str | None:
        return self.text("version")


def receive_release(
    request, product, skip_fields: tuple[str, ...] = (), typed: dict | None = None
) -> Release:
    """Stream a multipart upload (``version`` and ``file``) into a new release of
    ``product``; shared by the JSON route and the admin page's upload form. ``typed``, if
    given, receives the version as sent (for a form shown again after an error)."""
    reader = _UploadReader(request, product, skip_fields)
    try:
        reader.read()
        version = releases.check_version(reader.version(), product.version_scheme)
        if reader.writer is None:
            raise ValidationFailed({"file": "required"})
        if reader.writer.size == 0:
            raise ValidationFailed({"file": "the file is empty"})
        file_name = releases.display_file_name(
            reader.raw_file_name, fallback=f"{product.slug}-{version}"
        )
        channel = releases.check_channel(reader.text("channel"))
        changelog = releases.check_changelog(reader.text("changelog"))
        requirements = {
            column: releases.check_requirement(name, reader.text(name))
            for name, column in releases.REQUIREMENT_FIELDS.items()
        }
        release = releases.add_release(
            request.db,
            product,
            version=version,
            file_name=file_name,
            upload=reader.writer,
            channel=channel,
            changelog=changelog,
            requirements=requirements,
        )
    finally:
        if reader.writer is not None:
            reader.writer.discard()
        if typed is not None:
            for name, received in reader.text_parts.items():
                typed[name] = bytes(received).decode("utf-8", "replace")
    (stored,) = releases.absolute_paths(
        request.registry.settings["cmsshop.storage_dir"], [release.storage_path]
    )
    # The file is in place before the row commits; if the transaction does not commit
    # (a 4xx/5xx veto, a failed commit, a retry), the file goes too.
    transaction = request.tm.get()
    transaction.addAfterCommitHook(lambda committed: committed or releases.remove_quietly(stored))
    transaction.addAfterAbortHook(releases.remove_quietly, args=(stored,))
    return release


@view_config(
    route_name="store.admin_product_releases",
    request_method="POST",
    renderer="json",
    permission=ADMIN,
)
def upload_release(request):
    product = products.find_product(request.db, request.matchdict["slug"], public=False)
    release = receive_release(request, product)
    request.response.status = 201
    return release_body(release)


# --- currencies ---------------------------------------------------------------------------


class CurrencySchema(colander.MappingSchema):
    schema_type = StrictMapping
    code = colander.SchemaNode(
        StrictString(),
        validator=colander.Regex(currencies.CURRENCY_CODE, "three capital letters, e.g. EUR"),
    )
    name = text_node(100, min_length=1)
    symbol = text_node(8, min_length=1)
    decimals = int_node(0, currencies.MAX_DECIMALS, missing=2)
    enabled = bool_node(missing=True)
    default = bool_node(missing=False)


class CurrencyPatchSchema(colander.MappingSchema):
    """``decimals`` cannot change: stored amounts are minor units of the old decimals."""

    schema_type = StrictMapping
    name = text_node(100, min_length=1, missing=colander.drop)
    symbol = text_node(8, min_length=1, missing=colander.drop)
    enabled = bool_node(missing=colander.drop)
    default = bool_node(missing=colander.drop)


def _code(request) -> str:
    raw = request.matchdict["code"]
    return raw.upper() if len(raw) == 3 and raw.isascii() else raw


@view_config(
    route_name="store.admin_currencies", request_method="GET", renderer="json", permission=ADMIN
)
def list_currencies(request):
    no_store(request)
    found = currencies.list_currencies(request.db, enabled_only=False)
    return {"items": [currency_body(c, admin=True) for c in found]}


@view_config(
    route_name="store.admin_currencies", request_method="POST", renderer="json", permission=ADMIN
)
def create_currency(request):
    data = read_json(request, CurrencySchema())
    currency = currencies.create_currency(request.db, data)
    request.response.status = 201
    return currency_body(currency, admin=True)


@view_config(
    route_name="store.admin_currency", request_method="PATCH", renderer="json", permission=ADMIN
)
def update_currency(request):
    code = _code(request)
    currencies.find_currency(request.db, code)  # 404 before looking at the body
    changes = read_json(request, CurrencyPatchSchema())
    currency = currencies.update_currency(request.db, code, changes)
    return currency_body(currency, admin=True)


# --- a product sold as a subscription (services/subscriptions/plans.py) -----------------


class SubscriptionPlanSchema(colander.MappingSchema):
    interval = colander.SchemaNode(StrictString(), validator=colander.OneOf(INTERVALS))
    intervalCount = int_node(1, 52, missing=1)  # noqa: N815 - the JSON name
    active = bool_node(missing=True)
    trialDays = int_node(0, MAX_TRIAL_DAYS, missing=0)  # noqa: N815 - the JSON name


def subscription_plan_body(product, plan) -> dict:
    return {
        "product": product.slug,
        "interval": plan.interval,
        "intervalCount": plan.interval_count,
        "active": plan.active,
        "trialDays": plan.trial_days,
    }


@view_config(
    route_name="store.admin_product_subscription",
    request_method="GET",
    renderer="json",
    permission=ADMIN,
)
def get_subscription_plan(request):
    no_store(request)
    product = products.find_product(request.db, request.matchdict["slug"], public=False)
    plan = subscription_plans.plan_of(request.db, product.id)
    if plan is None:
        raise NotFound(
            f"{product.slug} is not sold as a subscription.", code="subscription_plan_not_found"
        )
    return subscription_plan_body(product, plan)


@view_config(
    route_name="store.admin_product_subscription",
    request_method="PUT",
    renderer="json",
    permission=ADMIN,
)
def put_subscription_plan(request):
    product = products.find_product(request.db, request.matchdict["slug"], public=False)
    data = read_json(request, SubscriptionPlanSchema())
    try:
        plan, created = subscription_plans.set_plan(
            request.db,
            product,
            interval=data["interval"],
            count=data["intervalCount"],
            active=data["active"],
            trial_days=data["trialDays"],
        )
    except subscription_plans.SubscriptionRefused as exc:
        raise ValidationFailed({exc.field: exc.message}) from None
    request.response.status = 201 if created else 200
    return subscription_plan_body(product, plan)
