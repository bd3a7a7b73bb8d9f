"""The licensing module: activate / validate / deactivate for product runtimes, signed
leases, and the JWKS that verifies them. Settings are documented in docs/licensing.md."""

from __future__ import annotations

from pyramid.exceptions import ConfigurationError

from cmsshop.services.licensing.counting import RATE_POLICY_SETTINGS
from cmsshop.services.licensing.records import LicensingPolicy
from cmsshop.services.licensing.signing import LeaseSigner, signer_from_settings
from cmsshop.settings import (
    as_auto_bool,
    as_float,
    as_int,
    as_list,
    as_optional_int,
    as_rate,
    as_str,
    declare,
)
from cmsshop.views.licensing import admin_pages, openapi

SETTINGS = {
    "cmsshop.license_signer": (as_str, "local", "CMSSHOP_LICENSE_SIGNER"),
    "cmsshop.license_key_dir": (as_str, "var/keys", "CMSSHOP_LICENSE_KEY_DIR"),
    "cmsshop.license_key_autocreate": (as_auto_bool, None, None),
    "cmsshop.license_key_check_interval": (as_float, 1.0, None),
    "cmsshop.license_remote_url": (as_str, "", "CMSSHOP_LICENSE_REMOTE_URL"),
    "cmsshop.license_remote_token": (as_str, "", "CMSSHOP_LICENSE_REMOTE_TOKEN"),
    "cmsshop.license_remote_token_header": (as_str, "X-Vault-Token", None),
    "cmsshop.license_remote_public_keys": (as_list, [], "CMSSHOP_LICENSE_REMOTE_PUBLIC_KEYS"),
    "cmsshop.license_remote_key_id": (as_str, "", None),
    "cmsshop.license_remote_key_version": (as_optional_int, None, None),
    "cmsshop.license_remote_timeout": (as_float, 2.0, None),
    "cmsshop.license_remote_deadline": (as_float, 5.0, None),
    "cmsshop.license_lease_lifetime": (as_int, 7 * 86400, None),
    "cmsshop.license_staging_cap": (as_int, 3, None),
    "cmsshop.license_staging_prefixes": (as_list, ["staging.", "stage."], None),
    "cmsshop.license_staging_suffixes": (as_list, [], None),
    "cmsshop.license_nonce_window": (as_int, 86400, None),
    "cmsshop.license_rate_per_ip": (as_rate, (120, 60), None),
    "cmsshop.license_rate_per_license": (as_rate, (30, 60), None),
    "cmsshop.license_rate_churn": (as_rate, (20, 3600), None),
    "cmsshop.license_retry_after": (as_int, 30, None),
    # remind-expiring: how many days ahead a license's expiry is announced by e-mail.
    "cmsshop.mail.expiry_reminder_days": (as_int, 14, None),
}


ROUTES = {
    "licensing.activate": "/api/license/activate",
    "licensing.validate": "/api/license/validate",
    "licensing.deactivate": "/api/license/deactivate",
    "licensing.jwks": "/api/license/jwks.json",
    # Update checks (download URLs need the dashboard module's signer and route).
    "licensing.update_check": "/api/license/update-check",
    # The admin side: JSON routes and the /admin/licenses pages (one service for both).
    "licensing.admin_licenses": "/api/admin/licenses",
    "licensing.admin_license": "/api/admin/licenses/{key}",
    "licensing.admin_license_action": "/api/admin/licenses/{key}/{action}",
    "pages.admin_licenses": "/admin/licenses",
    "pages.admin_license": "/admin/licenses/{key}",
    "pages.admin_license_action": "/admin/licenses/{key}/{action}",
    "pages.admin_license_deactivate": "/admin/licenses/{key}/activations/{activation}/deactivate",
}
# Offline activation (views/licensing/offline.py) is served from the customer's account:
# the dashboard module declares its routes and scans it.
OFFLINE_VIEWS = "cmsshop.views.licensing.offline"


def _check(settings) -> None:
    if settings["cmsshop.license_signer"] not in ("local", "remote"):
        raise ConfigurationError("cmsshop.license_signer must be `local` or `remote`")
    if settings["cmsshop.license_signer"] == "remote" and not (
        settings["cmsshop.license_remote_url"] and settings["cmsshop.license_remote_public_keys"]
    ):
        raise ConfigurationError(
            "cmsshop.license_signer = remote needs cmsshop.license_remote_url and "
            "cmsshop.license_remote_public_keys (the signer's Ed25519 public key)"
        )
    if settings["cmsshop.license_lease_lifetime"] < 60:
        raise ConfigurationError("cmsshop.license_lease_lifetime must be at least 60 seconds")
    if settings["cmsshop.mail.expiry_reminder_days"] < 1:
        raise ConfigurationError("cmsshop.mail.expiry_reminder_days must be at least 1")
    for name in ("cmsshop.license_staging_cap", "cmsshop.license_nonce_window"):
        if settings[name] < 0:
            raise ConfigurationError(f"{name} must not be negative")
    timeout = settings["cmsshop.license_remote_timeout"]
    if not 0 < timeout <= 30:
        raise ConfigurationError("cmsshop.license_remote_timeout must be in (0, 30] seconds")
    if not timeout <= settings["cmsshop.license_remote_deadline"] <= 60:
        raise ConfigurationError(
            "cmsshop.license_remote_deadline must be at least cmsshop.license_remote_timeout "
            "and at most 60 seconds"
        )


def includeme(config) -> None:
    settings = config.get_settings()
    declare(settings, SETTINGS)
    _check(settings)
    try:
        signer = signer_from_settings(settings)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"licensing: cannot set up the lease signer: {exc}") from exc
    # One signer and one policy per process, found by the views with find_service.
    config.register_service(signer, LeaseSigner)
    config.register_service(LicensingPolicy.from_settings(settings), LicensingPolicy)
    for name, setting in RATE_POLICY_SETTINGS.items():
        config.add_rate_policy(name, *settings[setting])
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.add_openapi(paths=openapi.OPENAPI_PATHS, schemas=openapi.OPENAPI_SCHEMAS)
    config.add_openapi(paths=openapi.UPDATE_CHECK_PATHS, schemas=openapi.UPDATE_CHECK_SCHEMAS)
    config.add_openapi(paths=openapi.ADMIN_PATHS, schemas=openapi.ADMIN_SCHEMAS)
    config.add_page_notices(admin_pages.NOTICES)
    config.scan("cmsshop.views.licensing", ignore=OFFLINE_VIEWS)
