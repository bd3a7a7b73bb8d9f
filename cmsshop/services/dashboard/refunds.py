"""What a customer's order page says about refunds: how much came back, what is still
paid, and what the refund took back.

Read from the ``refunds`` table's succeeded rows when there are any (the console's
refunds, and those made at the provider once their event recorded them); otherwise from
what the refund step leaves behind: an order ``refunded`` (in full: a refund or a lost
dispute) or, for a partial refund, the refunded amount noted on the order's license
reviews (``license_changes.review_partial_refund``). A partial refund of an order with
no license leaves no trace outside the refunds table, so it shows only from there.
What was taken back is read from the order's grants: revoked downloads and licenses
after a full refund; after a partial one nothing, its licenses kept for the seller's
review.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cmsshop.models import Entitlement, License, LicenseReview, Order, Refund
from cmsshop.services.tax.credit_notes import credit_notes_of_order


@dataclasses.dataclass(frozen=True)
class OrderRefunds:
    refunded: int  # minor units, the order's currency
    remaining: int
    full: bool
    # (amount, confirmed_at) of each refund the refunds table holds, oldest first
    refunds: list[tuple[int, dt.datetime | None]]
    revoked_downloads: list[str]
    revoked_licenses: list[tuple[str, str]]  # (product, key)
    licenses_in_review: bool
    credit_notes: list[tuple[str, int]]  # (number, total: negative) of the invoice's corrections


def order_refunds(session: Session, order: Order) -> OrderRefunds | None:
    """The refunds of ``order`` (the customer's own, already found); None if none."""
    rows = list(
        session.scalars(
            select(Refund)
            .where(Refund.order_id == order.id, Refund.status == "succeeded")
            .order_by(Refund.confirmed_at, Refund.id)
        )
    )
    refunded = sum(row.amount for row in rows)
    if order.status == "refunded":
        refunded = order.total
    elif not rows:
        noted = session.scalar(
            select(func.max(LicenseReview.refunded_amount)).where(
                LicenseReview.order_id == order.id
            )
        )
        refunded = noted or 0
    if refunded <= 0:
        return None
    refunded = min(refunded, order.total)
    full = order.status == "refunded"
    names = {item.id: item.name for item in order.items}
    downloads, licenses = [], []
    if full:
        downloads = [
            names[item_id]
            for item_id in session.scalars(
                select(Entitlement.order_item_id)
                .where(Entitlement.order_item_id.in_(names), Entitlement.status == "revoked")
                .order_by(Entitlement.order_item_id)
            )
        ]
        licenses = [
            (names[license.order_item_id], license.key)
            for license in session.scalars(
                select(License)
                .where(License.order_item_id.in_(names), License.status == "revoked")
                .order_by(License.order_item_id)
            )
        ]
    open_reviews = select(func.count(LicenseReview.id)).where(
        LicenseReview.order_id == order.id, LicenseReview.resolved_at.is_(None)
    )
    in_review = not full and (session.scalar(open_reviews) or 0) > 0
    return OrderRefunds(
        refunded=refunded,
        remaining=order.total - refunded,
        full=full,
        refunds=[(row.amount, row.confirmed_at or row.created_at) for row in rows],
        revoked_downloads=downloads,
        revoked_licenses=licenses,
        licenses_in_review=in_review,
        credit_notes=[
            (note.number, note.total) for note in credit_notes_of_order(session, order.id)
        ],
    )
