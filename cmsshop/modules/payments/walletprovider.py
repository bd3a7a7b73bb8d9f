"""The wallet provider plugin (PayPal's webhook scheme): registers its provider object
and its settings; the route POST /api/webhooks/walletprovider and everything else come
from the shared machinery in this package (see docs/walletprovider.md)."""

from __future__ import annotations

from cmsshop.services.payments.validators import api_base_validator, timeout_seconds
from cmsshop.services.payments.walletprovider import WalletProvider
from cmsshop.services.payments.walletprovider.certificates import validate_cert_hosts
from cmsshop.services.payments.walletprovider.config import (
    DEFAULT_API_BASE,
    DEFAULT_CERT_HOSTS,
    DEFAULT_TIMEOUT,
    DEFAULT_TOLERANCE,
)
from cmsshop.services.payments.walletprovider.simulate import simulate_payment
from cmsshop.settings import as_list, as_str


def includeme(config) -> None:
    config.include("cmsshop.modules.payments")
    settings = config.get_settings()
    # Days, not the card provider's minutes: PayPal redelivers for up to 3 days (the
    # ini or CMSSHOP_WALLETPROVIDER_SIGNATURE_TOLERANCE still override this default).
    settings.setdefault("cmsshop.walletprovider.signature_tolerance", DEFAULT_TOLERANCE)
    config.add_payment_provider(
        WalletProvider(),
        list_fields=("certHosts",),
        extra_settings={
            # Trusted roots (chain and TLS); empty: certifi's bundle.
            "caBundle": (as_str, ""),
            # Names the signing certificate may be issued for; empty: PayPal's two.
            "certSubjects": (as_list, []),
            "timeout": (timeout_seconds, DEFAULT_TIMEOUT),
        },
        validators={"apiBase": api_base_validator, "certHosts": validate_cert_hosts},
        simulator=simulate_payment,
    )
    if not settings.get("cmsshop.walletprovider.api_base"):
        settings["cmsshop.walletprovider.api_base"] = DEFAULT_API_BASE
    if not settings.get("cmsshop.walletprovider.cert_hosts"):
        settings["cmsshop.walletprovider.cert_hosts"] = list(DEFAULT_CERT_HOSTS)
