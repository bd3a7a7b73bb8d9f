"""A customer's own records: orders, invoices, download entitlements and their licenses.

Every lookup here is scoped to one user: a record of another customer is "not found",
exactly like one that does not exist, so ids never leak whether they exist.
"""

from __future__ import annotations

import dataclasses

from sqlalchemy import func, select
from sqlalchemy.orm import Session, joinedload, selectinload

from cmsshop.db import take_write_lock
from cmsshop.errors import ApiError, NotFound
from cmsshop.models import (
    Activation,
    DownloadLog,
    Entitlement,
    Invoice,
    License,
    Order,
    OrderItem,
    Release,
)
from cmsshop.models.meta import MAX_ID
from cmsshop.services.dashboard.downloads import (
    Delivery,
    DownloadClaims,
    DownloadNotFound,
    DownloadOnHold,
    DownloadRevoked,
    DownloadTokenSigner,
    ReleaseNotAvailable,
)
from cmsshop.services.licensing import problems
from cmsshop.services.licensing.issuing import issue_license
from cmsshop.services.licensing.records import normalise_license_key
from cmsshop.services.licensing.steps import holds_seat
from cmsshop.services.paging import Page, PageRequest, fetch_page
from cmsshop.util import utcnow


class OrderNotFound(NotFound):
    code = "order_not_found"
    title = "Not found"
    message = "You have no order with this number."


class InvoiceNotFound(NotFound):
    code = "invoice_not_found"
    title = "Invoice not found"
    message = "You have no invoice with this number."


# Order and invoice numbers are short ASCII (ORD-..., INV-2026-000042); anything else in
# a path is "not found" before it reaches the database (PostgreSQL refuses NUL in text).
MAX_NUMBER_LENGTH = 32


def _plausible_number(number: str | None) -> bool:
    return (
        bool(number)
        and len(number) <= MAX_NUMBER_LENGTH
        and number.isascii()
        and number.isprintable()
    )


class LicenseNotAvailable(ApiError):
    code = "license_not_available"
    message = "This product is used without a license key."


@dataclasses.dataclass(frozen=True)
class Download:
    """An entitlement and the newest release of its product (None before the first)."""

    entitlement: Entitlement
    latest_release: Release | None


def _newest_first(
    session: Session, model, user_id: int, request: PageRequest, *, newest, load
) -> Page:
    """A page of ``model`` rows of the user, by ``newest`` (then id) descending."""
    query = (
        select(model)
        .where(model.user_id == user_id)
        .options(load)
        .order_by(newest.desc(), model.id.desc())
    )
    count = select(func.count()).select_from(model).where(model.user_id == user_id)
    return fetch_page(session, query, request, count_query=count)


def list_orders(session: Session, user_id: int, request: PageRequest) -> Page[Order]:
    """The user's orders, newest first, with their items."""
    load = selectinload(Order.items)
    return _newest_first(session, Order, user_id, request, newest=Order.created_at, load=load)


def find_order(session: Session, user_id: int, number: str | None) -> Order:
    """The user's order of this number, with its items; OrderNotFound otherwise (also for
    another customer's order, so numbers never leak whether they exist)."""
    order = None
    if _plausible_number(number):
        order = session.scalar(
            select(Order)
            .where(Order.number == number, Order.user_id == user_id)
            .options(selectinload(Order.items))
        )
    if order is None:
        raise OrderNotFound()
    return order


def invoice_of_order(session: Session, order: Order) -> Invoice | None:
    """The order's invoice (written when it was paid), or None."""
    return session.scalar(select(Invoice).where(Invoice.order_id == order.id))


def find_invoice(session: Session, user_id: int, number: str | None) -> Invoice:
    """The user's invoice of this number; InvoiceNotFound otherwise (another's too)."""
    invoice = None
    if _plausible_number(number):
        invoice = session.scalar(
            select(Invoice)
            .where(Invoice.number == number, Invoice.user_id == user_id)
            .options(joinedload(Invoice.order))
        )
    if invoice is None:
        raise InvoiceNotFound()
    return invoice


