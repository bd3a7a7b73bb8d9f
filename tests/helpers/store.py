"""Arranging the public catalogue: currencies and products with prices."""

from __future__ import annotations

from cmsshop.models import Currency, Product, ProductPrice
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
