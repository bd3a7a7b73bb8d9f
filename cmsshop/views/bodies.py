"""JSON bodies of the resources more than one feature shows (each written once).

A resource shown by a single feature is serialised next to that feature's views.
Services return models or dataclasses; only the view layer turns them into camelCase JSON.
"""

from __future__ import annotations

from cmsshop.util import isoformat_z


def order_body(order) -> dict:
    """An Order with its items."""
    return {
        "number": order.number,
        "status": order.status,
        "currency": order.currency,
        "total": order.total,
        "items": [
            {"product": item.product_slug, "name": item.name, "amount": item.amount}
            for item in order.items
        ],
        "provider": order.provider,
        "createdAt": isoformat_z(order.created_at),
        "paidAt": isoformat_z(order.paid_at),
    }


def release_body(release) -> dict | None:
    """A Release, or a row with its columns (see catalogue.load_cards); None stays None."""
    if release is None:
        return None
    return {
        "version": release.version,
        "fileName": release.file_name,
        "size": release.size,
        "sha256": release.sha256,
        "releasedAt": isoformat_z(release.released_at),
    }
