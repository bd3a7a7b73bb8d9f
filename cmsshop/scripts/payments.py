"""cmsshop-admin subcommands of the payments area.

``simulate-payment ORDER_NUMBER [--provider NAME] [--url URL]`` builds a realistic
"payment completed" event for a pending order, signs it with the provider's configured
webhook secret and POSTs it to the running server's real webhook route -- so a purchase
can be completed with ``make run`` and no provider account. Each provider plugs in its
own event builder and signer: ``config.add_payment_provider(..., simulator=fn)``.
"""

from __future__ import annotations

import json
import sys

import requests
from sqlalchemy import select
from sqlalchemy.orm import selectinload

from cmsshop.services.payments.base import NotConfigured
from cmsshop.services.payments.registry import PaymentProviders, SimulatedOrder
from cmsshop.services.payments.settings import provider_config


def cmd_simulate_payment(env, args) -> int:
    from cmsshop.models import Order, User

    registry = env["registry"]
    settings = registry.settings
    if settings["cmsshop.environment"] == "production":
        print("refusing to simulate payments on a production site", file=sys.stderr)
        return 2
    request = env["request"]
    with request.tm:
        order = request.db.scalar(
            select(Order).where(Order.number == args.order).options(selectinload(Order.items))
        )
        if order is None:
            print(f"no order {args.order}", file=sys.stderr)
            return 1
        email = request.db.scalar(select(User.email).where(User.id == order.user_id))
        snapshot = SimulatedOrder(
            number=order.number,
            currency=order.currency,
            total=order.total,
            provider_checkout_id=order.provider_checkout_id,
            customer_email=email or "",
            items=[
                {"product": i.product_slug, "name": i.name, "amount": i.amount} for i in order.items
            ],
        )
        status, order_provider = order.status, order.provider
    name = args.provider or order_provider
    try:
        providers = request.find_service(PaymentProviders)
    except LookupError:  # neither the store nor a webhook module is on
        providers = PaymentProviders()
    spec = providers.get(name)
    if spec is None:
        known = ", ".join(providers.names()) or "none enabled"
        print(f"unknown provider {name!r} (known: {known})", file=sys.stderr)
        return 2
    if spec.simulator is None:
        print(f"the {name} plugin has no simulator", file=sys.stderr)
        return 2
    if status != "pending":
        print(f"note: order {snapshot.number} is {status}; sending anyway", file=sys.stderr)
    try:
        headers, body = spec.simulator(snapshot, provider_config(registry, spec))
    except NotConfigured as exc:
        print(f"cannot sign: {exc}", file=sys.stderr)
        return 2
    url = (args.url or settings["cmsshop.base_url"]).rstrip("/") + f"/api/webhooks/{name}"
    try:
        response = requests.post(url, data=body, headers=headers, timeout=30)
    except requests.RequestException as exc:
        print(f"could not reach {url}: {exc}\nIs the server running (make run)?", file=sys.stderr)
        return 1
    print(f"POST {url} -> {response.status_code}")
    try:
        print(json.dumps(response.json(), indent=2))
    except ValueError:
        print(response.text[:2000])
    return 0 if response.ok else 1


def register(subparsers) -> None:
    """Add this area's subcommands to the cmsshop-admin parser."""
    p = subparsers.add_parser(
        "simulate-payment",
        help="sign a provider 'payment completed' event for a pending order and POST it "
        "to the running server's webhook (development)",
    )
    p.add_argument("order", help="the order number, e.g. ORD-ABCDE-12345")
    p.add_argument("--provider", help="payment provider plugin (default: the order's)")
    p.add_argument("--url", help="base URL of the running server (default: cmsshop.base_url)")
    p.set_defaults(handler=cmd_simulate_payment)
