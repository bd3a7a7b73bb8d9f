"""Buying a renewal or upgrade of a license through checkout and paying it through the
card webhook, then reading the license back."""

from __future__ import annotations

from fakes.stripe_api import delivery, event, session_object
from sqlalchemy import select, update

from cmsshop.models import License, Order
from helpers.checkout import BILLING


def fresh(dbsession, model, ident):
    """``model`` row ``ident`` as committed now."""
    dbsession.rollback()
    dbsession.expire_all()
    return dbsession.get(model, ident)


def buy(buyer, item: dict, status=201):
    """Place an order of one item (``{"renew": key}`` or ``{"upgrade": key, "to": slug}``)."""
    return buyer.post_json(
        "/api/store/checkout",
        # acceptTerms: needed only where the test published terms of sale.
        {"billing": BILLING, "items": [item], "acceptTerms": True},
        status=status,
    )


def order_of(dbsession, number: str) -> Order:
    dbsession.rollback()
    return dbsession.scalar(select(Order).where(Order.number == number))


def pay(webhook, fake_stripe, order: Order):
    """Pay ``order`` with a signed checkout.session.completed: (the answer, the signed
    delivery, the payment intent refunds and disputes name)."""
    session = fake_stripe.add_session(session_object(order.number, order.total))
    payload = event("checkout.session.completed", session)
    body, headers = delivery(payload)
    return webhook(body, headers, status=200).json, (body, headers), session["payment_intent"]


def set_license(dbsession, license, **values):
    dbsession.rollback()
    dbsession.execute(update(License).where(License.id == license.id).values(**values))
    dbsession.commit()