def list_invoices(session: Session, user_id: int, request: PageRequest) -> Page[Invoice]:
    """The user's invoices, newest first."""
    load = joinedload(Invoice.order)
    return _newest_first(session, Invoice, user_id, request, newest=Invoice.issued_at, load=load)


def list_downloads(session: Session, user_id: int, request: PageRequest) -> Page[Download]:
    """The user's download entitlements (revoked ones too), newest first, each with the
    newest release of its product (one statement for the whole page)."""
    page = _newest_first(
        session,
        Entitlement,
        user_id,
        request,
        newest=Entitlement.created_at,
        load=joinedload(Entitlement.product),
    )
    latest = latest_releases(session, [e.product_id for e in page.items])
    return page.map(lambda e: Download(e, latest.get(e.product_id)))


def latest_releases(session: Session, product_ids: list[int]) -> dict[int, Release]:
    """The newest stable release of each product (by release date, then id): what the
    account downloads (beta releases reach runtimes that ask for that channel)."""
    latest: dict[int, Release] = {}
    if not product_ids:
        return latest
    releases = session.scalars(
        select(Release)
        .where(Release.product_id.in_(set(product_ids)), Release.channel == "stable")
        .order_by(Release.product_id, Release.released_at.desc(), Release.id.desc())
    )
    for release in releases:
        latest.setdefault(release.product_id, release)
    return latest


def latest_release(session: Session, product_id: int) -> Release | None:
    return latest_releases(session, [product_id]).get(product_id)


def find_entitlement(session: Session, user_id: int, entitlement_id: int | None) -> Entitlement:
    """The user's entitlement or DownloadNotFound (also for someone else's, or None: an id
    that did not parse)."""
    entitlement = None
    if entitlement_id is not None:
        entitlement = session.scalar(
            select(Entitlement).where(
                Entitlement.id == entitlement_id, Entitlement.user_id == user_id
            )
        )
    if entitlement is None:
        raise DownloadNotFound()
    return entitlement


def ensure_usable(entitlement: Entitlement) -> None:
    """Revoked: 410 ``download_revoked``; on hold (e.g. a dispute): 403 ``download_on_hold``."""
    if entitlement.status == "revoked":
        raise DownloadRevoked()
    if entitlement.status != "active":
        raise DownloadOnHold()


def sign_download(
    session: Session, signer: DownloadTokenSigner, entitlement: Entitlement
) -> tuple[str, DownloadClaims]:
    """A fresh token for the newest release file of the entitlement's product."""
    ensure_usable(entitlement)
    release = latest_release(session, entitlement.product_id)
    if release is None:
        raise ReleaseNotAvailable()
    return signer.sign(entitlement.id, release.id)


def resolve_download(session: Session, claims: DownloadClaims) -> tuple[Entitlement, Release]:
    """The entitlement and release a verified token names, if still downloadable."""
    if not (1 <= claims.entitlement_id <= MAX_ID and 1 <= claims.release_id <= MAX_ID):
        raise DownloadNotFound("This file is no longer available.")
    entitlement = session.get(Entitlement, claims.entitlement_id)
    release = session.get(Release, claims.release_id)
    if entitlement is None or release is None or release.product_id != entitlement.product_id:
        raise DownloadNotFound("This file is no longer available.")
    ensure_usable(entitlement)
    return entitlement, release


