"""The admin console's core pages, always on: the dashboard (/admin) and the lookup of
a server error by its support code (/admin/errors), on the same services as the JSON
admin routes (services.reports, services.support.codes)."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop.errors import NotFound
from cmsshop.security import ADMIN
from cmsshop.services import reports
from cmsshop.services.support.codes import find_error_record
from cmsshop.services.tax import seller
from cmsshop.util import utcnow
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.json import query_value


@view_config(
    route_name="pages.admin",
    request_method="GET",
    renderer="admin/dashboard.html",
    permission=ADMIN,
)
def dashboard(request):
    no_store(request)
    profile = seller.shop_profile(request.db, request.registry.settings)
    return {
        "admin_section": "dashboard",
        "overview": reports.overview(request.db, utcnow()),
        # The legal details invoices need and lack (the tax module's "Business and tax").
        "identity_missing": [seller.LABELS[field].lower() for field in profile.missing],
        "production": request.registry.settings["cmsshop.environment"] == "production",
    }


def _record_page(request, raw_code: str) -> dict:
    record = find_error_record(request.db, raw_code)
    if record is None:
        raise NotFound(
            "No server error was recorded with this support code.", code="support_code_not_found"
        )
    return {"admin_section": "errors", "record": record}


@view_config(
    route_name="pages.admin_errors",
    request_method="GET",
    renderer="admin/errors/lookup.html",
    permission=ADMIN,
)
def error_lookup(request):
    """The form; ``?code=`` (what the form sends) shows the record itself."""
    no_store(request)
    code = query_value(request, "code")
    if code is not None and code.strip():
        request.override_renderer = "admin/errors/record.html"
        return _record_page(request, code)
    return {"admin_section": "errors"}


@view_config(
    route_name="pages.admin_error",
    request_method="GET",
    renderer="admin/errors/record.html",
    permission=ADMIN,
)
def error_record(request):
    no_store(request)
    return _record_page(request, request.matchdict["support_code"])
