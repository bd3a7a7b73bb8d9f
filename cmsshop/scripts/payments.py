"""cmsshop-admin subcommands of the payments area.

``simulate-payment ORDER_NUMBER [--provider NAME] [--url URL]`` builds a realistic
"payment completed" event for a pending order, signs it with the provider's configured
webhook secret and POSTs it to the running server's real webhook route -- so a purchase
can be completed with ``make run`` and no provider account. Each provider plugs in its
own event builder and signer: ``config.add_payment_provider(..., simulator=fn)``
(services.payments.simulation, shared with the sandbox page's "Simulate payment" button).
Its first line names the ini file in use (``announce_ini``).
"""

from __future__ import annotations

import json
import sys

import requests

from cmsshop.services.payments import simulation
from cmsshop.services.payments.registry import PaymentProviders


def cmd_simulate_payment(env, args) -> int:
    registry = env["registry"]
    settings = registry.settings
    if not simulation.allowed(settings):
        print("refusing to simulate payments on a production site", file=sys.stderr)
        return 2
    request = env["request"]
    with request.tm:
        order = simulation.find_order(request.db, args.order)
        if order is None:
            print(f"no order {args.order}", file=sys.stderr)
            return 1
        snapshot = simulation.order_snapshot(request.db, order)
        status, order_provider = order.status, order.provider
    name = args.provider or order_provider
    try:
        providers = request.find_service(PaymentProviders)
    except LookupError:  # neither the store nor a webhook module is on
        providers = PaymentProviders()
    if status != "pending":
        print(f"note: order {snapshot.number} is {status}; sending anyway", file=sys.stderr)
    try:
        delivery = simulation.simulated_delivery(registry, providers, name, snapshot)
    except simulation.CannotSimulate as exc:
        print(exc, file=sys.stderr)
        return 2
    url = (args.url or settings["cmsshop.base_url"]).rstrip("/") + delivery.path
    try:
        response = requests.post(url, data=delivery.body, headers=delivery.headers, timeout=30)
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
    # The ini first: the sandbox page's command names development.ini, and the event is
    # built and signed with whatever database and secrets the named file sets.
    p.set_defaults(handler=cmd_simulate_payment, announce_ini=True)
