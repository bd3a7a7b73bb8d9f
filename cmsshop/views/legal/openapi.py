"""The OpenAPI part of the legal module: the admin routes of the legal pages (the public
pages are HTML only)."""

from __future__ import annotations

from cmsshop import openapi as oa
from cmsshop.models import LEGAL_KINDS
from cmsshop.views.legal.admin_api import MAX_BODY
from cmsshop.views.shared.schema import DATE_TIME, body_schema, text_schema

DOCUMENT_FIELDS = {
    "kind": {"enum": list(LEGAL_KINDS)},
    "version": {"type": "integer", "minimum": 1},
    "title": {"type": "string"},
    "body": {"type": "string", "description": "Markdown source"},
    "bodyHtml": {"type": "string", "description": "Rendered, sanitised HTML"},
    "publishedAt": DATE_TIME,
    "publishedBy": {"type": ["integer", "null"], "description": "The admin's user id"},
    "url": {"type": "string", "description": "The public page"},
}
DOCUMENT = {"type": "object", "required": list(DOCUMENT_FIELDS), "properties": DOCUMENT_FIELDS}
KIND_FIELDS = {
    "kind": {"enum": list(LEGAL_KINDS)},
    "name": {"type": "string"},
    "current": {
        "oneOf": [oa.ref("LegalDocument"), {"type": "null"}],
        "description": "The published (newest) version; null: never published",
    },
}
KIND = {"type": "object", "required": list(KIND_FIELDS), "properties": KIND_FIELDS}
KIND_WITH_VERSIONS = {
    "allOf": [
        oa.ref("LegalKind"),
        {
            "type": "object",
            "required": ["versions"],
            "properties": {
                "versions": {"type": "array", "items": oa.ref("LegalDocument")},
            },
        },
    ]
}
KIND_PARAM = oa.path_param("kind", {"type": "string"})
TAGS = ["admin", "legal"]

ADMIN_PATHS = {
    "/api/admin/legal": {
        "get": oa.operation(
            "The legal pages (terms, privacy, imprint, refunds), each with its published "
            "version (admin)",
            {
                **oa.ok(
                    {
                        "type": "object",
                        "required": ["items"],
                        "properties": {"items": {"type": "array", "items": oa.ref("LegalKind")}},
                    }
                ),
                **oa.errors(401, 403),
            },
            tags=TAGS,
        )
    },
    "/api/admin/legal/{kind}": {
        "get": oa.operation(
            "One legal page with every version, newest first (admin); 404 "
            "legal_page_not_found for an unknown kind",
            {**oa.ok(KIND_WITH_VERSIONS), **oa.errors(401, 403, 404)},
            params=[KIND_PARAM],
            tags=TAGS,
        ),
        "post": oa.operation(
            "Publish a new version of a legal page (admin): it replaces the public page at "
            "once; older versions stay, unchanged (orders name the terms version accepted)",
            {
                **oa.ok(oa.ref("LegalDocument"), "Created", 201),
                **oa.errors(401, 403, 404, 415, 422),
            },
            params=[KIND_PARAM],
            body=body_schema(
                {
                    "title": text_schema(200, min_length=1),
                    "body": {
                        **text_schema(MAX_BODY, min_length=1, multiline=True),
                        "description": "Markdown",
                    },
                },
                ["title", "body"],
            ),
            csrf=True,
            tags=TAGS,
        ),
    },
}

ADMIN_SCHEMAS = {"LegalDocument": DOCUMENT, "LegalKind": KIND}
