"""The console's legal pages: the four kinds with their published version, the editor
that publishes a new version (Markdown, the same renderer as articles), and the
versions each kind has had (an order names the terms version its buyer accepted)."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop.errors import NotFound, ValidationFailed
from cmsshop.models import LEGAL_KINDS
from cmsshop.security import ADMIN
from cmsshop.services.docs.markdown import render_markdown
from cmsshop.services.legal import documents
from cmsshop.views.legal.admin_api import LegalDocumentSchema
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.forms import (
    FormInvalid,
    field_errors,
    posted_fields,
    read_form,
    see_other,
)
from cmsshop.views.shared.json import parse_path_id

NOTICES = {"legal_published": "The new version is published."}
EDITOR = "admin/legal/edit.html"


def editor(request, kind: str, *, form: dict, errors=None, preview_html=None, status=200):
    request.response.status = status
    no_store(request)
    return {
        "kind": kind,
        "kind_name": documents.KIND_NAMES[kind],
        "versions": documents.versions(request.db, kind),
        "form": form,
        "errors": errors or {},
        "preview_html": preview_html,
    }


@view_config(
    route_name="pages.admin_legal",
    request_method="GET",
    renderer="admin/legal/index.html",
    permission=ADMIN,
)
def legal_index(request):
    no_store(request)
    published = documents.latest_by_kind(request.db)
    return {
        "kinds": [(kind, documents.KIND_NAMES[kind], published.get(kind)) for kind in LEGAL_KINDS]
    }


@view_config(
    route_name="pages.admin_legal_edit", request_method="GET", renderer=EDITOR, permission=ADMIN
)
def edit_page(request):
    kind = documents.check_kind(request.matchdict["kind"])
    current = documents.latest(request.db, kind)
    if current is None:
        form = {"title": documents.KIND_NAMES[kind], "body": ""}
    else:
        form = {"title": current.title, "body": current.body}
    return editor(request, kind, form=form)


@view_config(
    route_name="pages.admin_legal_edit", request_method="POST", renderer=EDITOR, permission=ADMIN
)
def publish_submit(request):
    kind = documents.check_kind(request.matchdict["kind"])
    typed = posted_fields(request, ("title", "body"))
    try:
        data = read_form(request, LegalDocumentSchema())
    except FormInvalid as exc:
        return editor(request, kind, form=exc.form, errors=exc.errors, status=422)
    if request.POST.get("action") == "preview":
        return editor(request, kind, form=typed, preview_html=render_markdown(data["body"]))
    try:
        documents.publish(
            request.db,
            kind,
            title=data["title"],
            body=data["body"],
            actor=request.user,
            ip=request.client_addr,
        )
    except ValidationFailed as exc:
        return editor(request, kind, form=typed, errors=field_errors(exc), status=422)
    return see_other(request, f"/admin/legal/{kind}", notice="legal_published")


@view_config(
    route_name="pages.admin_legal_version",
    request_method="GET",
    renderer="admin/legal/version.html",
    permission=ADMIN,
)
def version_page(request):
    no_store(request)
    kind = documents.check_kind(request.matchdict["kind"])
    version = parse_path_id(request.matchdict["version"])
    if version is None:
        raise NotFound("There is no such version.", code="legal_page_not_found")
    return {
        "document": documents.find_version(request.db, kind, version),
        "kind_name": documents.KIND_NAMES[kind],
    }
