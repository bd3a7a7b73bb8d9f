"""The licensing module: activate / validate / deactivate for product runtimes, signed
leases, and the JWKS that verifies them. Settings are documented in docs/licensing.md."""

from __future__ import annotations

from typing import Any

from pyramid.exceptions import ConfigurationError

from cmsshop import openapi as oa
from cmsshop.services.licensing.calls import LicensingPolicy
from cmsshop.services.licensing.signing import signer_from_settings
from cmsshop.settings import as_bool, as_int, as_list, as_str, declare
from cmsshop.views import licensing as views


def as_rate(value: Any) -> tuple[int, int]:
    """``"120/60"`` -> (120 requests, per 60 seconds)."""
    if isinstance(value, tuple):
        return value
    count, _, seconds = str(value).strip().partition("/")
    limit, window = int(count), int(seconds)
    if limit < 1 or window < 1:
        raise ValueError("use COUNT/SECONDS with both at least 1, e.g. 120/60")
    return limit, window


def as_float(value: Any) -> float:
    return float(str(value).strip())


def as_optional_int(value: Any) -> int | None:
    text = str(value if value is not None else "").strip()
    return int(text) if text else None


def as_auto_bool(value: Any) -> bool | None:
    """``auto`` (None: decided by the environment) or a boolean."""
    if value is None or str(value).strip().lower() == "auto":
        return None
    return as_bool(value)


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
    "cmsshop.license_lease_lifetime": (as_int, 7 * 86400, None),
    "cmsshop.license_staging_cap": (as_int, 3, None),
    "cmsshop.license_staging_prefixes": (as_list, ["staging.", "stage."], None),
    "cmsshop.license_staging_suffixes": (as_list, [], None),
    "cmsshop.license_nonce_window": (as_int, 86400, None),
    "cmsshop.license_rate_per_ip": (as_rate, (120, 60), None),
    "cmsshop.license_rate_per_license": (as_rate, (30, 60), None),
    "cmsshop.license_rate_churn": (as_rate, (20, 3600), None),
    "cmsshop.license_retry_after": (as_int, 30, None),
}


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
    for name in ("cmsshop.license_staging_cap", "cmsshop.license_nonce_window"):
        if settings[name] < 0:
            raise ConfigurationError(f"{name} must not be negative")
    if not 0 < settings["cmsshop.license_remote_timeout"] <= 30:
        raise ConfigurationError("cmsshop.license_remote_timeout must be in (0, 30] seconds")


# --- OpenAPI -------------------------------------------------------------------------------

NONCE_PATTERN = "^[A-Za-z0-9_-]{16,128}$"

LICENSE_REQUEST = {
    "type": "object",
    "required": ["product", "licenseKey", "domain", "fingerprint", "nonce"],
    "additionalProperties": False,
    "properties": {
        "product": {"type": "string", "minLength": 1, "maxLength": 100, "description": "slug"},
        "licenseKey": {"type": "string", "minLength": 1, "maxLength": 64},
        "domain": {
            "type": "string",
            "minLength": 1,
            "maxLength": 2048,
            "description": "The site's URL or host name; normalised by the server.",
        },
        "fingerprint": {
            "type": "string",
            "minLength": 8,
            "maxLength": 256,
            "description": "Installation id.",
        },
        "nonce": {
            "type": "string",
            "pattern": NONCE_PATTERN,
            "description": "Fresh random value, echoed in the lease.",
        },
    },
}

DATE_TIME_OR_NULL = {"type": ["string", "null"], "format": "date-time"}

LICENSE_RESPONSE = {
    "type": "object",
    "required": ["license", "activation", "lease", "leaseExpiresAt"],
    "properties": {
        "deactivated": {"type": "boolean"},
        "license": {
            "type": "object",
            "required": ["product", "status", "expiresAt", "maxActivations", "activationsUsed"],
            "properties": {
                "product": {"type": "string"},
                "status": {"type": "string", "enum": ["active", "suspended", "revoked", "expired"]},
                "expiresAt": DATE_TIME_OR_NULL,
                "maxActivations": {"type": "integer"},
                "activationsUsed": {"type": "integer"},
            },
        },
        "activation": {
            "type": "object",
            "required": ["id", "domain", "environment", "activatedAt", "lastValidatedAt"],
            "properties": {
                "id": {"type": "integer"},
                "domain": {"type": "string"},
                "environment": {"type": "string", "enum": ["production", "staging", "local"]},
                "active": {"type": "boolean"},
                "activatedAt": {"type": "string", "format": "date-time"},
                "lastValidatedAt": DATE_TIME_OR_NULL,
                "deactivatedAt": DATE_TIME_OR_NULL,
            },
        },
        "lease": {
            "type": "string",
            "description": "Compact JWS (EdDSA/Ed25519, typ license-lease+jwt); verify it "
            "with a pinned copy of /api/license/jwks.json.",
        },
        "leaseExpiresAt": {"type": "string", "format": "date-time"},
    },
}

