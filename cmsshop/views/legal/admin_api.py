"""The legal pages as JSON for the console's automation (admin role, CSRF token):
the four kinds with their published version, one kind's versions, and publishing a new
version (a page is never edited in place: services.legal.documents)."""

from __future__ import annotations

import colander
from pyramid.view import view_config

from cmsshop.models import LEGAL_KINDS
from cmsshop.security import ADMIN
from cmsshop.services.legal import documents
from cmsshop.util import isoformat_z
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.json import StrictMapping, read_json
from cmsshop.views.shared.schema import MAX_MARKDOWN, text_node

MAX_BODY = MAX_MARKDOWN


class LegalDocumentSchema(colander.MappingSchema):
    schema_type = StrictMapping
    title = text_node(200, min_length=1)
    body = text_node(MAX_BODY, multiline=True, min_length=1)


def document_body(document) -> dict:
    return {
        "kind": document.kind,
        "version": document.version,
        "title": document.title,
        "body": document.body,
        "bodyHtml": document.body_html,
        "publishedAt": isoformat_z(document.published_at),
        "publishedBy": document.published_by,
        "url": f"/legal/{document.kind}",
    }


def kind_body(kind: str, current) -> dict:
    return {
        "kind": kind,
        "name": documents.KIND_NAMES[kind],
        "current": document_body(current) if current is not None else None,
    }


@view_config(
    route_name="legal.admin_documents", request_method="GET", renderer="json", permission=ADMIN
)
def list_kinds(request):
    no_store(request)
    published = documents.latest_by_kind(request.db)
    return {"items": [kind_body(kind, published.get(kind)) for kind in LEGAL_KINDS]}


@view_config(
    route_name="legal.admin_document", request_method="GET", renderer="json", permission=ADMIN
)
def show_kind(request):
    no_store(request)
    kind = documents.check_kind(request.matchdict["kind"])
    versions = documents.versions(request.db, kind)
    return {
        **kind_body(kind, versions[0] if versions else None),
        "versions": [document_body(document) for document in versions],
    }


@view_config(
    route_name="legal.admin_document", request_method="POST", renderer="json", permission=ADMIN
)
def publish_version(request):
    kind = documents.check_kind(request.matchdict["kind"])
    data = read_json(request, LegalDocumentSchema())
    document = documents.publish(
        request.db,
        kind,
        title=data["title"],
        body=data["body"],
        actor=request.user,
        ip=request.client_addr,
    )
    request.response.status = 201
    return document_body(document)
