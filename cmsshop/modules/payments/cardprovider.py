"""The card provider plugin (Stripe's webhook scheme): registers its provider object;
the route POST /api/webhooks/cardprovider and everything else come from the shared
machinery in this package."""

from __future__ import annotations

from cmsshop.services.payments.cardprovider import (
    DEFAULT_API_BASE,
    DEFAULT_TIMEOUT,
    CardProvider,
    simulate_payment,
)
from cmsshop.services.payments.validators import (
    api_base_validator,
    prefix_validator,
    stripe_secret_key,
    timeout_seconds,
)


def includeme(config) -> None:
    config.include("cmsshop.modules.payments")
    config.add_payment_provider(
        CardProvider(),
        list_fields=("webhookSecrets",),
        extra_settings={"timeout": (timeout_seconds, DEFAULT_TIMEOUT)},
        validators={
            "webhookSecrets": prefix_validator("whsec_", "webhook secret"),
            "apiKey": stripe_secret_key,
            "apiBase": api_base_validator,
        },
        simulator=simulate_payment,
    )
    settings = config.get_settings()
    if not settings.get("cmsshop.cardprovider.api_base"):
        settings["cmsshop.cardprovider.api_base"] = DEFAULT_API_BASE
