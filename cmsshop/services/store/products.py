"""Products: the listing and its cards (prices and latest release), and their content
management (create, change, delete or archive).

A page of products costs the same whatever the size of the catalogue: the listing
(catalogue.listing) counts and fetches the page, then one statement each fetches the
prices and latest releases of *that page* (never one statement per product).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import Select, bindparam, exists, func, select, union
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cmsshop.errors import Conflict, NotFound, ValidationFailed
from cmsshop.hotsql import (
    DIALECTS,
    HotBatch,
    HotStatement,
    RawReads,
    from_db_time,
    raw_reads,
)
from cmsshop.models import (
    CouponProduct,
    Currency,
    Entitlement,
    License,
    OrderItem,
    Product,
    ProductPrice,
    Release,
    SubscriptionPlan,
)
from cmsshop.services.docs.markdown import render_markdown
from cmsshop.services.paging import Page, PageRequest
from cmsshop.services.store import currencies
from cmsshop.services.store.listing import (
    HotListing,
    ListingStatements,
    fetch_hot_listing,
    fetch_listing,
    json_select_text,
    json_text,
    listing_statements,
    ordered_json_array,
    search_sql,
    utc_seconds_sql,
)
from cmsshop.services.store.text import ensure_slug_free, is_slug, like_pattern
from cmsshop.services.store.versions import BadVersion, parse_version
from cmsshop.util import utcnow

# What a product card shows. A row of these columns reads like a Product (row.slug, ...).
CARD_COLUMNS = (
    Product.id,
    Product.slug,
    Product.name,
    Product.summary,
    Product.description,
    Product.description_html,
    Product.published,
    Product.archived,
    Product.licensed,
    Product.max_activations,
    Product.max_quantity,
    Product.duration_days,
    Product.features,
    Product.version_scheme,
    Product.upgrade_group,
    Product.tier,
    Product.created_at,
    Product.updated_at,
)


# The most of one product one order may buy when the seller set no Product.max_quantity:
# seat packs of a licensed product; a download is bought once. The public product body
# says it (built by the database too: see _body_sql).
DEFAULT_MAX_QUANTITY = 100
UNLICENSED_MAX_QUANTITY = 1


def max_quantity(product) -> int:
    """What one order may buy of ``product`` (a Product or a public row)."""
    if product.max_quantity is not None:
        return product.max_quantity
    return DEFAULT_MAX_QUANTITY if product.licensed else UNLICENSED_MAX_QUANTITY


@dataclass
class ProductCard:
    """A product with what its JSON needs, loaded in bulk for a whole page.

    ``product`` is a Product or a row of CARD_COLUMNS; ``prices`` are rows of
    (product_id, currency, amount, symbol, decimals); ``latest_release`` is a row of
    (product_id, version, file_name, size, sha256, released_at, channel, changelog_html)
    or None; ``image`` the first picture (a :data:`CardImage`) where the card was read
    with it (the public list page's), else None; ``subscription`` how it is sold as a
    subscription (a :data:`CardPlan`: its active plan's interval and count), else None.
    """

    product: Any
    prices: list = field(default_factory=list)
    latest_release: Any = None
    image: Any = None
    subscription: Any = None


# A product's active subscription plan as a card carries it (reads like a SubscriptionPlan
# for services.subscriptions.plans.cycle_text: "every month").
CardPlan = collections.namedtuple("CardPlan", "interval interval_count")


@functools.cache
def _product_statements(public: bool, search: bool) -> ListingStatements:
    # Public: the order of ix_products_listing, whose leading columns the filters fix.
    if public:
        filters = (Product.published.is_(True), Product.archived.is_(False))
        order = (Product.published, Product.archived, Product.name, Product.id)
    else:
        filters, order = (), (Product.name, Product.id)
    return listing_statements(
        Product,
        CARD_COLUMNS,
        order=order,
        filters=filters,
        search_in=(Product.name, Product.summary) if search else (),
    )


@functools.cache
def _find_product_statement(public: bool) -> Select:
    # Public: a row of the card's columns (it reads like a Product, without the cost of
    # loading an ORM object); admin: the Product itself, to be changed.
    if public:
        return select(*CARD_COLUMNS).where(
            Product.slug == bindparam("slug"),
            Product.published.is_(True),
            Product.archived.is_(False),
        )
    return select(Product).where(Product.slug == bindparam("slug"))


def list_products(
    session: Session,
    request: PageRequest,
    *,
    q: str | None = None,
    currency: str | None = None,
    public: bool = True,
) -> Page[ProductCard]:
    """A page of products (published and not archived when ``public``) by name."""
    page = fetch_listing(session, _product_statements(public, bool(q)), request, q=q)
    cards = load_cards(session, page.items, currency=currency, public=public)
    return dataclasses.replace(page, items=cards)


def find_product(session: Session, slug: str, *, public: bool) -> Product:
    """The product of ``slug`` (public: a published, not archived one, as a row of
    CARD_COLUMNS), or 404 ``product_not_found``."""
    product = None
    if is_slug(slug):
        statement, params = _find_product_statement(public), {"slug": slug}
        if public:
            product = session.connection().execute(statement, params).first()
        else:
            product = session.scalar(statement, params)
    if product is None:
        raise NotFound(f"There is no product {slug!r}.", code="product_not_found")
    return product


@functools.cache
def _price_statement(public: bool, by_currency: bool) -> Select:
    """Prices of the products ``ids`` (and in ``currency`` when ``by_currency``)."""
    stmt = (
        select(
            ProductPrice.product_id,
            ProductPrice.currency,
            ProductPrice.amount,
            Currency.symbol,
            Currency.decimals,
        )
        .join(Currency, ProductPrice.currency == Currency.code)
        .where(ProductPrice.product_id.in_(bindparam("ids", expanding=True)))
        .order_by(ProductPrice.product_id, ProductPrice.currency)
    )
    if public:
        stmt = stmt.where(Currency.enabled.is_(True))
    if by_currency:
        stmt = stmt.where(ProductPrice.currency == bindparam("currency"))
    return stmt


@functools.cache
def _latest_release_statement() -> Select:
    """The newest stable release of each of the products ``ids``, in one statement (a
    window function works the same on SQLite >= 3.25 and PostgreSQL)."""
    rank = (
        func.row_number()
        .over(
            partition_by=Release.product_id,
            order_by=(Release.released_at.desc(), Release.id.desc()),
        )
        .label("rank")
    )
    ranked = (
        select(
            Release.product_id,
            Release.version,
            Release.file_name,
            Release.size,
            Release.sha256,
            Release.released_at,
            Release.channel,
            Release.changelog_html,
            rank,
        )
        .where(
            Release.product_id.in_(bindparam("ids", expanding=True)),
            Release.channel == "stable",
        )
        .subquery()
    )
    columns = [column for column in ranked.c if column.name != "rank"]
    return select(*columns).where(ranked.c.rank == 1)


@functools.cache
def _plan_statement() -> Select:
    """The active subscription plans of the products ``ids``."""
    return select(
        SubscriptionPlan.product_id, SubscriptionPlan.interval, SubscriptionPlan.interval_count
    ).where(
        SubscriptionPlan.product_id.in_(bindparam("ids", expanding=True)),
        SubscriptionPlan.active.is_(True),
    )


def load_cards(
    session: Session,
    products: Sequence,
    *,
    currency: str | None = None,
    public: bool = True,
) -> list[ProductCard]:
    """Prices, latest releases and subscription plans for ``products``: three statements,
    whatever their number.

    Public cards show prices in enabled currencies only (and only ``currency`` if given).
    """
    cards = {p.id: ProductCard(p) for p in products}
    if not cards:
        return []
    params = {"ids": list(cards), "currency": currency}
    # Plain column selects: run on the session's connection, without the ORM's
    # per-statement machinery (a third of an uncached product page).
    connection = session.connection()
    for price in connection.execute(_price_statement(public, currency is not None), params):
        cards[price.product_id].prices.append(price)
    for release in connection.execute(_latest_release_statement(), params):
        cards[release.product_id].latest_release = release
    for plan in connection.execute(_plan_statement(), params):
        cards[plan.product_id].subscription = CardPlan(plan.interval, plan.interval_count)
    return [cards[p.id] for p in products]


def render_description(source: str) -> str:
    """A description's HTML: its headings one level down, because the product page's
    own <h1> is the product's name (``#`` becomes <h2>, and so on, at most <h6>)."""
    return render_markdown(source, heading_shift=1)


def _check_currencies(session: Session, prices: list[dict]) -> None:
    codes = {p["currency"] for p in prices}
    if not codes:
        return
    known = set(session.scalars(select(Currency.code).where(Currency.code.in_(codes))))
    errors = {
        f"prices.{i}.currency": f"unknown currency {p['currency']}"
        for i, p in enumerate(prices)
        if p["currency"] not in known
    }
    if errors:
        raise ValidationFailed(
            errors, hints=["Add the currency first: POST /api/admin/currencies."]
        )


def _set_prices(session: Session, product: Product, prices: list[dict]) -> None:
    """Replace the product's prices, updating rows in place: deleting and re-inserting
    the same currency in one flush could trip the (product, currency) unique constraint."""
    wanted = {p["currency"]: p["amount"] for p in prices}
    for price in list(product.prices):
        if price.currency in wanted:
            price.amount = wanted.pop(price.currency)
        else:
            product.prices.remove(price)
    session.flush()
    for code, amount in wanted.items():
        product.prices.append(ProductPrice(currency=code, amount=amount))


LICENSING_FIELDS = (
    "licensed",
    "max_activations",
    # The most one order may buy (None: pricing.max_quantity's default).
    "max_quantity",
    "duration_days",
    "features",
    "upgrade_group",
    "tier",
)


def _apply_licensing(product: Product, licensing: dict) -> None:
    """``licensing``: any of LICENSING_FIELDS (the Product attributes of the same names)."""
    for name in LICENSING_FIELDS:
        if name in licensing:
            setattr(product, name, licensing[name])


class ProductHasNoRelease(Conflict):
    code = "product_has_no_release"
    message = (
        "A product cannot be published before it has a stable release: buyers get its "
        "release as a download (and a licensed product's key unlocks nothing without it)."
    )
    hints = (
        "Save it unpublished, upload a stable release (POST "
        "/api/admin/products/{slug}/releases), then publish it.",
    )


def has_stable_release(session: Session, product: Product) -> bool:
    if product.id is None:
        return False
    return bool(
        session.scalar(
            select(exists().where(Release.product_id == product.id, Release.channel == "stable"))
        )
    )


def require_release_to_publish(session: Session, product: Product) -> None:
    """Every product is delivered as its release's downloads (entitlements give the
    buyer the latest stable release; there is no other kind of delivery), and a licensed
    one's key activates that software: selling one with nothing to download takes money
    for nothing. Checked when a product becomes published, not on every save, so a shop
    whose products were published before this rule can still edit them."""
    if not has_stable_release(session, product):
        raise ProductHasNoRelease()


def active_buyers(session: Session, product: Product) -> tuple[int, int]:
    """(buyers, active license keys) of ``product``: the customers with an active
    entitlement or license, what the console warns about before unpublishing it."""
    users = union(
        select(Entitlement.user_id).where(
            Entitlement.product_id == product.id, Entitlement.status == "active"
        ),
        select(License.user_id).where(
            License.product_id == product.id,
            License.status == "active",
            License.user_id.is_not(None),
        ),
    ).subquery()
    buyers = session.scalar(select(func.count()).select_from(users)) or 0
    keys = session.scalar(
        select(func.count())
        .select_from(License)
        .where(License.product_id == product.id, License.status == "active")
    )
    return buyers, keys or 0


def create_product(session: Session, data: dict) -> Product:
    """Create a product from validated fields (``licensing`` holds LICENSING_FIELDS)."""
    if data["published"]:
        # A new product has no release yet.
        raise ProductHasNoRelease()
    ensure_slug_free(session, Product, data["slug"])
    _check_currencies(session, data["prices"])
    product = Product(
        slug=data["slug"],
        name=data["name"],
        summary=data["summary"],
        description=data["description"],
        description_html=render_description(data["description"]),
        published=data["published"],
        archived=False,
        licensed=False,
        version_scheme=data.get("version_scheme", "pep440"),
    )
    _apply_licensing(product, data["licensing"])
    product.prices = [
        ProductPrice(currency=p["currency"], amount=p["amount"]) for p in data["prices"]
    ]
    session.add(product)
    session.flush()
    return product


def update_product(session: Session, product: Product, changes: dict) -> Product:
    """Apply a validated partial update; Markdown is rendered again when it changes."""
    slug = changes.get("slug")
    if slug is not None and slug != product.slug:
        ensure_slug_free(session, Product, slug, owner=product)
        product.slug = slug
    if "prices" in changes:
        _check_currencies(session, changes["prices"])
        _set_prices(session, product, changes["prices"])
    publishing = changes.get("published") is True and not product.published
    for key in ("name", "summary", "published", "archived"):
        if key in changes:
            setattr(product, key, changes[key])
    if publishing and not product.archived:
        require_release_to_publish(session, product)
    if "description" in changes:
        product.description = changes["description"]
        product.description_html = render_description(changes["description"])
    _apply_licensing(product, changes.get("licensing", {}))
    scheme = changes.get("version_scheme")
    if scheme is not None and scheme != product.version_scheme:
        _switch_version_scheme(session, product, scheme)
    product.updated_at = utcnow()
    session.flush()
    return product


def _switch_version_scheme(session: Session, product: Product, scheme: str) -> None:
    """Compare the product's versions by ``scheme`` from now on: only if every release
    parses under it and no two become the same version (else 422, nothing changed)."""
    seen: dict = {}
    for version in session.scalars(select(Release.version).where(Release.product_id == product.id)):
        try:
            key = parse_version(scheme, version)
        except BadVersion as exc:
            raise ValidationFailed(
                {"versionScheme": f"release {exc}; keep the current scheme"}
            ) from None
        if key in seen:
            raise ValidationFailed(
                {"versionScheme": f"releases {seen[key]} and {version} would be the same version"}
            )
        seen[key] = version
    product.version_scheme = scheme


def product_is_referenced(session: Session, product: Product) -> bool:
    """Whether orders (or what orders made) or coupons point at ``product``: a coupon
    whose only product were deleted would be left naming none, which means every one."""
    return any(
        session.scalar(select(exists().where(model.product_id == product.id)))
        for model in (OrderItem, Entitlement, License, CouponProduct)
    )


def delete_product(session: Session, product: Product) -> tuple[bool, list[str]]:
    """Delete ``product``, or archive it when something refers to it.

    Returns ``(archived, release_paths)``: the storage paths of the deleted release files,
    for the caller to remove once the transaction has committed.
    """
    if not product_is_referenced(session, product):
        paths = [release.storage_path for release in product.releases]
        try:
            # A savepoint, so that a reference from a table this module does not know
            # about (a newer feature's) falls back to archiving instead of a 500.
            with session.begin_nested():
                session.delete(product)
                session.flush()
            return False, paths
        except IntegrityError:
            session.expire_all()
    product.archived = True
    product.published = False
    product.updated_at = utcnow()
    session.flush()
    return True, []


# --- the public catalogue on a pooled connection (see services.store.listing) -----------
#
# The database builds what is shown: for the API, each product's JSON body (what
# views.store.api.product_body writes, _body_sql), the page's one JSON array sent as it
# is; for the HTML pages, each card (the product's columns, then its prices and latest
# stable release as nested arrays, _cards_json), parsed once. A list page is one batch
# of two statements (the content version or the searched total, and the page) and a
# product by slug one statement, whatever the page's size. Why: a row costs SQLite a step
# with the GIL released, which the server's threads turned into hand-overs of the GIL,
# and Python turning rows into bodies held the GIL for a third of a list page, where the
# database's work runs beside the server's other threads (on SQLite, on the other core,
# once cmsshop.db.configure_sqlite_for_threads lets it). bench/uncached.py measures it.

PublicProduct = collections.namedtuple(
    "PublicProduct",
    "id slug name summary description description_html licensed max_activations "
    "max_quantity duration_days features version_scheme upgrade_group tier updated_at",
)
PublicPrice = collections.namedtuple("PublicPrice", "product_id currency amount symbol decimals")
PublicRelease = collections.namedtuple(
    "PublicRelease",
    "product_id version file_name size sha256 released_at channel changelog_html",
)
# What templates/macros/media.html picture() reads of a ProductImage.
CardImage = collections.namedtuple("CardImage", "alt variants")

_PUBLIC_COLUMNS = (
    "p.id, p.slug, p.name, p.summary, p.description, p.description_html, p.licensed, "
    "p.max_activations, p.max_quantity, p.duration_days, p.features, p.version_scheme, "
    "p.upgrade_group, p.tier, p.updated_at"
)
# Published and not archived; the order of ix_products_listing, whose leading columns
# these fix.
_PUBLIC = "p.published = TRUE AND p.archived = FALSE"
_PUBLIC_ORDER = "p.published, p.archived, p.name, p.id"
_ENABLED_CURRENCY = "SELECT enabled FROM currencies WHERE code = :currency"
_PRICE_COLUMNS = "pp.product_id, pp.currency, pp.amount, c.symbol, c.decimals"
_RELEASE_COLUMNS = (
    "r.product_id, r.version, r.file_name, r.size, r.sha256, r.released_at, r.channel, "
    "r.changelog_html"
)
# A product's public prices (enabled currencies; only ``:currency`` when asked) and its
# latest stable release, for the product ``p`` of the enclosing query.
_PRICES_OF_P = (
    "FROM product_prices pp JOIN currencies c ON c.code = pp.currency "
    "WHERE pp.product_id = p.id AND c.enabled = TRUE"
)
_CURRENCY_ONLY = " AND pp.currency = :currency"
_LATEST_RELEASE_OF_P = (
    "FROM releases r WHERE r.product_id = p.id AND r.channel = 'stable' "
    "ORDER BY r.released_at DESC, r.id DESC LIMIT 1"
)
# The active subscription plan of the product ``p`` (at most one: unique per product).
_PLAN_OF_P = "FROM subscription_plans sp WHERE sp.product_id = p.id AND sp.active = TRUE"


def _cards_json(dialect: str, products: str, currency: bool) -> str:
    """One JSON array of cards (NULL or ``[]`` for none) of the page ``products`` (a SELECT
    of ``_PUBLIC_COLUMNS`` FROM products p): each card the product's columns, then its
    prices (rows of ``_PRICE_COLUMNS``) and its latest stable release (or null), in the
    products' name order. The HTML pages' cards (:func:`_card`).

    On SQLite the prices come back in any order (:func:`_card` sorts them: a window per
    product to order them costs SQLite more than the sort costs Python)."""
    sqlite = dialect == "sqlite"
    array = "json_array({})" if sqlite else "json_build_array({})"
    nested = "json({})" if sqlite else "{}"  # SQLite: JSON text read back as JSON
    price_rows = array.format(_PRICE_COLUMNS)
    prices_from = _PRICES_OF_P + (_CURRENCY_ONLY if currency else "")
    if sqlite:
        prices = f"SELECT json_group_array({price_rows}) {prices_from}"
    else:
        prices = ordered_json_array(dialect, price_rows, "pp.currency", prices_from)
    release = f"SELECT {array.format(_RELEASE_COLUMNS)} {_LATEST_RELEASE_OF_P}"
    # The first picture, as media.first_images chooses it.
    image = (
        f"SELECT {array.format('i.alt, ' + nested.format('i.variants'))} FROM product_images i "  # noqa: S608 - constant SQL
        "WHERE i.product_id = p.id ORDER BY i.position, i.id LIMIT 1"
    )
    plan = f"SELECT {array.format('sp.interval, sp.interval_count')} {_PLAN_OF_P}"
    card = array.format(
        f"{_PUBLIC_COLUMNS}, {nested.format(f'({prices})')}, {nested.format(f'({release})')}, "
        f"{nested.format(f'({image})')}, {nested.format(f'({plan})')}"
    )
    # The outer select reads the page's products only: its subqueries run once a card,
    # never for the rows an OFFSET skips.
    in_order = ordered_json_array(dialect, card, "p.name, p.id", f"FROM ({products}) p", page=True)
    return json_select_text(dialect, in_order)


# The public product body (views.store.api.product_body), built by the database: the API
# list and a product by slug send its text as it is. A test compares it with
# product_body's, field for field, on both databases.
_POWERS_OF_TEN = (
    "CASE c.decimals " + " ".join(f"WHEN {n} THEN {10**n}" for n in range(1, 5)) + " ELSE 1 END"
)  # currencies.MAX_DECIMALS is 4


def _formatted_price(dialect: str) -> str:
    """currencies.format_amount(pp.amount, c.symbol, c.decimals), in SQL."""
    power = _POWERS_OF_TEN
    cut = "CAST({} AS text)" if dialect == "postgresql" else "{}"
    fraction = (
        f"lpad({cut.format(f'abs(pp.amount) % ({power})')}, c.decimals, '0')"
        if dialect == "postgresql"
        else f"substr('0000' || (abs(pp.amount) % ({power})), -c.decimals)"
    )
    whole = cut.format(f"(abs(pp.amount) / ({power}))")  # SQLite's || binds before /
    return (
        "CASE WHEN pp.amount < 0 THEN '-' ELSE '' END || c.symbol || "
        f"CASE WHEN c.decimals <= 0 THEN {cut.format('abs(pp.amount)')} "
        f"ELSE {whole} || '.' || {fraction} END"
    )


def _body_sql(dialect: str, currency: bool) -> str:
    """SQL of the body of the product ``p`` (a row of ``_PUBLIC_COLUMNS``)."""
    sqlite = dialect == "sqlite"
    obj = "json_object({})" if sqlite else "json_build_object({})"
    nested = "json({})" if sqlite else "{}"
    empty = "'[]'" if sqlite else "CAST('[]' AS json)"
    boolean = "json(CASE WHEN {} THEN 'true' ELSE 'false' END)" if sqlite else "{}"
    price = obj.format(
        f"'currency', pp.currency, 'amount', pp.amount, 'formatted', {_formatted_price(dialect)}"
    )
    prices_from = _PRICES_OF_P + (_CURRENCY_ONLY if currency else "")
    prices = ordered_json_array(dialect, price, "pp.currency", prices_from)
    release = obj.format(
        "'version', r.version, 'fileName', r.file_name, 'size', r.size, 'sha256', r.sha256, "
        f"'releasedAt', {utc_seconds_sql(dialect, 'r.released_at')}, 'channel', r.channel, "
        "'changelogHtml', r.changelog_html"
    )
    licensing = obj.format(
        f"'licensed', {boolean.format('p.licensed')}, 'maxActivations', p.max_activations, "
        "'maxQuantity', coalesce(p.max_quantity, CASE WHEN p.licensed "
        f"THEN {DEFAULT_MAX_QUANTITY} ELSE {UNLICENSED_MAX_QUANTITY} END), "
        f"'durationDays', p.duration_days, 'features', {nested.format('p.features')}, "
        "'upgradeGroup', p.upgrade_group, 'tier', p.tier"
    )
    # Sold as a subscription: its active plan (null: sold once).
    plan = obj.format("'interval', sp.interval, 'intervalCount', sp.interval_count")
    return obj.format(
        "'slug', p.slug, 'name', p.name, 'summary', p.summary, 'description', p.description, "
        f"'descriptionHtml', p.description_html, "
        f"'prices', {nested.format(f'coalesce(({prices}), {empty})')}, "
        f"'subscription', {nested.format(f'(SELECT {plan} {_PLAN_OF_P})')}, "
        f"'licensing', {licensing}, 'versionScheme', p.version_scheme, "
        f"'latestRelease', {nested.format(f'(SELECT {release} {_LATEST_RELEASE_OF_P})')}, "
        f"'updatedAt', {utc_seconds_sql(dialect, 'p.updated_at')}"
    )


def _bodies_json(dialect: str, products: str, currency: bool) -> str:
    """One JSON array (NULL or ``[]`` for none) of the bodies of ``products`` (a page,
    as for :func:`_cards_json`), in name order."""
    body = _body_sql(dialect, currency)
    in_order = ordered_json_array(dialect, body, "p.name, p.id", f"FROM ({products}) p", page=True)
    return json_select_text(dialect, in_order)


def _listing(searched: bool, currency: bool, bodies: bool) -> HotListing:
    """A page of cards (``bodies``: of API bodies, as JSON text) and its total."""
    where = {d: _PUBLIC for d in DIALECTS}
    if searched:
        where = {d: f"{_PUBLIC} AND {search_sql(d, 'p.name', 'p.summary')}" for d in DIALECTS}
    build = _bodies_json if bodies else _cards_json
    return HotListing(
        "products" + (" searched" if searched else ""),
        {d: f"SELECT count(*) FROM products p WHERE {where[d]}" for d in DIALECTS},  # noqa: S608 - constant SQL
        {
            d: HotStatement(
                build(
                    d,
                    f"SELECT {_PUBLIC_COLUMNS} FROM products p WHERE {where[d]} "  # noqa: S608 - constant SQL
                    f"ORDER BY {_PUBLIC_ORDER} LIMIT :limit OFFSET :offset",
                    currency,
                ),
                # One JSON text: the cards' parsed, or the API's bodies sent as they are.
                json_text=not bodies,
                utf8=bodies,
            )
            for d in DIALECTS
        },
        searched,
    )


_BY_SLUG = f"SELECT {_PUBLIC_COLUMNS} FROM products p WHERE p.slug = :slug AND {_PUBLIC}"  # noqa: S608 - constant SQL


def _slug_batch(currency: bool) -> dict[str, HotBatch]:
    """The API body (JSON text) of the public product ``:slug``: one statement."""
    return {
        # One row at most (the slug is unique; a utf8 statement is scalar), read with one
        # step on SQLite
        d: HotBatch(
            HotStatement(
                f"SELECT {json_text(d, _body_sql(d, currency))} FROM ({_BY_SLUG}) p",  # noqa: S608 - constant SQL
                utf8=True,  # the API's body, sent as it is
            ),
            generic_plans=True,  # as every read of a thread's connection (HotListing)
        )
        for d in DIALECTS
    }


_HOT = {
    "listing": {
        (searched, currency, bodies): _listing(searched, currency, bodies)
        for searched in (False, True)
        for currency in (False, True)
        for bodies in (False, True)
    },
    "slug": {currency: _slug_batch(currency) for currency in (False, True)},
    "currency": HotBatch(_ENABLED_CURRENCY, generic_plans=True),
}


_BY_CURRENCY = operator.itemgetter(1)


def _card(row: list, sqlite: bool) -> ProductCard:
    """A card from its JSON array (see :func:`_cards_json`)."""
    *product, prices, release, image, plan = row
    prices = prices or []  # no price: null
    if sqlite:
        product[6] = bool(product[6])  # licensed
        prices.sort(key=_BY_CURRENCY)  # (see _cards_json)
    if isinstance(product[10], str):  # features: SQLite's text
        product[10] = orjson.loads(product[10])
    product[14] = from_db_time(product[14])
    if release is not None:
        release[5] = from_db_time(release[5])
        release = PublicRelease(*release)
    if image is not None:
        image = CardImage(*image)
    prices = [PublicPrice(*p) for p in prices]
    plan = CardPlan(*plan) if plan is not None else None
    return ProductCard(PublicProduct(*product), prices, release, image, plan)


def _require_enabled(conn: RawReads, currency: str) -> None:
    (rows,) = _HOT["currency"].run(conn, {"currency": currency})
    if not rows or not rows[0][0]:
        raise currencies.currency_not_offered(currency)


def public_products(
    engine, request: PageRequest, *, q: str | None = None, currency: str | None = None
) -> Page[ProductCard]:
    """A page of published, not archived products by name, with their prices (enabled
    currencies; only ``currency`` if given: 422 unless it is enabled) and latest stable
    releases, read as :func:`list_products` does without a session: one batch (the page
    with its total or the content version; see :func:`_cards_json`)."""
    page, sqlite = _public_page(engine, request, q, currency, bodies=False)
    return dataclasses.replace(page, items=[_card(row, sqlite) for row in page.items])


def public_product_bodies(
    engine, request: PageRequest, *, q: str | None = None, currency: str | None = None
) -> tuple[Page, bytes]:
    """:func:`public_products` as the API writes it: the page (without items) and its
    items' bodies, one JSON array the database built (views.store.api.product_body's)."""
    page, _ = _public_page(engine, request, q, currency, bodies=True)
    text = page.items[0][0] if page.items else None
    return dataclasses.replace(page, items=[]), text or b"[]"


def _public_page(engine, request: PageRequest, q, currency, *, bodies: bool) -> tuple[Page, bool]:
    with raw_reads(engine) as conn:
        if currency is not None:
            _require_enabled(conn, currency)
        params = {"pattern": like_pattern(q)} if q else {}
        if currency is not None:
            params["currency"] = currency
        listing = _HOT["listing"][bool(q), currency is not None, bodies]
        return fetch_hot_listing(conn, listing, request, params), conn.dialect_name == "sqlite"


def public_product_body(engine, slug: str, *, currency: str | None = None) -> bytes:
    """The API body of the published, not archived product ``slug`` (prices as in
    :func:`public_products`), written by the database, or 404 ``product_not_found``: one
    statement."""
    found = []
    with raw_reads(engine) as conn:
        if currency is not None:
            _require_enabled(conn, currency)
        if is_slug(slug):
            batch = _HOT["slug"][currency is not None][conn.dialect_name]
            (found,) = batch.run(conn, {"slug": slug, "currency": currency})
    if not found:
        raise NotFound(f"There is no product {slug!r}.", code="product_not_found")
    return found[0][0]
