"""The registered payment providers: what each plugin module told the shared machinery
(``config.add_payment_provider``), looked up by name.

One ``PaymentProviders`` object per app, a pyramid_services service: views ask
``request.find_service(PaymentProviders)`` and hand it (or one spec of it) to services.
It exists whatever modules are on (empty without a webhook module), so checkout can say
"no provider enabled" instead of failing."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from cmsshop.services.payments.base import PaymentProvider

# Config-time handle on the app's PaymentProviders (plugins add to it while included).
REGISTRY_KEY = "cmsshop.payment_providers"

# (value, config) -> headers, body: builds and signs a realistic "payment completed"
# delivery for a pending order (cmsshop-admin simulate-payment).
Simulator = Callable[["SimulatedOrder", Mapping[str, Any]], tuple[dict[str, str], bytes]]
# value -> None or raise ValueError(message for the admin)
FieldValidator = Callable[[Any], None]


@dataclasses.dataclass(frozen=True)
class SimulatedOrder:
    """What a simulator needs to know about the pending order it pays."""

    number: str
    currency: str
    total: int
    provider_checkout_id: str | None
    customer_email: str
    items: list[dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class ProviderSpec:
    """One registered provider and what the shared machinery needs to know about it."""

    provider: PaymentProvider
    list_fields: frozenset[str] = frozenset()
    extra_settings: Mapping[str, tuple[Callable[[Any], Any], Any]] = dataclasses.field(
        default_factory=dict
    )
    validators: Mapping[str, FieldValidator] = dataclasses.field(default_factory=dict)
    simulator: Simulator | None = None

    @property
    def name(self) -> str:
        return self.provider.name

    @property
    def fields(self) -> Mapping[str, bool]:
        return self.provider.settings_fields


class PaymentProviders:
    """The registered providers by name (empty when no webhook module is on)."""

    def __init__(self):
        self._specs: dict[str, ProviderSpec] = {}

    def add(self, spec: ProviderSpec) -> None:
        self._specs[spec.name] = spec

    def get(self, name: str) -> ProviderSpec | None:
        return self._specs.get(name)

    def names(self) -> list[str]:
        return sorted(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self):
        """The specs in name order."""
        return iter([self._specs[name] for name in self.names()])


def includeme(config) -> None:
    """Register the app's PaymentProviders once (checkout and the webhook machinery
    both include this)."""
    if REGISTRY_KEY in config.registry:
        return
    providers = PaymentProviders()
    config.registry[REGISTRY_KEY] = providers
    config.register_service(providers, PaymentProviders)
