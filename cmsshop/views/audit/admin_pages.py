"""The console's audit log (/admin/audit): newest first, filtered, paged, and the same
entries as CSV (/admin/audit.csv). Read only: nothing here edits or deletes an entry."""

from __future__ import annotations

import csv
import io
import json

from pyramid.response import Response
from pyramid.view import view_config

from cmsshop.security import ADMIN
from cmsshop.services.audit import queries
from cmsshop.util import isoformat_z
from cmsshop.views.audit.admin_api import read_audit_filters
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.json import read_page_request

# object_type -> the console page of such an object (by the entry's object_id).
OBJECT_PAGES = {
    "license": "/admin/licenses/{}",
    "order": "/admin/orders/{}",
    "coupon": "/admin/coupons/{}",
    "ticket": "/admin/tickets/{}",
    "user": "/admin/customers/{}",
    "outbox_message": "/admin/mail/{}",
}
CSV_COLUMNS = (
    "id",
    "time",
    "actor",
    "actor_user",
    "actor_token",
    "channel",
    "via",
    "action",
    "object_type",
    "object_id",
    "summary",
    "ip",
)
# A cell a spreadsheet would read as a formula (OWASP's "CSV injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def object_url(entry) -> str | None:
    pattern = OBJECT_PAGES.get(entry.object_type)
    return pattern.format(entry.object_id) if pattern else None


def summary_rows(summary) -> list[tuple[str, object, object]]:
    """(field, before, after) for each field an entry's summary names; other shapes of
    summary (explicit entries) as (key, None, value)."""
    if not isinstance(summary, dict):
        return []
    before, after = summary.get("before"), summary.get("after")
    if isinstance(before, dict) or isinstance(after, dict):
        before, after = before or {}, after or {}
        return [(key, before.get(key), after.get(key)) for key in dict.fromkeys([*before, *after])]
    return [(key, None, value) for key, value in summary.items()]


def shown(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def audit_values(session, entries) -> dict:
    """What audit/macros.html's table needs, for any page that shows entries."""
    return {
        "audit_entries": entries,
        "actors": queries.actors_of(session, entries),
        "object_url": object_url,
        "summary_rows": summary_rows,
        "shown": shown,
    }


@view_config(
    route_name="pages.admin_audit",
    request_method="GET",
    renderer="audit/index.html",
    permission=ADMIN,
)
def audit_page(request):
    no_store(request)
    paging = read_page_request(request)
    filters, typed = read_audit_filters(request)
    page = queries.list_entries(request.db, filters, paging)
    export_query = request.query_string if typed else ""
    return {
        "admin_section": "audit",
        "page": page,
        "filters": typed,
        **audit_values(request.db, page.items),
        "export_url": "/admin/audit.csv" + (f"?{export_query}" if export_query else ""),
    }


def safe_cell(value) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


@view_config(route_name="pages.admin_audit_csv", request_method="GET", permission=ADMIN)
def audit_csv(request):
    filters, _ = read_audit_filters(request)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for batch in queries.export_batches(request.db, filters):
        actors = queries.actors_of(request.db, batch)
        for entry in batch:
            writer.writerow([safe_cell(value) for value in csv_row(entry, actors[entry.id])])
    response = Response(out.getvalue(), content_type="text/csv", charset="utf-8")
    response.content_disposition = 'attachment; filename="audit-log.csv"'
    response.cache_control = "no-store"
    return response


def csv_row(entry, actor) -> tuple:
    token = actor.token
    return (
        entry.id,
        isoformat_z(entry.created_at),
        entry.actor,
        actor.user.email if actor.user is not None else "",
        f"{token.name} ({token.prefix})" if token is not None else "",
        entry.channel or "",
        entry.via or "",
        entry.action,
        entry.object_type,
        entry.object_id,
        json.dumps(entry.summary or {}, sort_keys=True, ensure_ascii=False),
        entry.ip or "",
    )
