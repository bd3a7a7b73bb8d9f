"""The OpenAPI description of the licensing routes: activate, validate, deactivate and the
JWKS (``OPENAPI_*``), update checks (``UPDATE_CHECK_*``), the admin routes (``ADMIN_*``)
and offline activation (``OFFLINE_*``, added by the dashboard module, which serves it).
The limits the views enforce and the document states are defined here once."""

from __future__ import annotations

from cmsshop import openapi as oa
from cmsshop.models import LICENSE_STATUSES, RELEASE_CHANNELS
from cmsshop.services.licensing import admin as license_admin
from cmsshop.services.licensing.domains import ENVIRONMENTS
from cmsshop.services.licensing.features import MAX_FEATURES
from cmsshop.services.licensing.offline import MAX_CODE_LENGTH

# Limits and names the views enforce and the document states.
MAX_KEY_LENGTH = 64
LEASE_FILE_FORMAT = "cmsshop-offline-lease"
FORMATS = ("cmsshop", "wordpress")

NONCE_PATTERN = "^[A-Za-z0-9_-]{16,128}$"  # the request schema checks nonces with it


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
# Feature flags (services/licensing/features.py), sorted, also signed into the lease.
FEATURES = {
    "type": "array",
    "maxItems": 32,
    "items": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_.-]{0,39}$"},
}

