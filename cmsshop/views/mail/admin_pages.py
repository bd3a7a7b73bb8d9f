"""Admin pages of the mail outbox (/admin/mail): recent messages with a status filter,
one message (headers, text body, the HTML body as escaped source -- never rendered
into the admin page, where a hostile body would run with the admin's session), and the
resend button, on the services of the JSON routes in cmsshop.views.mail.admin_api."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop.errors import ApiError
from cmsshop.models import MAIL_STATUSES
from cmsshop.security import ADMIN
from cmsshop.services.mail import admin as outbox_admin
from cmsshop.services.mail.delivery import build_email
from cmsshop.views.mail.admin_api import (
    message_id_of,
    message_not_found,
    read_mail_filters,
    resend_message,
)
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.forms import see_other
from cmsshop.views.shared.json import read_page_request
from cmsshop.web import info

NOTICES = {
    "mail_resent": "The message is queued again; the sender delivers it on its next pass.",
    "mail_pending": info("The message is still queued: the sender will deliver it."),
}
SHOWN_HEADERS = ("From", "To", "Subject", "Date", "Message-ID", "Auto-Submitted")


@view_config(
    route_name="pages.admin_mail",
    request_method="GET",
    renderer="admin/mail/index.html",
    permission=ADMIN,
)
def outbox_page(request):
    no_store(request)
    paging = read_page_request(request)
    filters, typed = read_mail_filters(request)
    page = outbox_admin.list_messages(request.db, paging, filters["status"])
    return {
        "admin_section": "mail",
        "page": page,
        "filters": typed,
        "statuses": MAIL_STATUSES,
    }


@view_config(
    route_name="pages.admin_mail_message",
    request_method="GET",
    renderer="admin/mail/message.html",
    permission=ADMIN,
)
def message_page(request):
    no_store(request)
    try:
        row = outbox_admin.find_message(request.db, message_id_of(request))
    except outbox_admin.MessageMissing:
        raise message_not_found() from None
    # The headers as the sender builds them (Date: now, for a message not sent yet).
    try:
        built = build_email(row, request.registry.settings["cmsshop.mail.from"])
        headers = [(name, str(built[name])) for name in SHOWN_HEADERS if built[name]]
    except (ValueError, TypeError) as exc:  # the sender fails such a message too
        headers = [("To", row.to_address), ("Subject", row.subject), ("Error", str(exc))]
    return {
        "admin_section": "mail",
        "message": row,
        "headers": headers,
        "can_resend": row.status != "pending",
    }


@view_config(
    route_name="pages.admin_mail_resend",
    request_method="POST",
    permission=ADMIN,
)
def resend_submit(request):
    message_id = message_id_of(request)
    try:
        resend_message(request, message_id)
    except ApiError as exc:
        if exc.code != "mail_message_pending":
            raise
        return see_other(request, f"/admin/mail/{message_id}", notice="mail_pending")
    return see_other(request, f"/admin/mail/{message_id}", notice="mail_resent")
