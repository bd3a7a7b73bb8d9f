"""Demo data for development (``cmsshop-admin development.ini seed-demo``).

Never loaded by production.ini (the command refuses when cmsshop.environment is
production). Feature areas add their part in ``seed_demo`` below.
"""

from __future__ import annotations

import hashlib
import os

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cmsshop.models import Article, Currency, Product, Release, User
from cmsshop.services.accounts import users as accounts
from cmsshop.services.docs import articles
from cmsshop.services.legal.demo import seed_demo_legal
from cmsshop.services.store import currencies, products
from cmsshop.services.storefront.demo import seed_demo_brand

DEMO_PASSWORD = "demo-password"

PRODUCTS = [
    {
        "slug": "site-guard-pro",
        "name": "SiteGuard Pro",
        "summary": "A licensed security plugin for CMS sites.",
        "description": "# SiteGuard Pro\n\nFirewall rules, login throttling and *audit logs*.\n\n"
        "- 3 site activations\n- 1 year of updates",
        "prices": {"EUR": 4900, "USD": 5400},
        "licensed": True,
        "max_activations": 3,
        "duration_days": 365,
        "features": ["pro", "support"],
        "release": ("1.4.2", "siteguard-pro-1.4.2.zip"),
    },
    {
        "slug": "pixel-forge",
        "name": "PixelForge Desktop",
        "summary": "An image editor for the desktop, perpetual license.",
        "description": "A **fast** image editor with layers and RAW support.",
        "prices": {"EUR": 7900, "USD": 8900},
        "licensed": True,
        "max_activations": 2,
        "duration_days": None,
        "release": ("2.0.0", "pixelforge-2.0.0.tar.gz"),
    },
    {
        "slug": "theme-pack",
        "name": "Theme Pack",
        "summary": "Twelve responsive themes; no license key needed.",
        "description": "Download and install. That's it.",
        "prices": {"EUR": 1900, "USD": 2100},
        "licensed": False,
        "max_activations": None,
        "duration_days": None,
        "release": ("1.0.0", "theme-pack-1.0.0.zip"),
    },
    {
        "slug": "support-plan",
        "name": "Priority Support (draft)",
        "summary": "Not published yet: visible to admins only.",
        "description": "Coming soon.",
        "prices": {"EUR": 9900},
        "licensed": False,
        "max_activations": None,
        "duration_days": None,
        "release": None,
        "published": False,
    },
]

ARTICLES = [
    (
        "getting-started",
        "Getting started",
        "guides",
        "Buy, download, activate.",
        "## Buying\n\nPick a product, pay, and your download appears in the dashboard.\n\n"
        "## Activating\n\nPaste your license key into the product's settings page.",
    ),
    (
        "licensing-faq",
        "Licensing FAQ",
        "licensing",
        "Seats, staging sites and moving a license.",
        "Staging and local sites (`*.test`, `localhost`, `staging.` hosts) do not use a seat.\n\n"
        "Deactivate an old installation to free its seat.",
    ),
    (
        "refund-policy",
        "Refund policy",
        "policies",
        "30 days, no questions asked.",
        "Ask within 30 days for a full refund.",
    ),
]


def is_empty(session: Session) -> bool:
    return (session.scalar(select(func.count()).select_from(User)) or 0) == 0


def seed_demo(session: Session, settings: dict, hasher: accounts.PasswordHasher) -> list[str]:
    """Load the demo data; returns a short report, one line per thing made."""
    report = []
    for email, role, name in (
        ("admin@example.com", "admin", "Demo Admin"),
        ("demo@example.com", "customer", "Demo Customer"),
    ):
        if accounts.find_user(session, email) is None:
            accounts.create_user(session, hasher, email, DEMO_PASSWORD, name=name, role=role)
            report.append(f"user {email} ({role}) password {DEMO_PASSWORD!r}")
    for code, name, symbol, default in (
        ("EUR", "Euro", "€", True),
        ("USD", "US Dollar", "$", False),
    ):
        if session.get(Currency, code) is None:
            currencies.create_currency(
                session,
                {
                    "code": code,
                    "name": name,
                    "symbol": symbol,
                    "decimals": 2,
                    "enabled": True,
                    "default": default,
                },
            )
            report.append(f"currency {code}")
    storage = settings["cmsshop.storage_dir"]
    for spec in PRODUCTS:
        if session.scalar(select(Product.id).where(Product.slug == spec["slug"])) is not None:
            continue
        product = products.create_product(
            session,
            {
                "slug": spec["slug"],
                "name": spec["name"],
                "summary": spec["summary"],
                "description": spec["description"],
                # Published below, once it has its release (services/store/products.py).
                "published": False,
                "licensing": {
                    **{
                        name: spec[name]
                        for name in ("licensed", "max_activations", "duration_days")
                    },
                    "features": spec.get("features", []),
                },
                "prices": [{"currency": c, "amount": a} for c, a in spec["prices"].items()],
            },
        )
        if spec["release"]:
            version, file_name = spec["release"]
            product.releases = [write_demo_release(storage, spec["slug"], version, file_name)]
            session.flush()
        if spec.get("published", True):
            products.update_product(session, product, {"published": True})
        report.append(f"product {spec['slug']}")
    for slug, title, category, summary, body in ARTICLES:
        if session.scalar(select(Article.id).where(Article.slug == slug)) is not None:
            continue
        articles.create_article(
            session,
            {
                "slug": slug,
                "title": title,
                "category": category,
                "summary": summary,
                "body": body,
                "published": True,
            },
        )
        report.append(f"article {slug}")
    session.flush()
    report.extend(seed_demo_coupon(session))
    report.extend(seed_demo_legal(session))
    report.extend(seed_demo_brand(session))
    report.extend(seed_demo_order(session))
    return report


def seed_demo_coupon(session: Session) -> list[str]:
    """``DEMO10``: 10 % off, to try the cart's discount code."""
    from cmsshop.models import Coupon

    if session.scalar(select(Coupon.id).where(Coupon.code == "DEMO10")) is not None:
        return []
    session.add(Coupon(code="DEMO10", description="Demo: 10 % off", kind="percent", percent_off=10))
    return ["coupon DEMO10 (10 % off)"]


def seed_demo_order(session: Session) -> list[str]:
    """A pending order of the demo customer, ready for ``simulate-payment``."""
    from cmsshop.models import Order
    from cmsshop.services.checkout.orders import create_demo_order

    customer = accounts.find_user(session, "demo@example.com")
    product = session.scalar(select(Product).where(Product.slug == "site-guard-pro"))
    if customer is None or product is None:
        return []
    if session.scalar(select(Order.id).where(Order.user_id == customer.id)) is not None:
        return []
    order = create_demo_order(session, customer, product, "EUR")
    return [
        f"pending order {order.number} of demo@example.com; pay it with "
        f"`cmsshop-admin development.ini simulate-payment {order.number}`"
    ]


def write_demo_release(storage_dir: str, slug: str, version: str, file_name: str) -> Release:
    """A small deterministic file standing in for a real release archive."""
    relative = os.path.join("releases", slug, f"{version}-{file_name}")
    path = os.path.join(storage_dir, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    content = (f"{slug} {version}\n".encode()) * 40000  # ~0.5-1 MB
    with open(path, "wb") as handle:
        handle.write(content)
    return Release(
        version=version,
        file_name=file_name,
        storage_path=relative,
        size=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
    )
