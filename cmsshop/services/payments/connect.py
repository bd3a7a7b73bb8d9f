"""Connecting a payment provider from the console: the seller-facing names, the fields
of the connect form, the webhook URL and event types to register at the provider, and
"Test connection" (one authenticated call with the stored credentials).

Test connection never raises for the provider's answer: it returns a ``ConnectionCheck``
saying what the provider said (the account, or why not), in words for the seller. No
credential appears in it nor in the log (errors carry the provider's status and error
code, never the request).
"""

from __future__ import annotations

import dataclasses
import logging
import urllib.parse
from collections.abc import Mapping
from typing import Any

import requests
import stripe

from cmsshop.models import FREE_PROVIDER
from cmsshop.services.payments import cardprovider
from cmsshop.services.payments.walletprovider import config as wallet_config

log = logging.getLogger(__name__)

CARD, WALLET = cardprovider.NAME, wallet_config.NAME
PAYPAL_LIVE = wallet_config.DEFAULT_API_BASE
PAYPAL_SANDBOX = "https://api-m.sandbox.paypal.com"

SELLER_NAMES = {
    CARD: "Card payments (Stripe)",
    WALLET: "PayPal",
    FREE_PROVIDER: "None (free order)",
}

FIELD_LABELS = {
    CARD: {
        "apiKey": "Secret key",
        "webhookSecrets": "Webhook signing secrets",
        "apiBase": "API address",
    },
    WALLET: {
        "clientId": "Client ID",
        "clientSecret": "Client secret",
        "webhookId": "Webhook ID",
        "apiBase": "API address",
        "certHosts": "Certificate hosts",
    },
}

# The fields of each provider's connect form, in order (the others stay server settings).
FORM_FIELDS = {
    CARD: ("apiKey", "webhookSecrets"),
    WALLET: ("clientId", "clientSecret", "webhookId"),
}

HINTS = {
    (CARD, "apiKey"): "Starts with sk_live_ or sk_test_ (Stripe Dashboard, Developers, API keys).",
    (CARD, "webhookSecrets"): (
        "Starts with whsec_ (shown on the webhook endpoint at Stripe). Several, separated by "
        "spaces: the first is the current one."
    ),
    (WALLET, "clientId"): "From your REST app at developer.paypal.com (Apps & Credentials).",
    (WALLET, "clientSecret"): "From the same REST app as the client ID.",
    (WALLET, "webhookId"): "Shown at PayPal once you add the webhook below to your REST app.",
}

# The event types the webhook code acts on (cardprovider.interpret, WalletProvider.interpret).
WEBHOOK_EVENTS = {
    CARD: (
        "checkout.session.completed",
        "checkout.session.async_payment_succeeded",
        "checkout.session.async_payment_failed",
        "checkout.session.expired",
        "payment_intent.succeeded",
        "charge.refunded",
        "charge.dispute.created",
        "charge.dispute.closed",
    ),
    WALLET: (
        "CHECKOUT.ORDER.APPROVED",
        "PAYMENT.CAPTURE.COMPLETED",
        "PAYMENT.CAPTURE.PENDING",
        "PAYMENT.CAPTURE.DENIED",
        "PAYMENT.CAPTURE.DECLINED",
        "PAYMENT.CAPTURE.REFUNDED",
        "PAYMENT.CAPTURE.REVERSED",
        "CUSTOMER.DISPUTE.CREATED",
        "CUSTOMER.DISPUTE.RESOLVED",
    ),
}


def seller_name(provider: str) -> str:
    return SELLER_NAMES.get(provider, provider.replace("_", " ").capitalize())


def field_label(provider: str, field: str) -> str:
    label = FIELD_LABELS.get(provider, {}).get(field)
    if label:
        return label
    words = "".join(" " + c.lower() if c.isupper() else c for c in field)
    return words.capitalize()


def webhook_url(settings: Mapping[str, Any], provider: str) -> str:
    base = str(settings.get("cmsshop.base_url") or "").rstrip("/")
    return f"{base}/api/webhooks/{provider}"


def paypal_mode(api_base: str) -> str:
    """``live``, ``sandbox`` or ``other`` (a custom API address, such as a test fake)."""
    base = (api_base or PAYPAL_LIVE).rstrip("/")
    host = (urllib.parse.urlsplit(base).hostname or "").lower()
    if host in ("api-m.paypal.com", "api.paypal.com"):
        return "live"
    if host in ("api-m.sandbox.paypal.com", "api.sandbox.paypal.com"):
        return "sandbox"
    return "other"


MODE_BASES = {"live": PAYPAL_LIVE, "sandbox": PAYPAL_SANDBOX}


# --- test connection -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ConnectionCheck:
    """The outcome of Test connection. ``kind``: ok, not_configured, bad_credentials,
    refused, timeout, unreachable, unsupported."""

    provider: str
    ok: bool
    kind: str
    message: str
    mode: str | None = None
    account: dict[str, Any] | None = None


def check_connection(provider: str, config: Mapping[str, Any]) -> ConnectionCheck:
    if provider == CARD:
        result = _check_stripe(config)
    elif provider == WALLET:
        result = _check_paypal(config)
    else:
        result = ConnectionCheck(
            provider, False, "unsupported", "This provider has no connection test."
        )
    log.info("test connection %s: %s", provider, result.kind)
    return result


def _stripe_mode(key: str) -> str:
    return "live" if "_live_" in key else "test"


