"""The admin's support ticket pages: the queue, a ticket's conversation with the customer,
staff replies and status. Same schemas as the JSON routes (views/support/admin_api.py), same
services (cmsshop.services.support.tickets)."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop.security import ADMIN
from cmsshop.services.support import tickets
from cmsshop.views.shared.forms import FormInvalid, read_form, see_other
from cmsshop.views.shared.json import query_value, read_page_request
from cmsshop.views.shared.json import validate as validate_data
from cmsshop.views.support.admin_api import (
    StaffReplySchema,
    TicketFilterSchema,
    TicketStatusSchema,
    any_ticket,
)

NOTICES = {
    "ticket_answered": "Your reply was sent: the customer sees it on their ticket page.",
    "ticket_status_changed": "The ticket's status was changed.",
}
# The queue opens on the tickets waiting on staff; "all" shows every ticket.
DEFAULT_QUEUE = "open"
ALL = "all"


def queue_status(request) -> str | None:
    """The queue's ``status`` filter: open (the default), pending, closed, or None for
    ``all``; 422 for anything else."""
    raw = query_value(request, "status") or DEFAULT_QUEUE
    if raw == ALL:
        return None
    return validate_data(TicketFilterSchema(), {"status": raw})["status"]


@view_config(
    route_name="pages.admin_tickets",
    request_method="GET",
    renderer="admin/support/index.html",
    permission=ADMIN,
)
def queue_page(request):
    status = queue_status(request)
    page = tickets.list_ticket_queue(request.db, status, read_page_request(request))
    return {"page": page, "status": status or ALL}


def _ticket_page(
    request,
    ticket,
    reply: tuple[dict, dict] = ({}, {}),
    status_change: tuple[dict, dict] = ({}, {}),
    code: int | None = None,
) -> dict:
    """The ticket page; ``reply`` and ``status_change`` are each form's (errors, typed)."""
    if code is not None:
        request.response.status = code
    return {
        "ticket": ticket,
        "reply_errors": reply[0],
        "reply_form": reply[1],
        "status_errors": status_change[0],
        "status_form": status_change[1],
    }


@view_config(
    route_name="pages.admin_ticket",
    request_method="GET",
    renderer="admin/support/ticket.html",
    permission=ADMIN,
)
def ticket_page(request):
    return _ticket_page(request, any_ticket(request))


@view_config(
    route_name="pages.admin_ticket_reply",
    request_method="POST",
    renderer="admin/support/ticket.html",
    permission=ADMIN,
)
def reply_submit(request):
    ticket = any_ticket(request)
    try:
        data = read_form(request, StaffReplySchema())
    except FormInvalid as exc:
        return _ticket_page(request, ticket, reply=(exc.errors, exc.form), code=422)
    tickets.reply_as_staff(
        request.db,
        ticket,
        request.user,
        data["body"],
        data["status"],
        settings=request.registry.settings,
    )
    return see_other(request, f"/admin/tickets/{ticket.id}", notice="ticket_answered")


@view_config(
    route_name="pages.admin_ticket_status",
    request_method="POST",
    renderer="admin/support/ticket.html",
    permission=ADMIN,
)
def status_submit(request):
    ticket = any_ticket(request)
    try:
        data = read_form(request, TicketStatusSchema())
    except FormInvalid as exc:
        return _ticket_page(request, ticket, status_change=(exc.errors, exc.form), code=422)
    tickets.set_ticket_status(request.db, ticket, data["status"])
    return see_other(request, f"/admin/tickets/{ticket.id}", notice="ticket_status_changed")
