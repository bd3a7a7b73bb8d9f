"""The audit log, always on: the console's list (filters, CSV export) and the admin API.
Entries are written in the transaction of each admin change (services/audit): the view
deriver here marks every admin view's unsafe call as an audited one."""

from __future__ import annotations

from cmsshop.views.audit import openapi
from cmsshop.views.audit.context import audited_admin_view

ROUTES: dict[str, str] = {
    "audit.admin_entries": "/api/admin/audit",
    "pages.admin_audit": "/admin/audit",
    "pages.admin_audit_csv": "/admin/audit.csv",
}


def includeme(config) -> None:
    for name, pattern in ROUTES.items():
        config.add_route(name, pattern)
    config.add_openapi(paths=openapi.ADMIN_PATHS, schemas=openapi.ADMIN_SCHEMAS)
    config.add_view_deriver(audited_admin_view, name="audited_admin_view")
    config.scan("cmsshop.views.audit")