LICENSE_RESPONSE = {
    "type": "object",
    "required": ["license", "activation", "lease", "leaseExpiresAt"],
    "properties": {
        "deactivated": {"type": "boolean"},
        "license": {
            "type": "object",
            "required": [
                "product",
                "status",
                "expiresAt",
                "maxActivations",
                "activationsUsed",
                "features",
            ],
            "properties": {
                "product": {"type": "string"},
                "status": {"type": "string", "enum": list(LICENSE_STATUSES)},
                "expiresAt": DATE_TIME_OR_NULL,
                "maxActivations": {"type": "integer"},
                "activationsUsed": {"type": "integer"},
                "features": FEATURES,
            },
        },
        "activation": {
            "type": "object",
            "required": ["id", "domain", "environment", "activatedAt", "lastValidatedAt"],
            "properties": {
                "id": {"type": "integer"},
                "domain": {"type": "string"},
                "environment": {"type": "string", "enum": list(ENVIRONMENTS)},
                "active": {"type": "boolean"},
                "activatedAt": {"type": "string", "format": "date-time"},
                "lastValidatedAt": DATE_TIME_OR_NULL,
                "deactivatedAt": DATE_TIME_OR_NULL,
                "seatHeldUntil": {
                    **DATE_TIME_OR_NULL,
                    "description": "Until when the seat stays counted even when "
                    "deactivated: the expiry of the installation's last offline lease",
                },
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
        "activationsUsed, maxActivations and seatsHeldUntil: when the first seat held by "
        "a deactivated offline installation frees), nonce_reused, rate_limited (Retry-After), "
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


# --- update checks ---------------------------------------------------------------------------

UPDATE_CHECK_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["product", "licenseKey", "domain", "fingerprint", "currentVersion"],
    "properties": {
        **{
            name: schema
            for name, schema in LICENSE_REQUEST["properties"].items()
            if name != "nonce"
        },
        "nonce": {**LICENSE_REQUEST["properties"]["nonce"], "description": "optional"},
        "currentVersion": {"type": "string", "minLength": 1, "maxLength": 50},
        "channel": {"type": "string", "enum": list(RELEASE_CHANNELS), "default": "stable"},
    },
}
NULLABLE_STRING = {"type": ["string", "null"]}
UPDATE_CHECK_RESULT = {
    "type": "object",
    "description": (
        "The default format. With ?format=wordpress the answer is instead the object a "
        "WordPress plugin's update checker reads (slug, new_version, package, url, "
        "requires, requires_php, tested, sections.changelog), or {} when up to date."
    ),
    "required": ["status", "product", "currentVersion", "channel", "licenseExpired", "release"],
    "properties": {
        "status": {"type": "string", "enum": ["update_available", "up_to_date"]},
        "product": {"type": "string"},
        "currentVersion": {"type": "string"},
        "channel": {"type": "string", "enum": list(RELEASE_CHANNELS)},
        "licenseExpired": {
            "type": "boolean",
            "description": "true: only releases published before the expiry are offered",
        },
        "release": {
            "type": ["object", "null"],
            "required": [
                "version",
                "channel",
                "releasedAt",
                "changelogHtml",
                "requires",
                "fileName",
                "size",
                "sha256",
                "downloadUrl",
                "downloadUrlExpiresAt",
            ],
            "properties": {
                "version": {"type": "string"},
                "channel": {"type": "string", "enum": list(RELEASE_CHANNELS)},
                "releasedAt": {"type": "string", "format": "date-time"},
                "changelogHtml": {"type": "string"},
                "requires": {
                    "type": "object",
                    "properties": {
                        "platform": NULLABLE_STRING,
                        "php": NULLABLE_STRING,
                        "testedUpTo": NULLABLE_STRING,
                    },
                },
                "fileName": {"type": "string"},
                "size": {"type": "integer"},
                "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                "downloadUrl": {
                    **NULLABLE_STRING,
                    "description": "Signed, short-lived (cmsshop.download_url_ttl)",
                },
                "downloadUrlExpiresAt": {**NULLABLE_STRING, "format": "date-time"},
                "downloadUnavailable": {
                    "type": "string",
                    "description": "Why downloadUrl is null",
                },
            },
        },
    },
}


def _update_check_operation() -> dict:
    op = oa.operation(
        "The newest release this license may install, newer than currentVersion "
        "(versions compared by the product's scheme; an expired license sees releases "
        "published before its expiry only; channel beta sees stable and beta)",
        {**oa.ok(oa.ref("UpdateCheckResult")), **oa.errors(403, 404, 415, 422, 429)},
        body=oa.ref("UpdateCheckRequest"),
        params=[
            oa.query_param(
                "format",
                {"type": "string", "enum": list(FORMATS), "default": "cmsshop"},
                "wordpress: the answer shape of a WordPress plugin update checker",
            )
        ],
        tags=["licensing"],
    )
    op["requestBody"]["content"]["application/x-www-form-urlencoded"] = {
        "schema": oa.ref("UpdateCheckRequest")
    }
    return op


UPDATE_CHECK_PATHS = {"/api/license/update-check": {"post": _update_check_operation()}}
UPDATE_CHECK_SCHEMAS = {
    "UpdateCheckRequest": UPDATE_CHECK_REQUEST,
    "UpdateCheckResult": UPDATE_CHECK_RESULT,
}


# --- admin routes ----------------------------------------------------------------------------

LICENSE_SUMMARY = {
    "type": "object",
    "required": [
        "key",
        "status",
        "product",
        "customer",
        "maxActivations",
        "activationsUsed",
        "features",
        "expiresAt",
        "createdAt",
    ],
    "properties": {
        "key": {"type": "string"},
        "status": {"type": "string", "enum": list(LICENSE_STATUSES)},
        "product": {"type": "string"},
        "customer": {
            "type": ["object", "null"],
            "properties": {
                "id": {"type": "integer"},
                "email": {"type": "string"},
                "name": {"type": "string"},
            },
        },
        "maxActivations": {"type": "integer", "minimum": 0},
        "activationsUsed": {"type": "integer", "minimum": 0},
        "features": FEATURES,
        "expiresAt": DATE_TIME_OR_NULL,
        "createdAt": {"type": "string", "format": "date-time"},
    },
}
LICENSE_DETAIL = {
    "type": "object",
    "required": [*LICENSE_SUMMARY["required"], "activations", "audit"],
    "properties": {
        **LICENSE_SUMMARY["properties"],
        "activations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "domain": {"type": "string"},
                    "environment": {"type": "string"},
                    "active": {"type": "boolean"},
                    "activatedAt": DATE_TIME_OR_NULL,
                    "lastValidatedAt": DATE_TIME_OR_NULL,
                    "deactivatedAt": DATE_TIME_OR_NULL,
                },
            },
        },
        "audit": {
            "type": "array",
            "description": "Newest first, at most 200 entries.",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "createdAt": {"type": "string", "format": "date-time"},
                    "action": {"type": "string"},
                    "outcome": {"type": "string"},
                    "adminId": {"type": ["integer", "null"]},
                    "adminEmail": {"type": ["string", "null"]},
                    "detail": {"type": ["string", "null"]},
                    "domain": {"type": ["string", "null"]},
                    "ip": {"type": "string"},
                },
            },
        },
    },
}
KEY_PARAM = oa.path_param("key", {"type": "string", "minLength": 1, "maxLength": MAX_KEY_LENGTH})
ADMIN_PATHS = {
    "/api/admin/licenses": {
        "get": oa.operation(
            "Licenses, newest first; q matches a key, a customer email or an activation domain",
            {**oa.ok(oa.page_of(oa.ref("AdminLicenseSummary"))), **oa.errors(401, 403, 422)},
            params=[
                oa.query_param("q", {"type": "string", "maxLength": 320}),
                *oa.PAGING_PARAMS,
            ],
            tags=["admin", "licensing"],
        )
    },
    "/api/admin/licenses/{key}": {
        "get": oa.operation(
            "One license with its activations and audit log",
            {**oa.ok(oa.ref("AdminLicense")), **oa.errors(401, 403, 404)},
            params=[KEY_PARAM],
            tags=["admin", "licensing"],
        )
    },
    "/api/admin/licenses/{key}/{action}": {
        "post": oa.operation(
            "Change a license by hand: suspend, reinstate, revoke (final), extend (days or "
            "until), seats (maxActivations), reset (deactivate every activation), features "
            "(the license's whole list of feature flags, signed into its next leases). Each "
            "change is written to the audit log with the admin; 409 license_action_refused "
            "when the action does not fit the license's status.",
            {**oa.ok(oa.ref("AdminLicense")), **oa.errors(401, 403, 404, 409, 415, 422)},
            body={
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "days": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": license_admin.MAX_EXTEND_DAYS,
                        "description": "extend: this many days more",
                    },
                    "until": {
                        "type": "string",
                        "format": "date",
                        "description": "extend: to the end of this day (UTC)",
                    },
                    "maxActivations": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": license_admin.MAX_SEATS,
                        "description": "seats: the new seat limit",
                    },
                    "features": {
                        **FEATURES,
                        "maxItems": MAX_FEATURES,
                        "description": "features: the license's feature flags (the whole list)",
                    },
                },
            },
            body_required=False,
            params=[
                KEY_PARAM,
                oa.path_param("action", {"type": "string", "enum": list(license_admin.ACTIONS)}),
            ],
            csrf=True,
            tags=["admin", "licensing"],
        )
    },
}
ADMIN_SCHEMAS = {"AdminLicenseSummary": LICENSE_SUMMARY, "AdminLicense": LICENSE_DETAIL}


