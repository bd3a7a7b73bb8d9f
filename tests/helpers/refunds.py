"""Arranging refunds: an order paid through a provider whose (fake) API knows the
payment, so it can be refunded there; the provider's refund event delivered back."""

from __future__ import annotations

from decimal import Decimal

from fakes.shop import make_order
from fakes.stripe_api import intent_object
from sqlalchemy import func, select

from cmsshop.models import Entitlement, License, LicenseReview, Order, OrderItem, Refund
from cmsshop.services.payments import fulfilment

SETTINGS = {"cmsshop.base_url": "http://shop.test", "cmsshop.site_name": "Test shop"}


def card_paid_order(session, user, fake_stripe, slugs=("site-guard", "themes")) -> Order:
    """An order paid with the card provider: fulfilled, its PaymentIntent at the fake."""
    placed = make_order(session, user, slugs)
    order = fulfilment.lock_order(session, placed.id)
    reference = f"pi_{order.number.replace('-', '')}"
    fulfilment.fulfil_order(
        session, order, settings=SETTINGS, provider="cardprovider", payment_reference=reference
    )
    session.commit()
    fake_stripe.add_intent(intent_object(order.number, order.total, pi=reference))
    return order


def wallet_paid_order(session, user, paypal, slugs=("site-guard", "themes")) -> Order:
    """An order paid with the wallet provider: fulfilled, its capture at the fake."""
    placed = make_order(session, user, slugs, provider="walletprovider")
    order = fulfilment.lock_order(session, placed.id)
    capture_id = f"CAP{order.number.replace('-', '')}"[:20]
    fulfilment.fulfil_order(
        session, order, settings=SETTINGS, provider="walletprovider", payment_reference=capture_id
    )
    session.commit()
    paypal.add_capture(capture_id, order.number, f"{Decimal(order.total) / 100:.2f}", "EUR")
    return order


def refund_rows(session, order: Order) -> list[Refund]:
    session.commit()  # ends the read snapshot (SQLite WAL)
    session.expire_all()
    return list(
        session.scalars(select(Refund).where(Refund.order_id == order.id).order_by(Refund.id))
    )


def grant_states(session, order: Order) -> dict[str, list[str]]:
    """The order's entitlement and license statuses, and how many license reviews."""
    session.commit()
    session.expire_all()
    items = select(OrderItem.id).where(OrderItem.order_id == order.id)
    return {
        "entitlements": sorted(
            session.scalars(select(Entitlement.status).where(Entitlement.order_item_id.in_(items)))
        ),
        "licenses": sorted(
            session.scalars(select(License.status).where(License.order_item_id.in_(items)))
        ),
        "reviews": session.scalar(
            select(func.count())
            .select_from(LicenseReview)
            .where(LicenseReview.order_id == order.id)
        ),
    }