JWKS = {
    "type": "object",
    "required": ["keys"],
    "properties": {
        "keys": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["kty", "crv", "x", "kid", "alg", "use"],
                "properties": {
                    "kty": {"const": "OKP"},
                    "crv": {"const": "Ed25519"},
                    "x": {"type": "string"},
                    "kid": {"type": "string"},
                    "alg": {"const": "EdDSA"},
                    "use": {"const": "sig"},
                },
            },
        }
    },
}

ERRORS = oa.errors(403, 404, 409, 415, 422, 429, 503)


def _post(summary: str, responses: dict) -> dict:
    op = oa.operation(summary, responses, body=oa.ref("LicenseRequest"), tags=["licensing"])
    op["requestBody"]["content"]["application/x-www-form-urlencoded"] = {
        "schema": oa.ref("LicenseRequest")
    }
    op["description"] = (
        "No session or CSRF token: the license key authenticates. The body is JSON or a "
        "url-encoded form with the same five fields. Errors switch on `code`: "
        "license_not_found, product_mismatch, license_expired, license_suspended, "
        "license_revoked, activation_not_found, activation_limit_reached (with "
        "activationsUsed and maxActivations), nonce_reused, rate_limited (Retry-After), "
        "signing_unavailable (503, Retry-After; nothing was changed)."
    )
    return op


OPENAPI_PATHS = {
    "/api/license/activate": {
        "post": _post(
            "Bind an installation to a license (uses a seat unless it has one)",
            {
                **oa.ok(oa.ref("LicenseResult"), "Already active on this domain (or moved)"),
                **oa.ok(oa.ref("LicenseResult"), "Activated", 201),
                **ERRORS,
            },
        )
    },
    "/api/license/validate": {
        "post": _post(
            "Check an activated installation and get a fresh lease",
            {**oa.ok(oa.ref("LicenseResult")), **ERRORS},
        )
    },
    "/api/license/deactivate": {
        "post": _post(
            "Free the installation's seat (idempotent); the lease records the deactivation",
            {**oa.ok(oa.ref("LicenseResult")), **ERRORS},
        )
    },
    "/api/license/jwks.json": {
        "get": oa.operation(
            "The public keys that verify leases (JWKS); pin a copy in your product",
            {**oa.ok(oa.ref("LeaseKeySet")), **oa.errors(503)},
            tags=["licensing"],
        )
    },
}

OPENAPI_SCHEMAS = {
    "LicenseRequest": LICENSE_REQUEST,
    "LicenseResult": LICENSE_RESPONSE,
    "LeaseKeySet": JWKS,
}


def includeme(config) -> None:
    settings = config.get_settings()
    declare(settings, SETTINGS)
    _check(settings)
    try:
        signer = signer_from_settings(settings)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"licensing: cannot set up the lease signer: {exc}") from exc
    # The signer and policy are per process; views read them from the registry.
    config.registry["cmsshop.lease_signer"] = signer
    config.registry["cmsshop.licensing_policy"] = LicensingPolicy.from_settings(settings)
    for name, setting in (
        (views.LICENSE_IP_POLICY, "cmsshop.license_rate_per_ip"),
        (views.LICENSE_KEY_POLICY, "cmsshop.license_rate_per_license"),
        (views.LICENSE_CHURN_POLICY, "cmsshop.license_rate_churn"),
    ):
        config.add_rate_policy(name, *settings[setting])
    config.add_route("licensing.activate", "/api/license/activate")
    config.add_route("licensing.validate", "/api/license/validate")
    config.add_route("licensing.deactivate", "/api/license/deactivate")
    config.add_route("licensing.jwks", "/api/license/jwks.json")
    config.add_openapi(paths=OPENAPI_PATHS, schemas=OPENAPI_SCHEMAS)
    config.scan("cmsshop.views.licensing")
