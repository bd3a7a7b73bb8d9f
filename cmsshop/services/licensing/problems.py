"""The licensing answers that are errors: each a typed ApiError with its own ``code``."""

from __future__ import annotations

import datetime as dt
import logging

from cmsshop.errors import ApiError, Conflict, NotFound, ServiceUnavailable
from cmsshop.services.licensing.signing import SigningUnavailable
from cmsshop.util import isoformat_z

log = logging.getLogger("cmsshop.licensing")


def license_not_found() -> ApiError:
    return NotFound(
        "No license has this key.",
        code="license_not_found",
        title="License not found",
        hints=["Check the license key for typos; it is shown in your dashboard."],
    )


def product_mismatch() -> ApiError:
    return ApiError(
        "This license key is for another product.",
        code="product_mismatch",
        hints=["Use the license key you received for this product."],
    )


def license_state_error(code: str, message: str, hint: str) -> ApiError:
    return ApiError(message, status=403, code=code, title="License not usable", hints=[hint])


def activation_not_found(message: str) -> ApiError:
    return NotFound(
        message,
        code="activation_not_found",
        title="Activation not found",
        hints=["Activate this installation first (POST /api/license/activate)."],
    )


def nonce_reused() -> ApiError:
    return Conflict(
        "This nonce was already used with this license.",
        code="nonce_reused",
        title="Nonce reused",
        hints=["Send a fresh random nonce (16-128 base64url characters) with every call."],
    )


def activation_limit_reached(
    used: int, cap: int, environment: str, kind: str, held_until: dt.datetime | None = None
) -> ApiError:
    """409; ``held_until``: when the first seat held by a deactivated offline
    installation (its lease still works) frees, if one is held."""
    hints = [
        "Deactivate an installation you no longer use (POST /api/license/deactivate "
        "from it) to free its seat, or buy another license.",
        "Staging and local sites (localhost, *.test, staging.*) do not use a paid "
        "seat; they have a separate allowance.",
    ]
    if held_until is not None:
        hints.insert(
            0,
            "A deactivated offline installation keeps its seat until its lease expires; "
            f"the first frees at {isoformat_z(held_until)}.",
        )
    return Conflict(
        f"All {cap} {kind} activations of this license are in use.",
        code="activation_limit_reached",
        title="Activation limit reached",
        hints=hints,
        extra={
            "activationsUsed": used,
            "maxActivations": cap,
            "environment": environment,
            "seatsHeldUntil": isoformat_z(held_until),
        },
    )


class LeaseSigningUnavailable(ServiceUnavailable):
    """503 ``signing_unavailable``: no lease can be signed now, so nothing was changed."""

    def __init__(self, cause: SigningUnavailable, retry_after: int, *, keys: bool = False):
        log.error("lease signing unavailable: %s", cause)
        if keys:
            message, hints = "The lease signing keys cannot be read right now.", []
        else:
            message = "Licenses cannot be signed right now; nothing was changed. Try again shortly."
            hints = ["Keep using your current lease until it expires and retry later."]
        super().__init__(
            message,
            code="signing_unavailable",
            title="Signing unavailable",
            retry_after=retry_after,
            hints=hints,
        )
