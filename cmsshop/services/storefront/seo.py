"""Findability: what search engines and link previews read.

The canonical URL of a page (from the shop's public base URL, the query string dropped
but for paging), the default meta description, the sitemap's entries (published content
only) and a product's schema.org Product/Offer data. Pure values from the database and
the settings; the pages (views/core/seo.py) render them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import Article, Product
from cmsshop.services.legal import documents
from cmsshop.services.store import media

# Where robots are not welcome: private or transactional pages, and the API.
DISALLOWED = ("/admin", "/account", "/api", "/checkout", "/cart")
# is_disallowed's two tests, made once: the security headers tween asks on every answer.
_DISALLOWED_PATHS = frozenset(DISALLOWED)
_DISALLOWED_PREFIXES = tuple(path + "/" for path in DISALLOWED)
# Query parameters that name a different page of the same list (kept in a canonical URL).
PAGING_PARAMS = ("page",)
DESCRIPTION_LIMIT = 300
IN_STOCK = "https://schema.org/InStock"


@dataclass(frozen=True)
class SitemapEntry:
    path: str
    last_modified: dt.datetime | None = None


def base_url(settings: Mapping[str, Any]) -> str:
    """The shop's public address as configured (cmsshop.base_url), without a trailing /."""
    return str(settings["cmsshop.base_url"]).rstrip("/")


def is_disallowed(path: str) -> bool:
    """Whether ``path`` is one of DISALLOWED or under it: ``/account`` and ``/account/...``,
    not ``/accounting`` (a public page may begin with the same letters)."""
    return path in _DISALLOWED_PATHS or path.startswith(_DISALLOWED_PREFIXES)


def canonical_url(base: str, path: str, query: Mapping[str, str]) -> str:
    """``base`` + ``path``, keeping only a paging parameter beyond the first page: the
    same content reached with tracking, sorting or search parameters has one address."""
    kept = {
        name: query[name]
        for name in PAGING_PARAMS
        if name in query and query[name].isascii() and query[name].isdigit()
        if int(query[name]) > 1
    }
    return base + path + (f"?{urlencode(kept)}" if kept else "")


def shorten(text: str, limit: int = DESCRIPTION_LIMIT) -> str:
    """One line of at most ``limit`` characters, cut at a word."""
    text = " ".join((text or "").split())
    if len(text) <= limit:
        return text
    return text[: limit - 1].rsplit(" ", 1)[0] + "…"


def default_description(shop_name: str, intro: str) -> str:
    """The meta description of a page that has none of its own: the brand's intro, or a
    sentence naming the shop."""
    return shorten(intro) or f"{shop_name}: software, license keys and downloads."


def sitemap_entries(session: Session, modules: list[str] | tuple[str, ...]) -> list[SitemapEntry]:
    """Every public page worth listing: home, the catalogue and product pages (store on),
    the documentation and articles (docs on), the published legal pages. Drafts,
    archived products and unpublished pages are left out."""
    entries = [SitemapEntry("/")]
    if "store" in modules:
        entries.append(SitemapEntry("/products"))
        rows = session.execute(
            select(Product.slug, Product.updated_at)
            .where(Product.published.is_(True), Product.archived.is_(False))
            .order_by(Product.slug)
        )
        entries += [SitemapEntry(f"/products/{slug}", updated) for slug, updated in rows]
    if "docs" in modules:
        entries.append(SitemapEntry("/docs"))
        rows = session.execute(
            select(Article.slug, Article.updated_at)
            .where(Article.published.is_(True))
            .order_by(Article.slug)
        )
        entries += [SitemapEntry(f"/docs/{slug}", updated) for slug, updated in rows]
    for kind, document in documents.latest_by_kind(session).items():
        entries.append(SitemapEntry(f"/legal/{kind}", document.published_at))
    return entries


def robots_txt(base: str) -> str:
    lines = ["User-agent: *", *(f"Disallow: {path}" for path in DISALLOWED), ""]
    lines.append(f"Sitemap: {base}/sitemap.xml")
    return "\n".join(lines) + "\n"


def decimal_price(amount: int, decimals: int) -> str:
    """Minor units as the decimal string schema.org wants: 4900, 2 -> "49.00"."""
    value = Decimal(amount).scaleb(-decimals)
    return f"{value:.{decimals}f}"


def product_json_ld(base: str, product, prices, images) -> dict:
    """schema.org Product with one Offer per price (``prices``: rows with currency,
    amount, decimals); its first picture when it has one. A dict: the template writes it
    with Jinja's ``tojson``, which escapes <, > and & so no text can end the script."""
    url = f"{base}/products/{product.slug}"
    data: dict[str, Any] = {
        "@context": "https://schema.org",
        "@type": "Product",
        "name": product.name,
        "url": url,
        "sku": product.slug,
    }
    if product.summary:
        data["description"] = product.summary
    if images:
        data["image"] = [
            base + media.media_url(media.fallback_key(images[0].variants[size]))
            for size in ("page", "og")
            if size in images[0].variants
        ]
    if prices:
        data["offers"] = [
            {
                "@type": "Offer",
                "price": decimal_price(price.amount, price.decimals),
                "priceCurrency": price.currency,
                "availability": IN_STOCK,
                "url": url,
            }
            for price in prices
        ]
    return data
