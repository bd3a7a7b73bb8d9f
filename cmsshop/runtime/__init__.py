"""A reference licensing client for protected product runtimes.

Embed it in a Python product (it needs only joserfc and the standard library)::

    from cmsshop.runtime import LicenseClient

    client = LicenseClient(
        "https://shop.example.com", product="site-guard-pro", license_key=KEY,
        domain=site_url, fingerprint=installation_id, pinned_keys=PINNED_JWKS,
        state_path="/var/lib/myapp/lease.json",
    )
    client.activate()            # once, at set-up
    lease = client.ensure_licensed()   # at start-up and now and then afterwards
    if lease.has_feature("pro"): ...   # feature flags, signed into the lease
    update = client.check_for_update("1.4.0")   # None when up to date
    if update: client.download_update(update, "/tmp/update.zip")   # size + SHA-256 checked

Leases are verified against a key set pinned in the product (never only one fetched at
run time), and the client keeps working on its last good lease through server errors
and network failures until that lease expires.
"""

from cmsshop.runtime.client import (
    Lease,
    LeaseRejected,
    LicenseClient,
    LicenseClientError,
    LicenseError,
    LicenseUnavailable,
    TemporaryFailure,
    Update,
    UpdateRejected,
    verify_lease,
)

__all__ = [
    "Lease",
    "LeaseRejected",
    "LicenseClient",
    "LicenseClientError",
    "LicenseError",
    "LicenseUnavailable",
    "TemporaryFailure",
    "Update",
    "UpdateRejected",
    "verify_lease",
]
