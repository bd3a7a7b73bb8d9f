"""The customer dashboard: orders, invoices, downloads and licenses (their support tickets
are in views/support)."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop.errors import RateLimited
from cmsshop.security import CUSTOMER
from cmsshop.services.dashboard import records as dashboard
from cmsshop.services.dashboard.downloads import DownloadClaims, DownloadTokenSigner
from cmsshop.services.licensing import seats
from cmsshop.services.licensing.records import AuditRecord
from cmsshop.services.payments.lines import read_invoice_lines
from cmsshop.util import isoformat_z
from cmsshop.views.errors import request_id
from cmsshop.views.shared.bodies import order_body, release_body
from cmsshop.views.shared.json import (
    page_json,
    parse_path_id,
    read_page_request,
)

# --- serialisation -----------------------------------------------------------------------


def invoice_body(invoice) -> dict:
    return {
        "number": invoice.number,
        "orderNumber": invoice.order.number,
        "issuedAt": isoformat_z(invoice.issued_at),
        "currency": invoice.currency,
        "total": invoice.total,
        # As issued; an invoice from before quantities reads as one unit a line.
        "lines": read_invoice_lines(invoice.lines),
        "tax": invoice.tax,
    }


def download_body(download: dashboard.Download) -> dict:
    entitlement, release = download.entitlement, download.latest_release
    return {
        "id": entitlement.id,
        "product": entitlement.product.slug,
        "name": entitlement.product.name,
        "latestRelease": release_body(release),
        "licensed": entitlement.product.licensed,
        "revoked": entitlement.status == "revoked",
        "status": entitlement.status,
        "createdAt": isoformat_z(entitlement.created_at),
    }


def license_body(license) -> dict:
    return {
        "key": license.key,
        "product": license.product.slug,
        "status": dashboard.effective_license_status(license),
        "expiresAt": isoformat_z(license.expires_at),
        "maxActivations": license.max_activations,
        "activations": [
            {
                "domain": activation.domain,
                "fingerprint": activation.fingerprint,
                "activatedAt": isoformat_z(activation.activated_at),
                "lastValidatedAt": isoformat_z(activation.last_validated_at),
            }
            for activation in license.activations
            if activation.active
        ],
    }


def activation_body(activation, fingerprint: str | None = None) -> dict:
    """An activation (a row, or ActivationFacts and its ``fingerprint``) as the dashboard
    shows it."""
    return {
        "id": activation.id,
        "domain": activation.domain,
        "fingerprint": fingerprint if fingerprint is not None else activation.fingerprint,
        "environment": activation.environment,
        "active": activation.active,
        "activatedAt": isoformat_z(activation.activated_at),
        "lastValidatedAt": isoformat_z(activation.last_validated_at),
        "deactivatedAt": isoformat_z(activation.deactivated_at),
        "seatHeldUntil": isoformat_z(activation.seat_held_until),
    }


def owner_deactivation_body(result: seats.OwnerDeactivation) -> dict:
    return {
        "outcome": result.outcome,
        "activation": activation_body(result.activation, result.fingerprint),
        "activationsUsed": result.activations_used,
        "maxActivations": result.max_activations,
    }


def signed_url_body(base_url: str, token: str, claims: DownloadClaims) -> dict:
    return {
        "url": f"{base_url.rstrip('/')}/api/downloads/{token}",
        "expiresAt": isoformat_z(claims.expires_at),
    }


# --- views -------------------------------------------------------------------------------


# The customer's own lists: route -> (the service listing them, newest first; serialiser).
OWN_RECORDS = {
    "dashboard.orders": (dashboard.list_orders, order_body),
    "dashboard.invoices": (dashboard.list_invoices, invoice_body),
    "dashboard.downloads": (dashboard.list_downloads, download_body),
}
OWN_LIST = {"request_method": "GET", "renderer": "json", "permission": CUSTOMER}


@view_config(route_name="dashboard.orders", **OWN_LIST)
@view_config(route_name="dashboard.invoices", **OWN_LIST)
@view_config(route_name="dashboard.downloads", **OWN_LIST)
def list_own_records(request):
    """A page of the logged-in customer's orders, invoices or downloads."""
    list_records, serialise = OWN_RECORDS[request.matched_route.name]
    page = list_records(request.db, request.user.id, read_page_request(request))
    return page_json(page, serialise)


def _own_entitlement(request):
    """The entitlement of the path's id, if it is the logged-in customer's (404 if not)."""
    return dashboard.find_entitlement(
        request.db, request.user.id, parse_path_id(request.matchdict["id"])
    )


@view_config(
    route_name="dashboard.signed_url", request_method="POST", renderer="json", permission=CUSTOMER
)
def create_signed_url(request):
    entitlement = _own_entitlement(request)
    signer = request.find_service(DownloadTokenSigner)
    token, claims = dashboard.sign_download(request.db, signer, entitlement)
    # The URL is a short-lived credential: no cache may keep it.
    request.response.cache_control = "no-store"
    return signed_url_body(request.registry.settings["cmsshop.base_url"], token, claims)


@view_config(
    route_name="dashboard.license", request_method="POST", renderer="json", permission=CUSTOMER
)
def get_license(request):
    entitlement = _own_entitlement(request)
    license = dashboard.license_for(request.db, entitlement)
    request.response.cache_control = "no-store"
    return license_body(license)


@view_config(
    route_name="dashboard.activations", request_method="GET", renderer="json", permission=CUSTOMER
)
def list_activations(request):
    """The activations holding a seat of one of the customer's licenses (the active ones
    and the deactivated ones whose offline lease still works)."""
    license = dashboard.find_license(request.db, request.user.id, request.matchdict["key"])
    page = dashboard.list_activations(request.db, license, read_page_request(request))
    request.response.cache_control = "no-store"
    return page_json(page, activation_body)


def deactivate_own_activation(request) -> seats.OwnerDeactivation:
    """The customer frees a seat of their license (seats.deactivate_for_owner); shared by
    the JSON route and the account page."""
    audit = AuditRecord(
        action=seats.CUSTOMER_DEACTIVATE, ip=request.client_addr or "unknown",
        request_id=request_id(request),
    )  # fmt: skip
    limit = request.registry.settings["cmsshop.license_self_deactivations_per_month"]
    try:
        return seats.deactivate_for_owner(
            request.registry["cmsshop.engine"],
            request.user.id,
            request.matchdict["key"],
            parse_path_id(request.matchdict["id"]),
            audit,
            limit=limit,
        )
    except seats.DeactivationLimitReached as exc:
        raise RateLimited(
            exc.retry_after,
            f"This license's seats were freed {exc.limit} times in the last 30 days, the most "
            "the dashboard allows; nothing changed.",
            code="deactivation_limit_reached",
            hints=[
                f"Try again in {exc.retry_after // 3600 + 1} hours, or ask support to free "
                "the seat.",
                "A site you still run can free its own seat by deactivating from the product.",
            ],
        ) from None


@view_config(
    route_name="dashboard.deactivate_activation",
    request_method="POST",
    renderer="json",
    permission=CUSTOMER,
)
def deactivate_activation(request):
    result = deactivate_own_activation(request)
    request.response.cache_control = "no-store"
    return owner_deactivation_body(result)
