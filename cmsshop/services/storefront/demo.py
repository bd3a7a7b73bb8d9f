"""The demo shop's brand (services/demo.py): a headline, an introduction and its three
published products featured, so the demo's home page reads as a shop's."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import Product
from cmsshop.services.storefront import brand

HEADLINE = "Software that keeps your websites safe and fast"
INTRO = (
    "Plugins, desktop tools and themes for people who build websites. "
    "Pay once, download at once, and get updates for as long as your license runs."
)
FEATURED = ("site-guard-pro", "pixel-forge", "theme-pack")


def seed_demo_brand(session: Session) -> list[str]:
    """Set the demo brand unless the seller already set one (a second seed changes nothing)."""
    if brand.saved_values(session):
        return []
    ids = {
        slug: pid
        for slug, pid in session.execute(
            select(Product.slug, Product.id).where(Product.slug.in_(FEATURED))
        )
    }
    featured = [ids[slug] for slug in FEATURED if slug in ids]
    values = brand.clean(
        session,
        {"headline": HEADLINE, "intro": INTRO, "featured": featured, "shopName": "", "accent": ""},
    )
    brand.save_brand(session, values, None)
    return [f"brand: headline, introduction, {len(featured)} featured products"]