# --- offline activation ----------------------------------------------------------------------

OFFLINE_PATHS = {
    "/api/dashboard/licenses/{key}/offline-activation": {
        "post": oa.operation(
            "Activate an installation with no network from its request code (CMSOFF1...): "
            "the same seat rules, nonce and license checks as activate, on your own license; "
            "answers the lease file (?download=1: as an attachment). 422 on requestCode for "
            "a damaged, truncated or foreign code; 404 license_not_found for a key that is "
            "not yours; 409 nonce_reused for a code used before.",
            {
                **oa.ok(oa.ref("OfflineLeaseFile")),
                **oa.errors(401, 403, 404, 409, 415, 422, 429, 503),
            },
            body={
                "type": "object",
                "additionalProperties": False,
                "required": ["requestCode"],
                "properties": {"requestCode": {"type": "string", "maxLength": MAX_CODE_LENGTH * 2}},
            },
            params=[
                oa.path_param("key", {"type": "string", "minLength": 1, "maxLength": 64}),
                oa.query_param("download", {"type": "string", "enum": ["1"]}),
            ],
            csrf=True,
            tags=["dashboard", "licensing"],
        )
    }
}
OFFLINE_SCHEMAS = {
    "OfflineLeaseFile": {
        "type": "object",
        "required": [
            "format",
            "version",
            "product",
            "domain",
            "activationId",
            "lease",
            "expiresAt",
        ],
        "properties": {
            "format": {"const": LEASE_FILE_FORMAT},
            "version": {"const": 1},
            "product": {"type": "string"},
            "domain": {"type": "string"},
            "activationId": {"type": "integer"},
            "lease": {
                "type": "string",
                "description": 'Compact JWS lease with "offline": true',
            },
            "expiresAt": {"type": "string", "format": "date-time"},
        },
    }
}
