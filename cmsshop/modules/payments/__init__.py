"""Shared webhook machinery; each provider is one small plugin module beside this file.

A plugin module (``cmsshop/modules/payments/<name>.py``, its operator name listed
in KNOWN_MODULES and IMPLEMENTED_BY, switched on in ``cmsshop.modules``) only registers
its provider object::

    from cmsshop.services.payments.myprovider import MyProvider

    def includeme(config):
        config.include("cmsshop.modules.payments")
        config.add_payment_provider(
            MyProvider(),                        # implements services.payments.base
            list_fields=("webhookSecrets",),     # settings fields holding lists
            extra_settings={"timeout": (float, 10.0)},   # ini-only config keys
            validators={"apiBase": api_base_validator},  # admin PUT checks
            simulator=simulate_payment,          # cmsshop-admin simulate-payment
        )

Everything else is shared and appears with the first registered provider: the route
``POST /api/webhooks/<name>``, its ini settings (``cmsshop.<name>.<snake_field>``, env
``CMSSHOP_<NAME>_<SNAKE_FIELD>``, plus ``cmsshop.<name>.signature_tolerance``), checkout
with ``"provider": "<name>"``, the event log, exactly-once fulfilment, the admin settings
area, the event log admin routes, manual fulfilment and simulate-payment.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pyramid.exceptions import ConfigurationError

from cmsshop.services.payments.base import PaymentProvider
from cmsshop.services.payments.events.log import REJECTED_IP_POLICY
from cmsshop.services.payments.registry import (
    REGISTRY_KEY,
    FieldValidator,
    ProviderSpec,
    Simulator,
)
from cmsshop.services.payments.settings import DEFAULT_SIGNATURE_TOLERANCE, env_name, ini_name
from cmsshop.settings import as_bool, as_float, as_int, as_list, as_str, declare, one_of
from cmsshop.views.checkout import openapi as checkout
from cmsshop.views.payments import admin_pages, openapi, webhooks

MACHINERY_KEY = "cmsshop.payments.machinery_included"
ORDER_PAGES = "cmsshop.views.payments.admin_orders_pages"
REFUND_PAGES = "cmsshop.views.payments.admin_refund_pages"

SETTINGS = {
    # Skip the provider API check of a payment and trust the verified event's own
    # object (development only: production refuses to start with it on).
    "cmsshop.payments.trust_verified_events": (
        as_bool,
        False,
        "CMSSHOP_PAYMENTS_TRUST_VERIFIED_EVENTS",
    ),
    # How a verified delivery is acted on: "inline" (confirmed and fulfilled in the
    # webhook request, answered "processed"), or "queued" (logged and answered "queued"
    # at once; `cmsshop-admin worker` confirms and fulfils it, retrying with backoff).
    # Empty: queued in production, inline otherwise.
    "cmsshop.payments.webhook_processing": (
        one_of("", "inline", "queued"),
        "",
        "CMSSHOP_PAYMENTS_WEBHOOK_PROCESSING",
    ),
    # Seconds the worker waits after a pass that found no due payment event.
    "cmsshop.payments.worker_interval": (as_float, 1.0, None),
    # Seconds a process keeps the providers' saved settings before reading them again
    # (a save empties the saving process's copy at once; 0: read on every delivery).
    "cmsshop.payments.config_ttl": (as_float, 5.0, None),
    # Where the provider sends the buyer back; {order} becomes the order number. Only a
    # webhook ever marks an order paid, never this return.
    "cmsshop.payments.success_url": (as_str, "", None),
    "cmsshop.payments.cancel_url": (as_str, "", None),
    # Deliveries failing verification logged per client address and window; past it
    # the address gets 429 and nothing is written (anyone can send a bad signature).
    "cmsshop.webhooks.rejected_per_ip": (as_int, 30, "CMSSHOP_WEBHOOKS_REJECTED_PER_IP"),
    "cmsshop.webhooks.rejected_window": (as_int, 600, "CMSSHOP_WEBHOOKS_REJECTED_WINDOW"),
}


# The payment admin area (KNOWN_MODULES' shared webhook prefixes): JSON routes, then the
# pages (/admin/payments) on the same services. Each provider's POST /api/webhooks/<name>
# is added by add_payment_provider.
ROUTES = {
    "payments.admin_settings": "/api/admin/settings/payments",
    "payments.admin_settings_test": "/api/admin/settings/payments/{provider}/test",
    "payments.admin_events": "/api/admin/payment-events",
    "payments.admin_event": "/api/admin/payment-events/{id}",
    "payments.admin_event_reprocess": "/api/admin/payment-events/{id}/reprocess",
    "payments.admin_order_fulfil": "/api/admin/orders/{number}/fulfil",
    "payments.admin_order_refunds": "/api/admin/orders/{number}/refunds",
    "pages.admin_payments": "/admin/payments",
    "pages.admin_payments_rotate": "/admin/payments/rotate/{provider}",
    "pages.admin_payments_connect": "/admin/payments/connect/{provider}",
    "pages.admin_payments_test": "/admin/payments/test/{provider}",
    "pages.admin_payment_events": "/admin/payments/events",
    "pages.admin_payment_event": "/admin/payments/events/{id}",
    "pages.admin_payment_event_reprocess": "/admin/payments/events/{id}/reprocess",
}


def add_payment_provider(
    config,
    provider: PaymentProvider,
    *,
    list_fields: Iterable[str] = (),
    extra_settings: Mapping[str, tuple[Callable[[Any], Any], Any]] | None = None,
    validators: Mapping[str, FieldValidator] | None = None,
    simulator: Simulator | None = None,
) -> None:
    """Config directive: register ``provider`` with the shared payment machinery.

    ``list_fields``: settings fields whose value is a list of strings (ini: whitespace
    separated). ``extra_settings``: config keys read only from the ini/environment,
    ``{jsonName: (coercer, default)}``. ``validators``: ``{field: callable(value)}``
    raising ValueError for the admin settings PUT. ``simulator``: ``(SimulatedOrder,
    config) -> (headers, body)`` building a signed "payment completed" delivery.
    """
    name = provider.name
    if not name.isidentifier() or name != name.lower():
        raise ConfigurationError(f"payment provider name {name!r} must be lower-case letters")
    registered = config.registry[REGISTRY_KEY]
    if name in registered:
        raise ConfigurationError(f"payment provider {name!r} is registered twice")
    list_fields = frozenset(list_fields)
    unknown = list_fields - set(provider.settings_fields)
    if unknown:
        raise ConfigurationError(f"{name}: list_fields not in settings_fields: {sorted(unknown)}")
    extra_settings = dict(extra_settings or {})
    spec = {
        ini_name(name, field): (
            as_list if field in list_fields else as_str,
            [] if field in list_fields else "",
            env_name(name, field),
        )
        for field in provider.settings_fields
    }
    spec[ini_name(name, "signatureTolerance")] = (
        as_int,
        DEFAULT_SIGNATURE_TOLERANCE,
        env_name(name, "signatureTolerance"),
    )
    for field, (coercer, default) in extra_settings.items():
        spec[ini_name(name, field)] = (coercer, default, env_name(name, field))
    declare(config.get_settings(), spec)
    registered.add(
        ProviderSpec(
            provider=provider,
            list_fields=list_fields,
            extra_settings=extra_settings,
            validators=dict(validators or {}),
            simulator=simulator,
        )
    )

    route = f"webhooks.{name}"
    config.add_route(route, f"/api/webhooks/{name}")
    config.add_view(
        webhooks.receive_webhook,
        route_name=route,
        request_method="POST",
        renderer="json",
        require_csrf=False,
    )
    config.add_openapi(paths=openapi.webhook_paths(name))
    # The settings schema lists every registered provider's fields.
    schemas = config.registry.setdefault("cmsshop.payments.settings_schemas", {})
    schemas[name] = openapi.provider_settings_schema(provider, list_fields)
    config.add_openapi(schemas=openapi.settings_schemas(copy.deepcopy(schemas)))


def check_production(settings) -> None:
    if (
        settings["cmsshop.environment"] == "production"
        and settings["cmsshop.payments.trust_verified_events"]
    ):
        raise ConfigurationError(
            "cmsshop.payments.trust_verified_events is on in production: payments must be "
            "confirmed with the provider API. Remove the setting (or set it to false)."
        )


def includeme(config) -> None:
    """The shared part, included once by whichever provider plugin comes first."""
    if config.registry.get(MACHINERY_KEY):
        return
    config.registry[MACHINERY_KEY] = True
    settings = config.get_settings()
    declare(settings, SETTINGS)
    check_production(settings)
    if not settings["cmsshop.payments.webhook_processing"]:
        production = settings["cmsshop.environment"] == "production"
        settings["cmsshop.payments.webhook_processing"] = "queued" if production else "inline"
    if settings["cmsshop.payments.config_ttl"] < 0:
        raise ConfigurationError("cmsshop.payments.config_ttl must be 0 or more")
    if settings["cmsshop.payments.worker_interval"] < 0.05:
        raise ConfigurationError("cmsshop.payments.worker_interval must be at least 0.05")
    config.add_rate_policy(
        REJECTED_IP_POLICY,
        settings["cmsshop.webhooks.rejected_per_ip"],
        settings["cmsshop.webhooks.rejected_window"],
    )
    config.include("cmsshop.services.payments.registry")
    config.add_directive("add_payment_provider", add_payment_provider)
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.add_openapi(
        paths=openapi.OPENAPI_PATHS,
        schemas={
            **openapi.OPENAPI_SCHEMAS,
            **openapi.WEBHOOK_SCHEMAS,
            # Manual fulfilment answers with the order, as checkout does.
            **checkout.OPENAPI_SCHEMAS,
        },
    )
    config.add_page_notices(admin_pages.NOTICES)
    # The admin order (and refund) pages are always on (cmsshop.modules.payments.orders).
    config.scan("cmsshop.views.payments", ignore=[ORDER_PAGES, REFUND_PAGES])
