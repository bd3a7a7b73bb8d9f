"""Catalogue content: currencies, products with prices and release files, articles."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Computed,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from cmsshop.models.meta import Base, UTCDateTime, one_of
from cmsshop.util import utcnow


def FOLDED(column: str) -> Computed:  # noqa: N802 - reads as the column's kind
    """A column's lower() kept beside it, for searches: PostgreSQL's ILIKE lowers both
    sides of every comparison (a search lowered every name it scanned: three quarters
    of its time), so a search compares these with LIKE against lower(pattern) -- the
    same answer. Stored on PostgreSQL; on SQLite, whose LIKE folds ASCII case as its
    lower() does, computed when read (migration 0029 adds it there as VIRTUAL)."""
    return Computed(f"lower({column})", persisted=True)


class Currency(Base):
    __tablename__ = "currencies"
    __table_args__ = (
        # At most one default currency, enforced by the database: two admins switching the
        # default at once cannot both win (the loser's IntegrityError is retried and then
        # sees the winner's row; see cmsshop.db).
        Index(
            "uq_currencies_is_default",
            "is_default",
            unique=True,
            sqlite_where=text("is_default"),
            postgresql_where=text("is_default"),
        ),
    )

    code: Mapped[str] = mapped_column(String(3), primary_key=True)  # ISO 4217
    name: Mapped[str] = mapped_column(String(100))
    symbol: Mapped[str] = mapped_column(String(8))
    decimals: Mapped[int] = mapped_column(Integer, default=2)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    is_default: Mapped[bool] = mapped_column(Boolean, default=False)


# How a product's release versions compare (services/store/versions.py).
VERSION_SCHEMES = ("pep440", "semver")


class Product(Base):
    __tablename__ = "products"
    __table_args__ = (
        CheckConstraint("max_activations IS NULL OR max_activations >= 0", name="max_activations"),
        CheckConstraint("duration_days IS NULL OR duration_days > 0", name="duration_days"),
        CheckConstraint("max_quantity IS NULL OR max_quantity >= 1", name="max_quantity"),
        CheckConstraint(one_of("version_scheme", VERSION_SCHEMES), name="version_scheme"),
        # The public list walks this index in order and stops after one page, so a page
        # costs the same whatever the size of the catalogue.
        Index("ix_products_listing", "published", "archived", "name", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    slug: Mapped[str] = mapped_column(String(100), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    summary: Mapped[str] = mapped_column(String(500), default="")
    # What a search matches (services.store.listing.search_sql): see FOLDED.
    name_folded: Mapped[str] = mapped_column(String(200), FOLDED("name"), deferred=True)
    summary_folded: Mapped[str] = mapped_column(String(500), FOLDED("summary"), deferred=True)
    description: Mapped[str] = mapped_column(Text, default="")
    # Rendered and sanitised on write, never accepted from a client.
    description_html: Mapped[str] = mapped_column(Text, default="")
    published: Mapped[bool] = mapped_column(Boolean, default=False, index=True)
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    licensed: Mapped[bool] = mapped_column(Boolean, default=False)
    max_activations: Mapped[int | None] = mapped_column(Integer)
    duration_days: Mapped[int | None] = mapped_column(Integer)  # None = perpetual
    # The most one order may buy (seats packs of a licensed product); None: the default,
    # services/store/products.py DEFAULT_MAX_QUANTITY.
    max_quantity: Mapped[int | None] = mapped_column(Integer)
    # Upgrades: a license may move to a product of the same group with a higher tier.
    upgrade_group: Mapped[str | None] = mapped_column(String(50))
    tier: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # How its release versions compare (services/store/versions.py).
    version_scheme: Mapped[str] = mapped_column(
        String(10), default="pep440", server_default="pep440"
    )
    # Feature flags a license of this product gets when issued (services/licensing/features.py).
    features: Mapped[list[str]] = mapped_column(JSON, default=list, server_default="[]")
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    prices: Mapped[list[ProductPrice]] = relationship(
        back_populates="product", cascade="all, delete-orphan", order_by="ProductPrice.currency"
    )
    releases: Mapped[list[Release]] = relationship(
        back_populates="product", cascade="all, delete-orphan", order_by="Release.released_at"
    )
    images: Mapped[list[ProductImage]] = relationship(
        back_populates="product",
        cascade="all, delete-orphan",
        order_by="(ProductImage.position, ProductImage.id)",
    )


class ProductPrice(Base):
    __tablename__ = "product_prices"
    __table_args__ = (
        UniqueConstraint("product_id", "currency"),
        CheckConstraint("amount >= 0", name="amount"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    product_id: Mapped[int] = mapped_column(ForeignKey("products.id", ondelete="CASCADE"))
    currency: Mapped[str] = mapped_column(ForeignKey("currencies.code"))
    amount: Mapped[int] = mapped_column(BigInteger)  # minor units, never a float

    product: Mapped[Product] = relationship(back_populates="prices")


# A release's channel: the store, downloads and the "latest release" show `stable`
# releases; `beta` ones are for runtimes that ask for them.
RELEASE_CHANNELS = ("stable", "beta")


class Release(Base):
    __tablename__ = "releases"
    __table_args__ = (
        UniqueConstraint("product_id", "version"),
        CheckConstraint(one_of("channel", RELEASE_CHANNELS), name="channel"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    product_id: Mapped[int] = mapped_column(
        ForeignKey("products.id", ondelete="CASCADE"), index=True
    )
    version: Mapped[str] = mapped_column(String(50))
    file_name: Mapped[str] = mapped_column(String(255))  # sanitised display name
    storage_path: Mapped[str] = mapped_column(String(512))  # relative to the storage dir
    size: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    released_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    channel: Mapped[str] = mapped_column(String(20), default="stable", server_default="stable")
    # Markdown source and its rendered, sanitised HTML (services/docs/markdown.py).
    changelog: Mapped[str] = mapped_column(Text, default="", server_default="")
    changelog_html: Mapped[str] = mapped_column(Text, default="", server_default="")
    # Minimum requirements, when set: the host platform's version (e.g. WordPress 6.0),
    # PHP's, and the platform version the release was tested up to (update checks show them).
    requires: Mapped[str | None] = mapped_column(String(20))
    requires_php: Mapped[str | None] = mapped_column(String(20))
    tested: Mapped[str | None] = mapped_column(String(20))

    product: Mapped[Product] = relationship(back_populates="releases")


class ProductImage(Base):
    """A picture of a product, in the order the seller chose (the first is the product's
    card and sharing image). The upload is checked and resized once (services/store/media.py);
    ``variants`` names the stored renditions: ``{"card": {"webp": key, "jpeg": key,
    "width": w, "height": h}, "page": {...}, "og": {...}}``, each key a ``media_files`` row."""

    __tablename__ = "product_images"

    id: Mapped[int] = mapped_column(primary_key=True)
    product_id: Mapped[int] = mapped_column(
        ForeignKey("products.id", ondelete="CASCADE"), index=True
    )
    position: Mapped[int] = mapped_column(Integer, default=0)
    alt: Mapped[str] = mapped_column(String(300), default="")
    # SHA-256 of the uploaded bytes: the same file uploaded twice is one image.
    source_sha256: Mapped[str] = mapped_column(String(64))
    width: Mapped[int] = mapped_column(Integer)
    height: Mapped[int] = mapped_column(Integer)
    variants: Mapped[dict] = mapped_column(JSON, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)

    product: Mapped[Product] = relationship(back_populates="images")


class MediaFile(Base):
    """One stored rendition of an image, kept in the database so every app process serves
    the same bytes. ``key`` is ``<sha256 of the bytes>.<ext>``: the URL names the content,
    so it can be cached for a year and never needs invalidating."""

    __tablename__ = "media_files"

    key: Mapped[str] = mapped_column(String(80), primary_key=True)
    content_type: Mapped[str] = mapped_column(String(40))
    data: Mapped[bytes] = mapped_column(LargeBinary)
    width: Mapped[int] = mapped_column(Integer)
    height: Mapped[int] = mapped_column(Integer)
    image_id: Mapped[int | None] = mapped_column(
        ForeignKey("product_images.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class Article(Base):
    __tablename__ = "articles"
    __table_args__ = (
        # Newest first, one page at a time, without sorting the whole table.
        Index("ix_articles_listing", "published", "published_at", "id"),
        # A search's count on SQLite reads what it compares from the index, not every
        # article's row with its body (a quarter of the count; migration 0037). Not on
        # PostgreSQL, which compares the folded columns, and whose B-tree entries are
        # bounded (a summary of 500 four-byte characters would not fit).
        Index("ix_articles_search", "published", "title", "summary").ddl_if(dialect="sqlite"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    slug: Mapped[str] = mapped_column(String(100), unique=True)
    title: Mapped[str] = mapped_column(String(200))
    summary: Mapped[str] = mapped_column(String(500), default="")
    # What a search matches (services.store.listing.search_sql): see FOLDED.
    title_folded: Mapped[str] = mapped_column(String(200), FOLDED("title"), deferred=True)
    summary_folded: Mapped[str] = mapped_column(String(500), FOLDED("summary"), deferred=True)
    category: Mapped[str] = mapped_column(String(100), default="general", index=True)
    body: Mapped[str] = mapped_column(Text, default="")
    body_html: Mapped[str] = mapped_column(Text, default="")
    published: Mapped[bool] = mapped_column(Boolean, default=False, index=True)
    published_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class ContentVersion(Base):
    """A counter every catalogue or docs write bumps in its own transaction (one row,
    ``public``): processes compare it to empty their answer caches (cmsshop.cache)."""

    __tablename__ = "content_versions"

    name: Mapped[str] = mapped_column(String(20), primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger, default=0)


# What the public catalogue and docs answers are made of: a write to any of them
# invalidates the answer cache.
PUBLIC_CONTENT = (Currency, Product, ProductPrice, ProductImage, Release, Article)
# What the cached HTML pages read besides (cmsshop.cache): the brand (``brand.*`` rows of
# shop_settings, the logo in shop_files), the footer's legal links (legal_documents) and
# the product pictures' stored renditions (media_files), and which products are sold as
# subscriptions (subscription_plans: the product page says so). None is written on a hot path
# (the console writes them), so a write empties the caches at no cost worth counting.
PAGE_CONTENT_TABLES = frozenset(
    {"shop_settings", "shop_files", "legal_documents", "media_files", "subscription_plans"}
)
# Every table whose writes bump the content version (migrations 0017, 0026, 0028, 0031).
CONTENT_TABLES = frozenset(cls.__tablename__ for cls in PUBLIC_CONTENT) | PAGE_CONTENT_TABLES
