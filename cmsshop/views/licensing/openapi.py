"""The OpenAPI description of the licensing routes (views/licensing/api.py), kept next to
the views; cmsshop.modules.licensing hands it to config.add_openapi."""

from __future__ import annotations

from cmsshop import openapi as oa
from cmsshop.models import LICENSE_STATUSES
from cmsshop.services.licensing.domains import ENVIRONMENTS

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
