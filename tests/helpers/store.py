"""Arranging the public catalogue: currencies and products with prices."""

from __future__ import annotations

from sqlalchemy import select

from cmsshop.models import Currency, Product, ProductPrice, Release
from cmsshop.services.docs.markdown import render_markdown


def add_currencies(dbsession):
    dbsession.add_all(
        [
            Currency(
                code="EUR", name="Euro", symbol="€", decimals=2, enabled=True, is_default=True
            ),
            Currency(code="USD", name="US Dollar", symbol="$", decimals=2, enabled=True),
            Currency(code="JPY", name="Yen", symbol="¥", decimals=0, enabled=True),
            Currency(code="GBP", name="Pound", symbol="£", decimals=2, enabled=False),
        ]
    )
    dbsession.commit()


def add_product(dbsession, slug, *, published=True, archived=False, prices=None, **fields):
    description = fields.pop("description", f"About **{slug}**")
    product = Product(
        slug=slug,
        name=fields.pop("name", slug.replace("-", " ").title()),
        summary=fields.pop("summary", f"Summary of {slug}"),
        description=description,
        description_html=render_markdown(description),
        published=published,
        archived=archived,
        licensed=fields.pop("licensed", False),
        **fields,
    )
    product.prices = [
        ProductPrice(currency=c, amount=a) for c, a in (prices or {"EUR": 4900}).items()
    ]
    dbsession.add(product)
    dbsession.commit()
    return product


def add_release(dbsession, slug, version="1.0.0", channel="stable"):
    """A release row of ``slug`` without a file: what publishing a product needs
    (services/store/products.py require_release_to_publish) when a test is not about
    downloads."""
    product_id = dbsession.scalar(select(Product.id).where(Product.slug == slug))
    release = Release(
        product_id=product_id,
        version=version,
        file_name=f"{slug}-{version}.zip",
        storage_path=f"releases/{product_id}/no-file-{version}",
        size=1,
        sha256="0" * 64,
        channel=channel,
    )
    dbsession.add(release)
    dbsession.commit()
    return release


def create_published(admin_app, dbsession, body, version="1.0.0", **kwargs):
    """POST /api/admin/products of a published product the way a seller must: created
    unpublished, given a release, then published; the PATCH's answer."""
    slug = body["slug"]
    admin_app.post_json("/api/admin/products", {**body, "published": False}, status=201)
    add_release(dbsession, slug, version)
    return admin_app.patch_json(f"/api/admin/products/{slug}", {"published": True}, **kwargs)
