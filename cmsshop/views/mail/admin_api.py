"""Admin JSON routes of the mail outbox: recent messages and resending one (always on:
mail is core). The pages beside them are in cmsshop.views.mail.admin_pages."""

from __future__ import annotations

import colander
from pyramid.view import view_config

from cmsshop.errors import Conflict, NotFound
from cmsshop.models import MAIL_STATUSES, OutboxMessage
from cmsshop.security import ADMIN
from cmsshop.services.mail import admin as outbox_admin
from cmsshop.util import isoformat_z
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.json import (
    StrictString,
    page_json,
    parse_path_id,
    query_value,
    read_page_request,
    validate,
)


class MailFilterSchema(colander.MappingSchema):
    status = colander.SchemaNode(
        StrictString(), missing=None, validator=colander.OneOf(MAIL_STATUSES)
    )


def read_mail_filters(request) -> tuple[dict, dict]:
    """(validated, as typed) of the list's query; an empty status is no filter."""
    typed = {}
    status = query_value(request, "status")
    if status not in (None, ""):
        typed["status"] = status
    return validate(MailFilterSchema(), typed), typed


def message_not_found() -> NotFound:
    return NotFound("No outbox message has this id.", code="mail_message_not_found")


def message_id_of(request) -> int:
    message_id = parse_path_id(request.matchdict["id"])
    if message_id is None:
        raise message_not_found()
    return message_id


def resend_message(request, message_id: int) -> OutboxMessage:
    """The resend rule with its answers, for the JSON route and the page alike."""
    try:
        return outbox_admin.resend(request.db, message_id, request.user.email)
    except outbox_admin.MessageMissing:
        raise message_not_found() from None
    except outbox_admin.MessagePending:
        raise Conflict(
            "The message is still queued: the sender will deliver it (resend is for sent "
            "or failed messages).",
            code="mail_message_pending",
        ) from None


def message_summary(row: OutboxMessage) -> dict:
    """Without the bodies: what the list shows."""
    return {
        "id": row.id,
        "kind": row.kind,
        "to": row.to_address,
        "subject": row.subject,
        "status": row.status,
        "attempts": row.attempts,
        "lastError": row.last_error,
        "messageId": row.message_id,
        "createdAt": isoformat_z(row.created_at),
        "nextAttemptAt": isoformat_z(row.next_attempt_at) if row.status == "pending" else None,
        "sentAt": isoformat_z(row.sent_at),
    }


@view_config(route_name="admin.mail", request_method="GET", renderer="json", permission=ADMIN)
def list_mail(request):
    no_store(request)
    paging = read_page_request(request)
    filters, _ = read_mail_filters(request)
    page = outbox_admin.list_messages(request.db, paging, filters["status"])
    return page_json(page, message_summary)


@view_config(
    route_name="admin.mail_resend", request_method="POST", renderer="json", permission=ADMIN
)
def resend_mail(request):
    return message_summary(resend_message(request, message_id_of(request)))
