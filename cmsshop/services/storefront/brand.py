"""The shop's brand, edited in the console (/admin/brand) and the admin JSON API: its
name, accent colour, the home page's headline and intro, and the products it features.

Saved as ``brand.*`` rows of ``shop_settings``; a key without a row falls back to the
default (the shop name to the ``cmsshop.site_name`` setting, the accent to the
stylesheet's own). The logo is the shop's one logo (services.tax.logo), the same the
invoices show, so a seller never keeps two.

The accent colour is the background of white button text and the colour of links on
white, so it must reach WCAG AA's 4.5:1 against white: a lighter one is refused rather
than silently darkened, because the seller should see the colour they chose.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.content import kept_per_version
from cmsshop.models import Product, ShopFile, ShopSetting, User
from cmsshop.services.audit.entries import entries_for, record_change
from cmsshop.services.store import media
from cmsshop.services.store.products import CARD_COLUMNS, ProductCard, load_cards
from cmsshop.services.tax.logo import LOGO_NAME, logo_url
from cmsshop.util import utcnow

PREFIX = "brand."
# field -> (longest, several lines allowed)
TEXT_FIELDS = {"shopName": (80, False), "headline": (120, False), "intro": (600, True)}
FIELDS = (*TEXT_FIELDS, "accent", "featured")
MAX_FEATURED = 12
MIN_CONTRAST = 4.5
# site.css's own --accent, what a shop without a saved accent shows.
DEFAULT_ACCENT = "#1f5fbf"
# Where the audit log keeps the brand's changes (one object: the shop's brand).
AUDIT_TYPE, AUDIT_ID = "brand", "shop"
ACCENT = re.compile(r"#[0-9a-f]{6}")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@dataclass(frozen=True)
class Brand:
    """What the pages show. ``accent`` is None while the stylesheet's own applies."""

    shop_name: str
    accent: str | None
    headline: str
    intro: str
    featured: tuple[int, ...]
    logo_url: str | None
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def shown_accent(self) -> str:
        return self.accent or DEFAULT_ACCENT

    def as_json(self) -> dict[str, Any]:
        return {
            "shopName": self.shop_name,
            "accent": self.accent,
            "headline": self.headline,
            "intro": self.intro,
            "featured": list(self.featured),
            "logoUrl": self.logo_url,
            "sources": dict(self.sources),
        }


class BrandInvalid(Exception):
    """Why the brand was refused, by field, in words for the seller."""

    def __init__(self, errors: dict[str, str]):
        super().__init__(errors)
        self.errors = errors


def saved_values(session: Session) -> dict[str, Any]:
    return {
        row.key[len(PREFIX) :]: row.value
        for row in session.scalars(select(ShopSetting).where(ShopSetting.key.like(PREFIX + "%")))
    }


def read_brand(session: Session, settings: Mapping[str, Any]) -> Brand:
    """The brand as pages show it: saved values over the defaults; two small reads
    (the logo's hash and type only, never its bytes)."""
    saved = saved_values(session)
    logo = session.execute(
        select(ShopFile.sha256, ShopFile.content_type).where(ShopFile.name == LOGO_NAME)
    ).first()
    sources = {name: ("saved" if saved.get(name) else "default") for name in FIELDS}
    return Brand(
        shop_name=str(saved.get("shopName") or settings.get("cmsshop.site_name") or "cmsshop"),
        accent=saved.get("accent") or None,
        headline=str(saved.get("headline") or ""),
        intro=str(saved.get("intro") or ""),
        featured=tuple(saved.get("featured") or ()),
        logo_url=logo_url(logo) if logo is not None else None,
        sources=sources,
    )


def kept_brand(session: Session, settings: Mapping[str, Any]) -> Brand:
    """:func:`read_brand`, read again only when the content version moved: writes to
    shop_settings and shop_files bump it (migration 0028), like every content write. One
    one-row read per page instead of two reads and their ORM objects. Kept with the
    catalogue's totals (cmsshop.content: per database, emptied with the
    answer caches)."""
    key = ("brand", settings.get("cmsshop.site_name"))
    return kept_per_version(session, key, lambda: read_brand(session, settings))


def default_brand(settings: Mapping[str, Any]) -> Brand:
    """The brand without the database: what an error page shows when it cannot be read."""
    name = settings.get("cmsshop.site_name") or "cmsshop"
    return Brand(name, None, "", "", (), None, {})