def log_download(
    session: Session,
    entitlement: Entitlement,
    release: Release,
    delivery: Delivery,
    ip: str,
    user_agent: str | None,
) -> DownloadLog:
    entry = DownloadLog(
        entitlement_id=entitlement.id,
        release_id=release.id,
        version=release.version,
        created_at=utcnow(),
        ip=(ip or "unknown")[:64],
        user_agent=user_agent[:255] if user_agent else None,
        status=delivery.response.status_code,
        range_start=delivery.byte_range.start if delivery.byte_range else None,
        range_end=delivery.byte_range.end if delivery.byte_range else None,
        content_length=delivery.content_length,
        delivery=delivery.mode,
    )
    take_write_lock(session)
    session.add(entry)
    # Written now, inside the view: a database error here is retried by pyramid_retry,
    # while one raised at commit time would not be.
    session.flush()
    return entry


def license_for(session: Session, entitlement: Entitlement) -> License:
    """The entitlement's license; issued now (exactly once) if the product is licensed,
    the order is paid and fulfilment has not issued it yet."""
    ensure_usable(entitlement)
    existing = _license_of(session, entitlement)
    if existing is not None:
        return existing
    # About to write: on SQLite, queue behind any other writer and look again.
    take_write_lock(session)
    existing = _license_of(session, entitlement)
    if existing is not None:
        return existing
    item = session.scalar(
        select(OrderItem)
        .where(OrderItem.id == entitlement.order_item_id)
        .options(joinedload(OrderItem.order), joinedload(OrderItem.product))
    )
    if item is None or not item.product.licensed:
        raise LicenseNotAvailable()
    if item.order.status != "paid":
        raise LicenseNotAvailable(
            "The license is issued once the payment of this order is confirmed.",
            hints=["Try again after the order shows as paid."],
        )
    license = issue_license(session, item, entitlement.user_id)
    if license is None:  # the product stopped being licensed in between
        raise LicenseNotAvailable()
    return license


def _license_of(session: Session, entitlement: Entitlement) -> License | None:
    return session.scalar(select(License).where(License.order_item_id == entitlement.order_item_id))


def effective_license_status(license: License) -> str:
    """The stored status, except that an active license past its expiry reads "expired"."""
    if license.status == "active" and license.expires_at and license.expires_at <= utcnow():
        return "expired"
    return license.status


# --- licenses and their activations ------------------------------------------------------
#
# A license belongs to the customer it was issued to (License.user_id, set by
# issuing.issue_license for the buyer of the order item; the same customer owns the
# item's entitlement, see license_for). Another customer's license is "not found".


def find_license(session: Session, user_id: int, raw_key: str | None) -> License:
    """The user's license of this key; 404 ``license_not_found`` otherwise (another
    customer's license too)."""
    key = normalise_license_key(raw_key)
    license = None
    if key is not None:
        license = session.scalar(
            select(License)
            .where(License.key == key, License.user_id == user_id)
            .options(joinedload(License.product))
        )
    if license is None:
        raise problems.license_not_found()
    return license


def list_licenses(session: Session, user_id: int, request: PageRequest) -> Page[License]:
    """The user's licenses, newest first, with their products."""
    return _newest_first(
        session,
        License,
        user_id,
        request,
        newest=License.created_at,
        load=joinedload(License.product),
    )


def active_activations_query(license_ids):
    """The activations holding a seat of licenses (the active ones, and the deactivated
    ones whose offline lease still works), active first, then most recently activated."""
    return (
        select(Activation)
        .where(Activation.license_id.in_(license_ids), holds_seat(utcnow()))
        .order_by(Activation.active.desc(), Activation.activated_at.desc(), Activation.id.desc())
    )


def active_activations(session: Session, license_ids: list[int]) -> dict[int, list[Activation]]:
    """license id -> its active activations (one statement for a page of licenses)."""
    found: dict[int, list[Activation]] = {license_id: [] for license_id in license_ids}
    if license_ids:
        for activation in session.scalars(active_activations_query(set(license_ids))):
            found[activation.license_id].append(activation)
    return found


def list_activations(session: Session, license: License, request: PageRequest) -> Page:
    """A page of the license's active activations."""
    return fetch_page(session, active_activations_query([license.id]), request)