def _check_stripe(config: Mapping[str, Any]) -> ConnectionCheck:
    key = str(config.get("apiKey") or "").strip()
    if not key:
        return ConnectionCheck(CARD, False, "not_configured", "No secret key is saved yet.")
    base = (str(config.get("apiBase") or "") or cardprovider.DEFAULT_API_BASE).rstrip("/")
    timeout = float(config.get("timeout") or cardprovider.DEFAULT_TIMEOUT)
    client = stripe.StripeClient(
        key,
        base_addresses={"api": base},
        max_network_retries=0,
        http_client=stripe.RequestsClient(timeout=timeout),
    )
    mode = _stripe_mode(key)
    try:
        try:
            account = client.v1.accounts.retrieve_current().to_dict()
        except stripe.PermissionError:
            # A restricted key that may not read the account: the balance proves the key.
            client.v1.balance.retrieve()
            return ConnectionCheck(
                CARD,
                True,
                "ok",
                f"Connected to Stripe ({mode} mode); this restricted key may not read the "
                "account's details.",
                mode=mode,
            )
    except stripe.AuthenticationError as exc:
        return ConnectionCheck(
            CARD,
            False,
            "bad_credentials",
            f"Stripe refused the secret key (HTTP {exc.http_status or 401}): check that it is "
            "the whole secret key (sk_...), not the publishable key, and not rolled.",
            mode=mode,
        )
    except stripe.APIConnectionError as exc:
        return _network_failure(CARD, "Stripe", base, str(exc), mode, timeout)
    except stripe.StripeError as exc:
        status = getattr(exc, "http_status", None)
        return ConnectionCheck(
            CARD,
            False,
            "refused",
            f"Stripe answered HTTP {status or '?'}: {cardprovider._describe(exc)}",
            mode=mode,
        )
    profile = account.get("business_profile") or {}
    dashboard = (account.get("settings") or {}).get("dashboard") or {}
    name = profile.get("name") or dashboard.get("display_name") or ""
    shown = {
        "id": str(account.get("id") or "")[:255],
        "name": str(name)[:255],
        "country": str(account.get("country") or "")[:2],
    }
    named = f"{shown['name']} ({shown['id']})" if shown["name"] else shown["id"]
    country = f", {shown['country']}" if shown["country"] else ""
    return ConnectionCheck(
        CARD,
        True,
        "ok",
        f"Connected to Stripe account {named}{country}, {mode} mode.",
        mode=mode,
        account=shown,
    )


def _network_failure(
    provider: str, who: str, base: str, detail: str, mode: str | None, timeout: float
) -> ConnectionCheck:
    text = detail.lower()
    if "timeout" in text or "timed out" in text:
        return ConnectionCheck(
            provider,
            False,
            "timeout",
            f"{who} did not answer within {timeout:g} seconds ({base}); try again later.",
            mode=mode,
        )
    return ConnectionCheck(
        provider,
        False,
        "unreachable",
        f"Could not connect to {who} at {base}: the network or the provider is down.",
        mode=mode,
    )


def _check_paypal(config: Mapping[str, Any]) -> ConnectionCheck:
    base = wallet_config.api_base_of(config)
    mode = paypal_mode(base)
    where = {"live": "PayPal (live)", "sandbox": "the PayPal sandbox"}.get(
        mode, f"PayPal at {base}"
    )
    client_id = wallet_config.config_text(config, "clientId")
    secret = wallet_config.config_text(config, "clientSecret")
    if not client_id or not secret:
        return ConnectionCheck(
            WALLET,
            False,
            "not_configured",
            "The client ID and client secret are not both saved.",
            mode=mode,
        )
    connect, read = wallet_config.timeouts(config)
    try:
        response = requests.post(
            base + "/v1/oauth2/token",
            data={"grant_type": "client_credentials"},
            auth=(client_id, secret),
            headers={"Accept": "application/json"},
            timeout=(connect, read),
            verify=wallet_config.tls_verify(config),
            allow_redirects=False,
        )
    except requests.Timeout:
        return _network_failure(WALLET, where, base, "timeout", mode, read)
    except (requests.RequestException, OSError) as exc:
        return _network_failure(WALLET, where, base, type(exc).__name__, mode, read)
    try:
        data = response.json()
    except ValueError:
        data = {}
    data = data if isinstance(data, dict) else {}
    if response.status_code == 401:
        other = {"live": "sandbox", "sandbox": "live"}.get(mode)
        hint = f"; or they belong to a {other} app" if other else ""
        return ConnectionCheck(
            WALLET,
            False,
            "bad_credentials",
            f"{where} refused the client ID and secret (HTTP 401 "
            f"{str(data.get('error') or 'invalid_client')[:40]}): check both are copied "
            f"whole from the same REST app{hint}.",
            mode=mode,
        )
    if response.status_code != 200 or not data.get("access_token"):
        return ConnectionCheck(
            WALLET,
            False,
            "refused",
            f"{where} answered HTTP {response.status_code}"
            f"{' ' + str(data.get('error') or data.get('name'))[:60] if data else ''}.",
            mode=mode,
        )
    app_id = str(data.get("app_id") or "")[:255]
    account = {"appId": app_id}
    return ConnectionCheck(
        WALLET,
        True,
        "ok",
        f"Connected to {where}{f', app {app_id}' if app_id else ''}.",
        mode=mode,
        account=account,
    )
