"""Arranging a customer's account for the account page and activation tests (no tests).

Everything goes through the real services and routes: the catalogue of fakes.shop, a
release stored by the release service, an order fulfilled by the fulfilment service
(which writes the invoice, the entitlements and the licenses), and activations made by
a product runtime calling POST /api/license/activate.
"""

from __future__ import annotations

import dataclasses
import secrets

from fakes.shop import make_catalogue, make_order
from sqlalchemy import select

from cmsshop.models import Entitlement, Invoice, License, Order, Product
from cmsshop.services.payments import fulfilment
from cmsshop.services.store.releases import ReleaseWriter, add_release
from helpers.licensing import runtime

RELEASE_BYTES = b"PK\x03\x04 site-guard release 2.0.0\n" * 64
RUNTIME_IP = "203.0.113.9"


@dataclasses.dataclass
class Account:
    """One paid order of site-guard (licensed) and themes (not licensed)."""

    order: Order
    invoice: Invoice
    licensed: Entitlement  # site-guard: has a license and a release
    unlicensed: Entitlement  # themes: no release
    license: License


def store_release(session, storage_dir, slug: str, version: str, content: bytes):
    product = session.scalar(select(Product).where(Product.slug == slug))
    upload = ReleaseWriter(str(storage_dir), max_bytes=10 * 1024 * 1024)
    upload.write(content)
    release = add_release(
        session, product, version=version, file_name=f"{slug}-{version}.zip", upload=upload
    )
    session.commit()
    return release


# What fulfilment reads from the settings (the receipt's links and signature).
RECEIPT_SETTINGS = {"cmsshop.base_url": "http://localhost", "cmsshop.site_name": "cmsshop"}


def paid_order(session, user, slugs=("site-guard", "themes"), **order_fields) -> Order:
    """An order placed and then fulfilled as a confirmed payment would be
    (``order_fields``: make_order's, e.g. ``quantities``)."""
    placed = make_order(session, user, slugs, **order_fields)
    order = fulfilment.lock_order(session, placed.id)
    fulfilment.fulfil_order(
        session,
        order,
        settings=RECEIPT_SETTINGS,
        provider="cardprovider",
        payment_reference=f"pi_{order.number}",
    )
    session.commit()
    return order


def make_account(session, user, storage_dir, *, catalogue: bool = True) -> Account:
    if catalogue:
        make_catalogue(session)
        store_release(session, storage_dir, "site-guard", "2.0.0", RELEASE_BYTES)
    order = paid_order(session, user)
    entitlements = {
        e.product.slug: e
        for e in session.scalars(select(Entitlement).where(Entitlement.user_id == user.id))
        if e.order_item.order_id == order.id
    }
    licensed = entitlements["site-guard"]
    return Account(
        order=order,
        invoice=session.scalar(select(Invoice).where(Invoice.order_id == order.id)),
        licensed=licensed,
        unlicensed=entitlements["themes"],
        license=session.scalar(
            select(License).where(License.order_item_id == licensed.order_item_id)
        ),
    )


def license_call(
    client, action: str, key: str, domain: str, fingerprint: str, status="*", product="site-guard"
):
    body = {
        "product": product,
        "licenseKey": key,
        "domain": domain,
        "fingerprint": fingerprint,
        "nonce": secrets.token_urlsafe(18),
    }
    return client.post_json(f"/api/license/{action}", body, status=status)


def activate(app, key: str, domain: str, fingerprint: str, product: str = "site-guard") -> int:
    """Activate a site through the licensing route; the activation's id."""
    response = license_call(
        runtime(app, RUNTIME_IP), "activate", key, domain, fingerprint, 201, product
    )
    return response.json["activation"]["id"]
