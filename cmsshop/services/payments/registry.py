"""The registered payment providers: what each plugin module told the shared machinery
(``config.add_payment_provider``), looked up by name."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from cmsshop.services.payments.base import PaymentProvider

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


def providers(registry) -> dict[str, ProviderSpec]:
    """The registered providers by name (empty when no payment module is on)."""
    return registry.get(REGISTRY_KEY, {})


def find_provider(registry, name: str) -> ProviderSpec | None:
    return providers(registry).get(name)
