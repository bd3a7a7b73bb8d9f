"""Update checks: the newest release a license is entitled to, for a product runtime that
asks "is there something newer than the version I run?".

The rules:

- the license must be the product's, not revoked or suspended, and the installation
  (domain + fingerprint) an active activation of it (the same 4xx answers as validate);
- an expired license still gets answers, but only sees releases published before its
  expiry: it keeps the updates it paid for, not later ones;
- channel ``stable`` sees stable releases, ``beta`` sees stable and beta ones;
- versions compare by the product's scheme (services/store/versions.py), never as
  strings or by release date; only a release strictly newer than the runtime's
  ``current_version`` is offered;
- read only: nothing is written but the audit entry (no nonce is recorded: the answer is
  not a lease and grants nothing; the download URL it carries is short-lived and signed).
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.errors import ValidationFailed
from cmsshop.models import Entitlement, License, Product, Release
from cmsshop.services.licensing import problems
from cmsshop.services.licensing.records import AuditRecord, LicenseRequest
from cmsshop.services.licensing.steps import (
    check_installation,
    check_license_state,
    find_activation,
)
from cmsshop.services.store.versions import BadVersion, parse_version
from cmsshop.util import utcnow

CHANNELS = {"stable": ("stable",), "beta": ("stable", "beta")}


@dataclasses.dataclass(frozen=True)
class UpdateCheck:
    """What a runtime asked: the license request's items, its version and channel."""

    request: LicenseRequest
    current_version: str
    channel: str = "stable"


@dataclasses.dataclass(frozen=True)
class UpdateAnswer:
    """``release`` is None when the runtime is up to date. ``entitlement_id`` names the
    entitlement a download token is signed for (None: the license was issued by hand, or
    its downloads are on hold or revoked, so no download URL can be given)."""

    product: Product
    license: License
    current_version: str
    channel: str
    release: Release | None
    entitlement_id: int | None
    expired: bool


def _open(session: Session, data: LicenseRequest, audit: AuditRecord, now: dt.datetime):
    row = session.execute(
        select(License, Product)
        .join(Product, Product.id == License.product_id)
        .where(License.key == data.license_key)
    ).first()
    if row is None:
        raise problems.license_not_found()
    license, product = row
    audit.license_id = license.id
    if product.slug != data.product:
        raise problems.product_mismatch()
    expired = license.status == "expired" or (
        license.expires_at is not None and license.expires_at <= now
    )
    # An expired license still gets answers (see the module's rules); any other state
    # check answers as validate does.
    if not expired or license.status in ("revoked", "suspended"):
        check_license_state(license, now)
    return license, product, expired


def _check_activation(session: Session, license: License, data: LicenseRequest, audit) -> None:
    activation = find_activation(session, license.id, data.fingerprint_sha256)
    if activation is not None:
        audit.activation_id, audit.environment = activation.id, activation.environment
    check_installation(
        activation is not None,
        activation is not None and activation.active,
        activation.domain if activation is not None else None,
        data.domain,
    )


def newest_release(
    releases: list[Release], scheme: str, channels: tuple[str, ...], before: dt.datetime | None
) -> Release | None:
    """The release with the highest version among ``releases`` of ``channels`` (published
    before ``before`` when given). A stored version that no longer parses is skipped."""
    best, best_key = None, None
    for release in releases:
        if release.channel not in channels:
            continue
        if before is not None and release.released_at >= before:
            continue
        try:
            key = parse_version(scheme, release.version)
        except BadVersion:
            continue
        if best_key is None or key > best_key:
            best, best_key = release, key
    return best


def check_for_update(session: Session, check: UpdateCheck, audit: AuditRecord) -> UpdateAnswer:
    """The newest release the license is entitled to, if newer than the runtime's."""
    data = check.request
    now = utcnow()
    license, product, expired = _open(session, data, audit, now)
    _check_activation(session, license, data, audit)
    try:
        current = parse_version(product.version_scheme, check.current_version)
    except BadVersion as exc:
        raise ValidationFailed({"currentVersion": str(exc)}) from None
    releases = list(session.scalars(select(Release).where(Release.product_id == product.id)))
    before = license.expires_at if expired else None
    newest = newest_release(releases, product.version_scheme, CHANNELS[check.channel], before)
    if newest is not None and parse_version(product.version_scheme, newest.version) <= current:
        newest = None
    entitlement_id = None
    if newest is not None and license.user_id is not None:
        # The owner's active entitlement to the license's product: the one of its order,
        # or of the upgrade that moved the license to this product.
        entitlement_id = session.scalar(
            select(Entitlement.id)
            .where(
                Entitlement.user_id == license.user_id,
                Entitlement.product_id == license.product_id,
                Entitlement.status == "active",
            )
            .order_by(Entitlement.id.desc())
            .limit(1)
        )
    return UpdateAnswer(
        product=product,
        license=license,
        current_version=check.current_version,
        channel=check.channel,
        release=newest,
        entitlement_id=entitlement_id,
        expired=expired,
    )