def _channel(value: int) -> float:
    c = value / 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def relative_luminance(colour: str) -> float:
    """WCAG 2's relative luminance of ``#rrggbb``."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * _channel(r) + 0.7152 * _channel(g) + 0.0722 * _channel(b)


def contrast_with_white(colour: str) -> float:
    """The WCAG contrast ratio of ``colour`` against white (1 to 21)."""
    return 1.05 / (relative_luminance(colour) + 0.05)


def clean_accent(raw: Any) -> str:
    """``#rrggbb`` (lower case) or "" (the default); ValueError, with the message for the
    seller, otherwise."""
    text = str(raw or "").strip().lower()
    if not text:
        return ""
    if not ACCENT.fullmatch(text):
        raise ValueError("a colour written #rrggbb, e.g. #1f5fbf")
    ratio = contrast_with_white(text)
    if ratio < MIN_CONTRAST:
        # Rounded down, so that a refused 4.497 never reads as an acceptable "4.50".
        shown = math.floor(ratio * 100) / 100
        raise ValueError(
            f"too light: white text on it has a contrast of {shown:.2f}:1, and at least "
            f"{MIN_CONTRAST}:1 is needed to be readable (WCAG AA); choose a darker shade"
        )
    return text


def publishable_ids(session: Session, ids: Sequence[int]) -> set[int]:
    """Which of ``ids`` are products a visitor can see (published, not archived)."""
    if not ids:
        return set()
    return set(
        session.scalars(
            select(Product.id).where(
                Product.id.in_(list(ids)),
                Product.published.is_(True),
                Product.archived.is_(False),
            )
        )
    )


def clean(session: Session, values: Mapping[str, Any]) -> dict[str, Any]:
    """Every field checked and normalised; BrandInvalid by field (nothing saved)."""
    errors: dict[str, str] = {}
    out: dict[str, Any] = {}
    for name, (longest, multiline) in TEXT_FIELDS.items():
        text = str(values.get(name) or "").replace("\r\n", "\n").strip()
        if not multiline and "\n" in text:
            errors[name] = "one line only"
        elif CONTROL.search(text):
            errors[name] = "contains characters that cannot be printed"
        elif len(text) > longest:
            errors[name] = f"at most {longest} characters"
        out[name] = text
    try:
        out["accent"] = clean_accent(values.get("accent"))
    except ValueError as exc:
        errors["accent"] = str(exc)
    featured = list(values.get("featured") or [])
    if len(featured) != len(set(featured)):
        errors["featured"] = "each product once"
    elif len(featured) > MAX_FEATURED:
        errors["featured"] = f"at most {MAX_FEATURED} products"
    else:
        unknown = [pid for pid in featured if pid not in publishable_ids(session, featured)]
        if unknown:
            errors["featured"] = (
                "only published products can be featured (not: "
                + ", ".join(str(pid) for pid in unknown)
                + ")"
            )
    out["featured"] = featured
    if errors:
        raise BrandInvalid(errors)
    return out


def current_values(session: Session) -> dict[str, Any]:
    """The saved values of every field ("" or [] where none is saved): what a partial
    update starts from."""
    saved = saved_values(session)
    return {name: saved.get(name) or ([] if name == "featured" else "") for name in FIELDS}


def save_brand(
    session: Session,
    values: Mapping[str, Any],
    actor: User | None = None,
    *,
    ip: str | None = None,
) -> list[str]:
    """Save ``clean``'s output; an empty value removes its row (back to the default).
    The fields that changed (none: nothing written) are recorded in the audit log."""
    now = utcnow()
    existing = {
        row.key: row
        for row in session.scalars(select(ShopSetting).where(ShopSetting.key.like(PREFIX + "%")))
    }
    changed = []
    for name in FIELDS:
        key, value = PREFIX + name, values[name]
        row = existing.get(key)
        if (row.value if row is not None else None) == (value or None):
            continue
        changed.append(name)
        if not value:
            session.delete(row)
        elif row is None:
            session.add(
                ShopSetting(key=key, value=value, updated_at=now, updated_by=actor_id(actor))
            )
        else:
            row.value, row.updated_at, row.updated_by = value, now, actor_id(actor)
    if changed:
        record_change(
            session,
            action="brand.update",
            object_type=AUDIT_TYPE,
            object_id=AUDIT_ID,
            actor=actor,
            summary={"changed": changed},
            ip=ip,
        )
    session.flush()
    return changed


def actor_id(actor: User | None) -> int | None:
    return actor.id if actor is not None else None


def recent_changes(session: Session, limit: int = 5):
    """The newest changes of the brand, newest first (the console lists them)."""
    return entries_for(session, AUDIT_TYPE, AUDIT_ID, limit=limit)


MOVES = ("add", "up", "down", "remove")


def move_featured(featured: Sequence[int], product_id: int, move: str) -> list[int]:
    """The featured list after one console action on ``product_id``."""
    ids = list(featured)
    if move == "add":
        return ids if product_id in ids else [*ids, product_id]
    if product_id not in ids:
        return ids
    index = ids.index(product_id)
    if move == "remove":
        del ids[index]
    elif move == "up" and index > 0:
        ids[index - 1], ids[index] = ids[index], ids[index - 1]
    elif move == "down" and index < len(ids) - 1:
        ids[index + 1], ids[index] = ids[index], ids[index + 1]
    return ids


@dataclass
class FeaturedCard:
    """A featured product's card and its first image (None without one)."""

    card: ProductCard
    image: Any = None

    @property
    def product(self):
        return self.card.product

    @property
    def prices(self):
        return self.card.prices


def featured_cards(session: Session, featured: Sequence[int]) -> list[FeaturedCard]:
    """The featured products a visitor can see, in the seller's order: one unpublished
    since it was chosen simply drops out."""
    if not featured:
        return []
    rows = session.execute(
        select(*CARD_COLUMNS).where(
            Product.id.in_(list(featured)),
            Product.published.is_(True),
            Product.archived.is_(False),
        )
    ).all()
    by_id = {row.id: row for row in rows}
    ordered = [by_id[pid] for pid in featured if pid in by_id]
    return with_images(session, load_cards(session, ordered, public=True))


def with_images(session: Session, cards: Sequence[ProductCard]) -> list[FeaturedCard]:
    """``cards`` with each product's first image."""
    images = media.first_images(session, [card.product.id for card in cards])
    return [FeaturedCard(card, images.get(card.product.id)) for card in cards]


def product_choices(session: Session) -> list[tuple[int, str]]:
    """(id, name) of every product that can be featured, by name."""
    return [
        (row.id, row.name)
        for row in session.execute(
            select(Product.id, Product.name)
            .where(Product.published.is_(True), Product.archived.is_(False))
            .order_by(Product.name, Product.id)
        )
    ]
