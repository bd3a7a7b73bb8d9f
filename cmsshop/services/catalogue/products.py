"""Catalogue rules: slugs, text, currencies and prices, products and articles.

Listing is built so that its cost does not grow with the catalogue: one statement counts,
one fetches the page, and one each fetches the prices and latest releases of *that page*
(never one statement per product). Lists read plain rows of the columns they show rather
than ORM objects: a row has no relationship to lazy-load (so no accidental N+1), and it
costs a fraction of an ORM instance to build.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select, bindparam, exists, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cmsshop.errors import ApiError, Conflict, NotFound, ValidationFailed
from cmsshop.models import (
    Article,
    Currency,
    Entitlement,
    License,
    OrderItem,
    Product,
    ProductPrice,
    Release,
)
from cmsshop.services.docs.markdown import render_markdown
from cmsshop.util import utcnow

# --- text rules --------------------------------------------------------------------------

SLUG = re.compile(r"^[a-z0-9-]{1,100}\Z")
CURRENCY_CODE = re.compile(r"^[A-Z]{3}\Z")
# Single-line text: no C0 controls, no DEL. Multi-line text may hold tab, LF and CR.
SINGLE_LINE_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")
MULTI_LINE_FORBIDDEN = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
# The same rules for the OpenAPI document (ECMA 262 regexes).
SINGLE_LINE_PATTERN = "^[^\\x00-\\x1f\\x7f]*$"
MULTI_LINE_PATTERN = "^[^\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f]*$"
SLUG_PATTERN = "^[a-z0-9-]{1,100}$"

MAX_SEARCH_LENGTH = 200
MAX_DECIMALS = 4


def is_slug(value: str) -> bool:
    return isinstance(value, str) and SLUG.match(value) is not None


def text_problem(value: str, multiline: bool = False) -> str | None:
    """Why ``value`` cannot be stored as text, or None.

    NUL cannot be stored in a PostgreSQL text column and a lone surrogate cannot be
    encoded as UTF-8 on any backend; both would otherwise surface as a 500.
    """
    forbidden = MULTI_LINE_FORBIDDEN if multiline else SINGLE_LINE_FORBIDDEN
    if forbidden.search(value):
        return "must not contain control characters" + (
            " other than tab and line breaks" if multiline else ""
        )
    return None


def parse_search(raw: str | None) -> str | None:
    """The ``q`` of a list: trimmed, at most 200 characters, no control characters."""
    if raw is None:
        return None
    problem = text_problem(raw)
    if problem or len(raw) > MAX_SEARCH_LENGTH:
        raise ValidationFailed({"q": problem or f"at most {MAX_SEARCH_LENGTH} characters"})
    raw = raw.strip()
    return raw or None


def parse_category(raw: str | None) -> str | None:
    if raw is None:
        return None
    if not is_slug(raw):
        raise ValidationFailed({"category": "letters a-z, digits and '-', 1-100 characters"})
    return raw


def parse_currency_code(raw: str | None, name: str = "currency") -> str | None:
    """A three-letter code (any case) upper-cased, or a 422."""
    if raw is None:
        return None
    if len(raw) != 3 or not raw.isascii() or not raw.isalpha():
        raise ValidationFailed({name: "a three-letter ISO 4217 code, e.g. EUR"})
    return raw.upper()


def _search(columns: Sequence) -> list:
    """Case-insensitive substring match of any column against the ``pattern`` parameter
    (see :func:`like_pattern`)."""
    pattern = bindparam("pattern")
    return [or_(*(column.ilike(pattern, escape="/") for column in columns))]


def like_pattern(q: str) -> str:
    """``q`` as a LIKE pattern: a % or _ typed by the visitor matches itself."""
    escaped = q.replace("/", "//").replace("%", "/%").replace("_", "/_")
    return f"%{escaped}%"


def _paging(total: int, page: int, per_page: int) -> dict | None:
    """LIMIT/OFFSET parameters, or None when the page is past the end (a huge page number
    must not reach the database as an out-of-range OFFSET)."""
    offset = (page - 1) * per_page
    if offset >= total:
        return None
    return {"limit": per_page, "offset": offset}


# --- money -------------------------------------------------------------------------------


def format_amount(amount: int, symbol: str, decimals: int) -> str:
    """``4900, "€", 2`` -> ``"€49.00"``; integer arithmetic only, never a float."""
    sign = "-" if amount < 0 else ""
    if decimals <= 0:
        return f"{sign}{symbol}{abs(amount)}"
    whole, fraction = divmod(abs(amount), 10**decimals)
    return f"{sign}{symbol}{whole}.{fraction:0{decimals}d}"


# --- currencies --------------------------------------------------------------------------


def list_currencies(session: Session, *, enabled_only: bool) -> list[Currency]:
    stmt = select(Currency).order_by(Currency.is_default.desc(), Currency.code)
    if enabled_only:
        stmt = stmt.where(Currency.enabled.is_(True))
    return list(session.scalars(stmt))


def require_enabled_currency(session: Session, code: str) -> Currency:
    currency = session.get(Currency, code)
    if currency is None or not currency.enabled:
        raise ValidationFailed(
            {"currency": f"{code} is not a currency of this shop"},
            hints=["GET /api/store/currencies lists the currencies on offer."],
        )
    return currency


def find_currency(session: Session, code: str) -> Currency:
    currency = session.get(Currency, code) if CURRENCY_CODE.match(code) else None
    if currency is None:
        raise NotFound(f"There is no currency {code!r}.", code="currency_not_found")
    return currency


def lock_currencies(session: Session) -> None:
    """Lock every currency row, in code order (so two admins cannot deadlock).

    The table is tiny and changes rarely. Serialising its changes means a check such as
    "is this the default?" and the "unset the old default" UPDATE see what the previous
    change committed, instead of racing it into the unique index (PostgreSQL; SQLite
    serialises writers anyway and ignores FOR UPDATE).
    """
    session.execute(select(Currency.code).order_by(Currency.code).with_for_update())


def _currency_is_default_error(code: str, action: str) -> ApiError:
    return Conflict(
        f"{code} is the default currency and cannot be {action}.",
        code="currency_is_default",
        title="Default currency",
        hints=["Make another enabled currency the default first (PATCH it with default: true)."],
    )


def _make_default(session: Session, currency: Currency) -> None:
    """Unset the old default with one UPDATE before setting the new one: the partial
    unique index allows one default at a time, and the unit of work would otherwise be
    free to order the two row updates either way."""
    session.execute(
        update(Currency)
        .where(Currency.is_default.is_(True), Currency.code != currency.code)
        .values(is_default=False)
        .execution_options(synchronize_session="fetch")
    )
    currency.is_default = True


def create_currency(session: Session, data: dict) -> Currency:
    if data["default"]:
        lock_currencies(session)
    if session.get(Currency, data["code"]) is not None:
        raise Conflict(
            f"The currency {data['code']} exists already.",
            code="currency_exists",
            title="Currency exists",
            hints=[f"PATCH /api/admin/currencies/{data['code']} to change it."],
        )
    if data["default"] and not data["enabled"]:
        raise Conflict(
            "The default currency must be enabled.",
            code="currency_disabled",
            title="Currency disabled",
            hints=["Send enabled: true with default: true."],
        )
    currency = Currency(
        code=data["code"],
        name=data["name"],
        symbol=data["symbol"],
        decimals=data["decimals"],
        enabled=data["enabled"],
        is_default=False,
    )
    session.add(currency)
    session.flush()
    if data["default"]:
        _make_default(session, currency)
        session.flush()
    return currency


def update_currency(session: Session, code: str, changes: dict) -> Currency:
    """Apply a validated PATCH to the currency ``code`` (404 if there is none)."""
    if CURRENCY_CODE.match(code):
        lock_currencies(session)
    currency = find_currency(session, code)
    session.refresh(currency)  # the committed state, now that it is locked
    enabled = changes.get("enabled", currency.enabled)
    default = changes.get("default", currency.is_default)
    if currency.is_default and changes.get("enabled") is False:
        raise _currency_is_default_error(currency.code, "disabled")
    if currency.is_default and changes.get("default") is False:
        raise _currency_is_default_error(currency.code, "unset")
    if default and not enabled:
        raise Conflict(
            f"{currency.code} is disabled; only an enabled currency can be the default.",
            code="currency_disabled",
            title="Currency disabled",
            hints=["Send enabled: true together with default: true."],
        )
    for key in ("name", "symbol"):
        if key in changes:
            setattr(currency, key, changes[key])
    currency.enabled = enabled
    if default and not currency.is_default:
        _make_default(session, currency)
    session.flush()
    return currency


# --- products ----------------------------------------------------------------------------


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
    Product.duration_days,
    Product.created_at,
    Product.updated_at,
)


@dataclass
class ProductCard:
    """A product with what its JSON needs, loaded in bulk for a whole page.

    ``product`` is a Product or a row of CARD_COLUMNS; ``prices`` are rows of
    (product_id, currency, amount, symbol, decimals); ``latest_release`` is a row of
    (product_id, version, file_name, size, sha256, released_at) or None.
    """

    product: Any
    prices: list = field(default_factory=list)
    latest_release: Any = None


# Read statements are built once per shape and reused with parameters: building a
# SQLAlchemy statement costs more than running these small indexed queries.


@functools.cache
def _product_statements(public: bool, search: bool) -> tuple[Select, Select]:
    """(count, page) statements; parameters ``pattern``, ``limit``, ``offset``."""
    filters = _search((Product.name, Product.summary)) if search else []
    if public:
        filters += [Product.published.is_(True), Product.archived.is_(False)]
    # Public: the order of ix_products_listing, whose leading columns the filters fix.
    order = (
        (Product.published, Product.archived, Product.name, Product.id)
        if public
        else (Product.name, Product.id)
    )
    count = select(func.count()).select_from(Product).where(*filters)
    page = (
        select(*CARD_COLUMNS)
        .where(*filters)
        .order_by(*order)
        .limit(bindparam("limit"))
        .offset(bindparam("offset"))
    )
    return count, page


@functools.cache
def _find_product_statement(public: bool) -> Select:
    stmt = select(Product).where(Product.slug == bindparam("slug"))
    if public:
        stmt = stmt.where(Product.published.is_(True), Product.archived.is_(False))
    return stmt


def list_products(
    session: Session,
    *,
    page: int,
    per_page: int,
    q: str | None = None,
    currency: str | None = None,
    public: bool = True,
) -> tuple[list[ProductCard], int]:
    """A page of products (published and not archived when ``public``) and the total."""
    count_stmt, page_stmt = _product_statements(public, bool(q))
    params = {"pattern": like_pattern(q)} if q else {}
    total = session.scalar(count_stmt, params) or 0
    paging = _paging(total, page, per_page)
    if paging is None:
        return [], total
    products = session.execute(page_stmt, {**params, **paging}).all()
    return load_cards(session, products, currency=currency, public=public), total


def find_product(session: Session, slug: str, *, public: bool) -> Product:
    product = None
    if is_slug(slug):
        product = session.scalar(_find_product_statement(public), {"slug": slug})
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
    """The newest release of each of the products ``ids``, in one statement (a window
    function works the same on SQLite >= 3.25 and PostgreSQL)."""
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
            rank,
        )
        .where(Release.product_id.in_(bindparam("ids", expanding=True)))
        .subquery()
    )
    columns = [column for column in ranked.c if column.name != "rank"]
    return select(*columns).where(ranked.c.rank == 1)


def load_cards(
    session: Session,
    products: Sequence,
    *,
    currency: str | None = None,
    public: bool = True,
) -> list[ProductCard]:
    """Prices and latest releases for ``products``: two statements, whatever their number.

    Public cards show prices in enabled currencies only (and only ``currency`` if given).
    """
    cards = {p.id: ProductCard(p) for p in products}
    if not cards:
        return []
    params = {"ids": list(cards), "currency": currency}
    for price in session.execute(_price_statement(public, currency is not None), params):
        cards[price.product_id].prices.append(price)
    for release in session.execute(_latest_release_statement(), params):
        cards[release.product_id].latest_release = release
    return [cards[p.id] for p in products]


def _slug_taken(kind: str, slug: str) -> Conflict:
    return Conflict(
        f"Another {kind} uses the slug {slug!r}.",
        code="slug_taken",
        title="Slug taken",
        hints=["Choose another slug; slugs are unique."],
    )


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


def _apply_licensing(product: Product, licensing: dict) -> None:
    if "licensed" in licensing:
        product.licensed = licensing["licensed"]
    if "maxActivations" in licensing:
        product.max_activations = licensing["maxActivations"]
    if "durationDays" in licensing:
        product.duration_days = licensing["durationDays"]


def create_product(session: Session, data: dict) -> Product:
    """Create a product from a validated body (public field names plus ``published``)."""
    if session.scalar(select(Product.id).where(Product.slug == data["slug"])) is not None:
        raise _slug_taken("product", data["slug"])
    _check_currencies(session, data["prices"])
    product = Product(
        slug=data["slug"],
        name=data["name"],
        summary=data["summary"],
        description=data["description"],
        description_html=render_markdown(data["description"]),
        published=data["published"],
        archived=False,
        licensed=False,
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
        clash = session.scalar(
            select(Product.id).where(Product.slug == slug, Product.id != product.id)
        )
        if clash is not None:
            raise _slug_taken("product", slug)
        product.slug = slug
    if "prices" in changes:
        _check_currencies(session, changes["prices"])
        _set_prices(session, product, changes["prices"])
    for key in ("name", "summary", "published", "archived"):
        if key in changes:
            setattr(product, key, changes[key])
    if "description" in changes:
        product.description = changes["description"]
        product.description_html = render_markdown(changes["description"])
    _apply_licensing(product, changes.get("licensing", {}))
    product.updated_at = utcnow()
    session.flush()
    return product


def product_is_referenced(session: Session, product: Product) -> bool:
    """Whether orders (or what orders made) point at ``product``."""
    return any(
        session.scalar(select(exists().where(model.product_id == product.id)))
        for model in (OrderItem, Entitlement, License)
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


# --- articles ----------------------------------------------------------------------------


# What an article's JSON shows; a row of these reads like an Article (row.slug, ...).
ARTICLE_COLUMNS = (
    Article.id,
    Article.slug,
    Article.title,
    Article.summary,
    Article.category,
    Article.body,
    Article.body_html,
    Article.published,
    Article.published_at,
    Article.created_at,
    Article.updated_at,
)


@functools.cache
def _article_statements(public: bool, search: bool, by_category: bool) -> tuple[Select, Select]:
    """(count, page) statements; parameters ``pattern``, ``category``, ``limit``, ``offset``."""
    filters = _search((Article.title, Article.summary)) if search else []
    if by_category:
        filters.append(Article.category == bindparam("category"))
    if public:
        filters.append(Article.published.is_(True))
    order = (
        (Article.published, Article.published_at.desc(), Article.id.desc())
        if public
        else (Article.title, Article.id)
    )
    count = select(func.count()).select_from(Article).where(*filters)
    page = (
        select(*ARTICLE_COLUMNS)
        .where(*filters)
        .order_by(*order)
        .limit(bindparam("limit"))
        .offset(bindparam("offset"))
    )
    return count, page


@functools.cache
def _find_article_statement(public: bool) -> Select:
    stmt = select(Article).where(Article.slug == bindparam("slug"))
    if public:
        stmt = stmt.where(Article.published.is_(True))
    return stmt


def list_articles(
    session: Session,
    *,
    page: int,
    per_page: int,
    q: str | None = None,
    category: str | None = None,
    public: bool = True,
) -> tuple[list, int]:
    """Published articles newest first (all articles by title for admins), and the total.

    The articles are rows of ARTICLE_COLUMNS."""
    count_stmt, page_stmt = _article_statements(public, bool(q), category is not None)
    params = {"pattern": like_pattern(q) if q else None, "category": category}
    params = {key: value for key, value in params.items() if value is not None}
    total = session.scalar(count_stmt, params) or 0
    paging = _paging(total, page, per_page)
    if paging is None:
        return [], total
    return session.execute(page_stmt, {**params, **paging}).all(), total


def find_article(session: Session, slug: str, *, public: bool) -> Article:
    article = None
    if is_slug(slug):
        article = session.scalar(_find_article_statement(public), {"slug": slug})
    if article is None:
        raise NotFound(f"There is no article {slug!r}.", code="article_not_found")
    return article


def _publish(article: Article, published: bool) -> None:
    article.published = published
    if published and article.published_at is None:
        # Kept when an article is unpublished and published again.
        article.published_at = utcnow()


def create_article(session: Session, data: dict) -> Article:
    if session.scalar(select(Article.id).where(Article.slug == data["slug"])) is not None:
        raise _slug_taken("article", data["slug"])
    article = Article(
        slug=data["slug"],
        title=data["title"],
        summary=data["summary"],
        category=data["category"],
        body=data["body"],
        body_html=render_markdown(data["body"]),
        published=False,
    )
    _publish(article, data["published"])
    session.add(article)
    session.flush()
    return article


def update_article(session: Session, article: Article, changes: dict) -> Article:
    slug = changes.get("slug")
    if slug is not None and slug != article.slug:
        clash = session.scalar(
            select(Article.id).where(Article.slug == slug, Article.id != article.id)
        )
        if clash is not None:
            raise _slug_taken("article", slug)
        article.slug = slug
    for key in ("title", "summary", "category"):
        if key in changes:
            setattr(article, key, changes[key])
    if "body" in changes:
        article.body = changes["body"]
        article.body_html = render_markdown(changes["body"])
    if "published" in changes:
        _publish(article, changes["published"])
    article.updated_at = utcnow()
    session.flush()
    return article


def delete_article(session: Session, article: Article) -> None:
    session.delete(article)
    session.flush()
