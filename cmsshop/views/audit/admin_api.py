"""The audit log as JSON (admin role; read only: no route edits or deletes an entry)."""

from __future__ import annotations

import colander
from pyramid.view import view_config

from cmsshop.security import ADMIN
from cmsshop.services.audit import queries
from cmsshop.util import isoformat_z
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.json import (
    StrictString,
    page_json,
    query_value,
    read_page_request,
    validate,
)

# Query parameter -> AuditFilters field.
FILTER_FIELDS = {
    "actor": "actor",
    "action": "action",
    "objectType": "object_type",
    "objectId": "object_id",
    "from": "since",
    "to": "until",
}


def _text(max_length: int):
    return colander.SchemaNode(
        StrictString(), missing=None, validator=colander.Length(max=max_length)
    )


class AuditFilterSchema(colander.MappingSchema):
    actor = _text(120)
    action = _text(64)
    objectType = _text(32)  # noqa: N815 - JSON name
    objectId = _text(64)  # noqa: N815 - JSON name
    # "from" is a Python keyword: the node is named below.
    since = colander.SchemaNode(colander.Date(), missing=None, name="from")
    until = colander.SchemaNode(colander.Date(), missing=None, name="to")


def read_audit_filters(request) -> tuple[queries.AuditFilters, dict]:
    """(filters, as typed) from the query string; empty values are no filter, a bad
    date or a repeated parameter is a 422."""
    typed = {}
    for name in FILTER_FIELDS:
        value = query_value(request, name)
        if value not in (None, ""):
            typed[name] = value
    data = validate(AuditFilterSchema(), typed)
    return (
        queries.AuditFilters(**{field: data[name] for name, field in FILTER_FIELDS.items()}),
        typed,
    )


def entry_body(entry) -> dict:
    return {
        "id": entry.id,
        "createdAt": isoformat_z(entry.created_at),
        "actor": entry.actor,
        "actorUserId": entry.actor_id,
        "actorTokenId": entry.actor_token_id,
        "channel": entry.channel,
        "via": entry.via,
        "action": entry.action,
        "objectType": entry.object_type,
        "objectId": entry.object_id,
        "summary": entry.summary or {},
        "ip": entry.ip,
    }


@view_config(
    route_name="audit.admin_entries", request_method="GET", renderer="json", permission=ADMIN
)
def list_entries(request):
    no_store(request)
    paging = read_page_request(request)
    filters, _ = read_audit_filters(request)
    return page_json(queries.list_entries(request.db, filters, paging), entry_body)
