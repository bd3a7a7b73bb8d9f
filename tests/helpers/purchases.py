"""Fixture data for the dashboard, download and ticket tests (no tests of its own).

Purchases are built directly through the models, as fulfilment would leave them: a
paid order with one item, its invoice, an entitlement, and a product whose release
file really exists in the test's storage directory.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import itertools
import os

import jsonschema_rs
import requests
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cmsshop.models import (
    Currency,
    Entitlement,
    Invoice,
    License,
    Order,
    OrderItem,
    Product,
    Release,
    User,
)
from cmsshop.util import utcnow
from helpers.app import PASSWORD

_serial = itertools.count(1)


@dataclasses.dataclass
class Purchase:
    order: Order
    item: OrderItem
    entitlement: Entitlement
    product: Product
    release: Release | None
    invoice: Invoice | None
    content: bytes | None


def ensure_currency(session: Session, code: str = "EUR") -> None:
    if session.get(Currency, code) is None:
        session.add(Currency(code=code, name=code, symbol=code, decimals=2, is_default=True))
        session.flush()


def write_release(
    session: Session,
    storage_dir,
    product: Product,
    version: str,
    content: bytes,
    file_name: str | None = None,
    released_at: dt.datetime | None = None,
) -> Release:
    relative = os.path.join("releases", product.slug, f"{version}.zip")
    path = os.path.join(str(storage_dir), relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(content)
    release = Release(
        product_id=product.id,
        version=version,
        file_name=file_name or f"{product.slug}-{version}.zip",
        storage_path=relative,
        size=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        released_at=released_at or utcnow(),
    )
    session.add(release)
    session.flush()
    return release


def make_purchase(
    session: Session,
    user: User,
    storage_dir,
    *,
    licensed: bool = True,
    entitlement_status: str = "active",
    order_status: str = "paid",
    content: bytes | None = b"release file contents\n" * 100,
    file_name: str | None = None,
    amount: int = 4900,
    created_at: dt.datetime | None = None,
    invoice: bool = True,
    max_activations: int | None = 3,
    duration_days: int | None = None,
) -> Purchase:
    """One paid order of one new product for ``user``; committed."""
    ensure_currency(session)
    n = next(_serial)
    created_at = created_at or utcnow()
    product = Product(
        slug=f"product-{n}",
        name=f"Product {n}",
        published=True,
        licensed=licensed,
        max_activations=max_activations,
        duration_days=duration_days,
    )
    session.add(product)
    session.flush()
    release = None
    if content is not None:
        release = write_release(session, storage_dir, product, "1.0.0", content, file_name)
    order = Order(
        number=f"ORD-{n:06d}-{user.id}",
        user_id=user.id,
        currency="EUR",
        total=amount,
        status=order_status,
        provider="cardprovider",
        created_at=created_at,
        paid_at=created_at if order_status == "paid" else None,
    )
    item = OrderItem(
        product_id=product.id, product_slug=product.slug, name=product.name, amount=amount
    )
    order.items = [item]
    session.add(order)
    session.flush()
    entitlement = Entitlement(
        order_item_id=item.id,
        user_id=user.id,
        product_id=product.id,
        status=entitlement_status,
        created_at=created_at,
    )
    session.add(entitlement)
    inv = None
    if invoice:
        year = created_at.year
        sequence = (
            session.scalar(select(func.max(Invoice.sequence)).where(Invoice.year == year)) or 0
        ) + 1
        inv = Invoice(
            number=f"INV-{year}-{sequence:06d}",
            year=year,
            sequence=sequence,
            order_id=order.id,
            user_id=user.id,
            issued_at=created_at,
            currency="EUR",
            total=amount,
            lines=[{"product": product.slug, "name": product.name, "amount": amount}],
        )
        session.add(inv)
    session.commit()
    return Purchase(order, item, entitlement, product, release, inv, content)


def add_license(session: Session, purchase: Purchase, key: str = "AAAAA-BBBBB-CCCCC-DDDDD-EEEEE"):
    license = License(
        key=key,
        order_item_id=purchase.item.id,
        user_id=purchase.order.user_id,
        product_id=purchase.product.id,
        status="active",
        max_activations=3,
    )
    session.add(license)
    session.commit()
    return license


def set_entitlement_status(session: Session, purchase: Purchase, status: str) -> None:
    entitlement = session.get(Entitlement, purchase.entitlement.id)
    entitlement.status = status
    session.commit()


def http_login(base_url: str, email: str, password: str = PASSWORD) -> requests.Session:
    """A logged-in requests session against a live server, with its CSRF header set."""
    client = requests.Session()
    token = client.get(f"{base_url}/api/auth/session", timeout=10).json()["csrfToken"]
    response = client.post(
        f"{base_url}/api/auth/login",
        json={"email": email, "password": password},
        headers={"X-CSRF-Token": token},
        timeout=10,
    )
    response.raise_for_status()
    client.headers["X-CSRF-Token"] = response.json()["csrfToken"]
    return client


def openapi_validator(app_client, path: str, method: str, status: str):
    """A JSON-schema validator for the documented response of an operation."""
    document = app_client.get("/api/openapi.json").json
    schema = document["paths"][path][method]["responses"][status]["content"]["application/json"][
        "schema"
    ]
    return jsonschema_rs.Draft202012Validator({**schema, "components": document["components"]})
