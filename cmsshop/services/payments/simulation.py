"""Simulated payments (development): a provider's signed "payment completed" delivery
for a pending order, built by the provider plugin's simulator
(``config.add_payment_provider(..., simulator=fn)``).

Two callers send it to the real webhook route, whose view verifies the signature as for
any delivery: ``cmsshop-admin simulate-payment`` over HTTP to a running server, and the
sandbox page's "Simulate payment" button inside the server's own process. Both refuse
on a production site (:func:`allowed`)."""

from __future__ import annotations

import dataclasses

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from cmsshop.models import Order, User
from cmsshop.services.payments.base import NotConfigured
from cmsshop.services.payments.registry import PaymentProviders, SimulatedOrder
from cmsshop.services.payments.settings import provider_config


class CannotSimulate(Exception):
    """No delivery can be built: the provider is unknown, has no simulator, or lacks
    the settings its simulator signs with (the message says which)."""


@dataclasses.dataclass(frozen=True)
class SimulatedDelivery:
    """A signed delivery, ready to POST to the provider's webhook route."""

    provider: str
    headers: dict[str, str]
    body: bytes

    @property
    def path(self) -> str:
        return f"/api/webhooks/{self.provider}"


def allowed(settings) -> bool:
    """Payments may be simulated on this site: anything but production."""
    return settings["cmsshop.environment"] != "production"


def find_order(session: Session, number: str) -> Order | None:
    """Any customer's order ``number`` with its items (the operator's command)."""
    return session.scalar(
        select(Order).where(Order.number == number[:64]).options(selectinload(Order.items))
    )


def order_snapshot(session: Session, order: Order) -> SimulatedOrder:
    """What a simulator needs to know about ``order`` (its items loaded or loadable)."""
    email = session.scalar(select(User.email).where(User.id == order.user_id))
    return SimulatedOrder(
        number=order.number,
        currency=order.currency,
        total=order.total,
        provider_checkout_id=order.provider_checkout_id,
        customer_email=email or "",
        items=[
            {"product": i.product_slug, "name": i.name, "amount": i.amount} for i in order.items
        ],
    )


def offered(settings, providers: PaymentProviders, order: Order) -> bool:
    """Whether the sandbox page offers to simulate ``order``'s payment: outside
    production, for a pending order whose provider is enabled and has a simulator."""
    spec = providers.get(order.provider) if order.provider else None
    return (
        allowed(settings)
        and order.status == "pending"
        and spec is not None
        and spec.simulator is not None
    )


def simulated_delivery(
    registry, providers: PaymentProviders, name: str, order: SimulatedOrder
) -> SimulatedDelivery:
    """The signed "payment completed" delivery of provider ``name`` paying ``order`` in
    full; raise :class:`CannotSimulate` saying why there is none."""
    spec = providers.get(name)
    if spec is None:
        known = ", ".join(providers.names()) or "none enabled"
        raise CannotSimulate(f"unknown provider {name!r} (known: {known})")
    if spec.simulator is None:
        raise CannotSimulate(f"the {name} plugin has no simulator")
    try:
        headers, body = spec.simulator(order, provider_config(registry, spec))
    except NotConfigured as exc:
        raise CannotSimulate(f"cannot sign: {exc}") from None
    return SimulatedDelivery(name, headers, body)
