"""License issuing, shared by fulfilment and the dashboard."""

from __future__ import annotations

import datetime as dt
import secrets

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import License, OrderItem, Product
from cmsshop.services.licensing.features import features_of_product
from cmsshop.services.webhooks import payloads
from cmsshop.services.webhooks.events import emit_event
from cmsshop.util import READABLE_ALPHABET, utcnow

DEFAULT_MAX_ACTIVATIONS = 1


def generate_license_key() -> str:
    """``XXXXX-XXXXX-XXXXX-XXXXX-XXXXX``: 25 characters of a 32-letter alphabet, 125 bits
    from the OS's CSPRNG, five bits a character (32 = 2**5: uniform, like secrets.choice,
    at a tenth of its cost)."""
    bits = secrets.randbits(125)
    chars = "".join(READABLE_ALPHABET[(bits >> (5 * i)) & 31] for i in range(25))
    return "-".join(chars[i : i + 5] for i in range(0, 25, 5))


def seats_of(product: Product, quantity: int = 1) -> int:
    """The seats of a license of ``product`` bought ``quantity`` times: one license whose
    seats are the product's (DEFAULT_MAX_ACTIVATIONS when unset; 0 stays 0, a license for
    staging and local sites only) times the quantity."""
    seats = DEFAULT_MAX_ACTIVATIONS if product.max_activations is None else product.max_activations
    return seats * quantity


def license_expiry(product: Product, start: dt.datetime) -> dt.datetime | None:
    if product.duration_days is None:
        return None
    return start + dt.timedelta(days=product.duration_days)


def issue_license(session: Session, order_item: OrderItem, user_id: int) -> License | None:
    """The license of ``order_item``, issued now if the product is licensed and none exists
    (one license for the item's whole quantity).

    Idempotent; a racing second issuer fails on the unique order_item_id and is retried
    (see cmsshop.db), after which it finds the winner's license.
    """
    existing = session.scalar(select(License).where(License.order_item_id == order_item.id))
    if existing is not None:
        return existing
    product = order_item.product
    if not product.licensed:
        return None
    license = License(
        **new_license_values(
            order_item.id, product, user_id, utcnow(), quantity=order_item.quantity
        )
    )
    session.add(license)
    session.flush()
    subject, data = payloads.license_event(
        session, license, orderNumber=order_item.order.number if order_item.order else None
    )
    emit_event(session, "license.created", subject=subject, data=data)
    return license


def new_license_values(
    order_item_id: int, product: Product, user_id: int, now: dt.datetime, *, quantity: int
) -> dict:
    """The columns of the license a purchase of ``quantity`` x a licensed ``product``
    issues (one fulfilment here, many at once in services/payments/fulfil_batch.py): one
    license with ``quantity`` times the product's seats (docs/licensing.md, "Seats")."""
    return {
        "key": generate_license_key(),
        "order_item_id": order_item_id,
        "user_id": user_id,
        "product_id": product.id,
        "status": "active",
        "max_activations": seats_of(product, quantity),
        "expires_at": license_expiry(product, now),
        "features": features_of_product(product),
        "created_at": now,
    }
