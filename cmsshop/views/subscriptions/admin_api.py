"""The admin API of subscriptions: the list, one subscription with its timeline, and the
resync from the provider; the console pages share its readers."""

from __future__ import annotations

import colander
from pyramid.view import view_config

from cmsshop.models import SUBSCRIPTION_STATUSES
from cmsshop.security import ADMIN
from cmsshop.services.payments.registry import PaymentProviders
from cmsshop.services.subscriptions import admin, reconcile
from cmsshop.util import isoformat_z
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.json import (
    StrictString,
    page_json,
    parse_path_id,
    read_page_request,
    read_query,
)


def status_filter() -> colander.SchemaNode:
    schema = colander.SchemaNode(colander.Mapping())
    schema.add(
        colander.SchemaNode(
            StrictString(),
            name="status",
            missing=None,
            validator=colander.OneOf(SUBSCRIPTION_STATUSES),
        )
    )
    return schema


def row_body(row: admin.Row) -> dict:
    s = row.subscription
    return {
        "id": s.id,
        "provider": s.provider,
        "providerSubscriptionId": s.provider_subscription_id,
        "customer": row.email,
        "product": row.product,
        "licenseKey": row.license_key,
        "status": s.status,
        "paidThrough": isoformat_z(s.paid_through),
        "currentPeriodEnd": isoformat_z(s.current_period_end),
        "cancelAtPeriodEnd": s.cancel_at_period_end,
        "syncedAt": isoformat_z(s.synced_at),
        "endedAt": isoformat_z(s.ended_at),
        "createdAt": isoformat_z(s.created_at),
    }


def detail_body(detail: admin.Detail) -> dict:
    return {
        **row_body(detail.row),
        "orderNumber": detail.first_order,
        "periods": [
            {
                "invoice": period.provider_invoice_id,
                "orderNumber": number,
                "start": isoformat_z(period.period_start),
                "end": isoformat_z(period.period_end),
                "amount": period.amount,
                "currency": period.currency,
            }
            for period, number in detail.periods
        ],
        "timeline": [
            {
                "at": isoformat_z(entry.at),
                "kind": entry.kind,
                "text": entry.text,
                "orderNumber": entry.order_number,
            }
            for entry in detail.timeline
        ],
    }


def subscription_detail(request) -> admin.Detail:
    return admin.subscription_detail(request.db, parse_path_id(request.matchdict["id"]))


def resync(request) -> reconcile.Report:
    """Repair one subscription from the provider (404 for an unknown id first)."""
    detail = subscription_detail(request)
    return reconcile.reconcile(
        request.registry, request.find_service(PaymentProviders), detail.row.subscription.id
    )


@view_config(
    route_name="subscriptions.admin_list", request_method="GET", renderer="json", permission=ADMIN
)
def list_subscriptions(request):
    no_store(request)
    data, _ = read_query(request, status_filter())
    page = admin.list_subscriptions(request.db, read_page_request(request), data["status"])
    return page_json(page, row_body)


@view_config(
    route_name="subscriptions.admin_one", request_method="GET", renderer="json", permission=ADMIN
)
def get_subscription(request):
    no_store(request)
    return detail_body(subscription_detail(request))


@view_config(
    route_name="subscriptions.admin_resync",
    request_method="POST",
    renderer="json",
    permission=ADMIN,
)
def resync_subscription(request):
    no_store(request)
    report = resync(request)
    return {"changes": report.changes, "error": report.error}
