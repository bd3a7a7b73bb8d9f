"""POST /api/license/update-check: the newest release a license is entitled to
(services/licensing/updates.py), with a fresh signed download URL; also in the shape a
WordPress plugin's update checker reads (``?format=wordpress``).

Like the other licensing routes: no session, no CSRF, JSON or a url-encoded form, the
licensing rate limits, every call in the audit log (action ``update_check``).
"""

from __future__ import annotations

from functools import partial

import colander
from pyramid.view import view_config

from cmsshop.db import own_transaction
from cmsshop.errors import ValidationFailed
from cmsshop.models import RELEASE_CHANNELS
from cmsshop.services.dashboard.downloads import DownloadTokenSigner
from cmsshop.services.licensing import counting
from cmsshop.services.licensing.records import AuditRecord, LicenseRequest
from cmsshop.services.licensing.updates import UpdateAnswer, UpdateCheck, check_for_update
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.util import isoformat_z
from cmsshop.views.errors import request_id
from cmsshop.views.licensing.api import (
    NONCE,
    LicenseRequestSchema,
    _record_failure,
    client_ip,
    read_request_data,
)
from cmsshop.views.licensing.openapi import FORMATS
from cmsshop.views.shared.json import StrictString, query_value, validate


def update_check_schema() -> colander.SchemaNode:
    """The licensing request's fields (the nonce optional: nothing is recorded) plus the
    version the runtime runs and the channel it follows."""
    schema = LicenseRequestSchema().clone()
    schema["nonce"].missing = None
    schema["nonce"].validator = colander.Regex(NONCE, "must be 16-128 base64url characters")
    schema.add(
        colander.SchemaNode(
            StrictString(), name="currentVersion", validator=colander.Length(min=1, max=50)
        )
    )
    schema.add(
        colander.SchemaNode(
            StrictString(),
            name="channel",
            missing="stable",
            validator=colander.OneOf(RELEASE_CHANNELS),
        )
    )
    return schema


def download_link(request, answer: UpdateAnswer) -> tuple[str | None, str | None, str | None]:
    """(url, expiresAt, why there is none) for the offered release."""
    if answer.entitlement_id is None:
        return (
            None,
            None,
            (
                "This license has no downloads of its own (issued by hand, or its downloads are "
                "on hold); download the release from your account or ask support."
            ),
        )
    try:
        signer = request.find_service(DownloadTokenSigner)
    except LookupError:
        return None, None, "Downloads are switched off on this shop (the dashboard module)."
    token, claims = signer.sign(answer.entitlement_id, answer.release.id)
    url = request.route_url("dashboard.download", token=token)
    return url, isoformat_z(claims.expires_at), None


def update_body(answer: UpdateAnswer, url, expires_at, why) -> dict:
    release = answer.release
    body = {
        "status": "update_available" if release else "up_to_date",
        "product": answer.product.slug,
        "currentVersion": answer.current_version,
        "channel": answer.channel,
        "licenseExpired": answer.expired,
        "release": None,
    }
    if release is not None:
        body["release"] = {
            "version": release.version,
            "channel": release.channel,
            "releasedAt": isoformat_z(release.released_at),
            "changelogHtml": release.changelog_html,
            "requires": {
                "platform": release.requires,
                "php": release.requires_php,
                "testedUpTo": release.tested,
            },
            "fileName": release.file_name,
            "size": release.size,
            "sha256": release.sha256,
            "downloadUrl": url,
            "downloadUrlExpiresAt": expires_at,
        }
        if why:
            body["release"]["downloadUnavailable"] = why
    return body


def wordpress_body(request, answer: UpdateAnswer, url) -> dict:
    """What a WordPress plugin's update checker reads (the fields of the
    ``update_plugins`` transient and of ``plugins_api``); an empty object when up to date."""
    release = answer.release
    if release is None:
        return {}
    try:
        homepage = request.route_url("pages.product", slug=answer.product.slug)
    except KeyError:  # the store module (the product pages) is off
        homepage = request.application_url
    return {
        "slug": answer.product.slug,
        "name": answer.product.name,
        "new_version": release.version,
        "version": release.version,
        "package": url or "",
        "download_link": url or "",
        "url": homepage,
        "homepage": homepage,
        "requires": release.requires or "",
        "requires_php": release.requires_php or "",
        "tested": release.tested or "",
        "last_updated": isoformat_z(release.released_at),
        "sections": {"changelog": release.changelog_html},
    }


@view_config(
    route_name="licensing.update_check",
    request_method="POST",
    renderer="json",
    require_csrf=False,
)
def update_check(request):
    audit = AuditRecord(
        action="update_check", ip=client_ip(request), request_id=request_id(request)
    )
    request.add_finished_callback(partial(_record_failure, audit))
    output = query_value(request, "format") or "cmsshop"
    if output not in FORMATS:
        raise ValidationFailed({"format": f"one of: {', '.join(FORMATS)}"})
    values = validate(update_check_schema(), read_request_data(request))
    data = LicenseRequest(
        product=values["product"],
        license_key=values["licenseKey"],
        domain=values["domain"],
        fingerprint=values["fingerprint"],
        nonce=values["nonce"] or "",
    )
    counting.admit_call(request.find_service(RateLimiter), data, audit)
    check = UpdateCheck(data, values["currentVersion"], values["channel"])
    answer = check_for_update(request.db, check, audit)
    url = expires_at = why = None
    if answer.release is not None:
        url, expires_at, why = download_link(request, answer)
    # The request's transaction only reads; the audit row gets a short one of its own (on
    # SQLite a read snapshot cannot become a writer once another connection has written).
    with own_transaction(request.registry) as session:
        session.add(audit.entry("update_available" if answer.release else "up_to_date", 200))
    request.response.cache_control = "no-store"
    if output == "wordpress":
        return wordpress_body(request, answer, url)
    return update_body(answer, url, expires_at, why)
