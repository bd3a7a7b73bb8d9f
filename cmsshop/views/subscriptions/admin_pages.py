"""The console's subscription pages: the list, one subscription's timeline, and its
"Resync from the provider" button."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop.models import SUBSCRIPTION_STATUSES
from cmsshop.security import ADMIN
from cmsshop.services.subscriptions import admin, parked
from cmsshop.views.shared.forms import see_other
from cmsshop.views.shared.json import read_page_request, read_query
from cmsshop.views.subscriptions.admin_api import resync, status_filter, subscription_detail

NOTICES = {
    "subscription_resynced": "Checked with the provider; the timeline shows what changed.",
    "subscription_resync_failed": "The provider could not be asked; nothing changed.",
}


@view_config(
    route_name="pages.admin_subscriptions",
    request_method="GET",
    renderer="admin/subscriptions/list.html",
    permission=ADMIN,
)
def subscriptions_page(request):
    data, typed = read_query(request, status_filter())
    page = admin.list_subscriptions(request.db, read_page_request(request), data["status"])
    return {
        "admin_section": "subscriptions",
        # Payments whose event named no subscription and matched none yet: the
        # reconciliation (cmsshop-admin reconcile-subscriptions) records them.
        "parked": parked.unresolved(request.db),
        "page": page,
        "filters": typed,
        "statuses": SUBSCRIPTION_STATUSES,
    }


@view_config(
    route_name="pages.admin_subscription",
    request_method="GET",
    renderer="admin/subscriptions/detail.html",
    permission=ADMIN,
)
def subscription_page(request):
    return {"admin_section": "subscriptions", "detail": subscription_detail(request)}


@view_config(route_name="pages.admin_subscription_resync", request_method="POST", permission=ADMIN)
def resync_page(request):
    report = resync(request)
    notice = "subscription_resync_failed" if report.error else "subscription_resynced"
    return see_other(request, f"/admin/subscriptions/{report.subscription_id}", notice=notice)
