"""Admin routes for support tickets: the queue of every customer's tickets, one ticket's
conversation, staff replies and status."""

from __future__ import annotations

import colander
from pyramid.view import view_config

from cmsshop.models import TICKET_STATUSES
from cmsshop.security import ADMIN
from cmsshop.services.support import tickets
from cmsshop.util import isoformat_z
from cmsshop.views.shared.json import (
    StrictMapping,
    StrictString,
    page_json,
    parse_path_id,
    query_value,
    read_json,
    read_page_request,
)
from cmsshop.views.shared.json import validate as validate_data
from cmsshop.views.shared.schema import text_validator
from cmsshop.views.support.api import MESSAGE_LENGTH, TicketNotFound, ticket_body


class TicketFilterSchema(colander.MappingSchema):
    status = colander.SchemaNode(
        colander.String(), missing=None, validator=colander.OneOf(TICKET_STATUSES)
    )


class TicketStatusSchema(colander.MappingSchema):
    schema_type = StrictMapping
    status = colander.SchemaNode(StrictString(), validator=colander.OneOf(TICKET_STATUSES))


class StaffReplySchema(colander.MappingSchema):
    """A staff reply, and optionally the status to leave the ticket in (pending if not
    given: the ticket waits on the customer)."""

    schema_type = StrictMapping
    body = colander.SchemaNode(StrictString(), validator=text_validator(*MESSAGE_LENGTH))
    status = colander.SchemaNode(
        StrictString(), missing=None, validator=colander.OneOf(TICKET_STATUSES)
    )


def person_body(user) -> dict:
    return {"id": user.id, "email": user.email, "name": user.name}


def admin_ticket_body(ticket) -> dict:
    body = ticket_body(ticket)
    body["customer"] = person_body(ticket.user)
    return body


def admin_message_body(message) -> dict:
    """A reply as staff see it: who wrote it, staff included."""
    return {
        "author": "staff" if message.from_staff else "customer",
        "authorEmail": message.author.email,
        "authorName": message.author.name,
        "body": message.body,
        "createdAt": isoformat_z(message.created_at),
    }


def admin_conversation_body(ticket) -> dict:
    opening = {
        "author": "customer",
        "authorEmail": ticket.user.email,
        "authorName": ticket.user.name,
        "body": ticket.body,
        "createdAt": isoformat_z(ticket.created_at),
    }
    return {
        **admin_ticket_body(ticket),
        "messages": [opening, *(admin_message_body(m) for m in ticket.messages)],
    }


def any_ticket(request):
    """The path's ticket with its conversation (404 ``ticket_not_found``)."""
    ticket = tickets.find_ticket_conversation(request.db, parse_path_id(request.matchdict["id"]))
    if ticket is None:
        raise TicketNotFound()
    return ticket


@view_config(
    route_name="dashboard.admin_tickets", request_method="GET", renderer="json", permission=ADMIN
)
def list_tickets(request):
    page_request = read_page_request(request)
    raw = query_value(request, "status")
    status = validate_data(TicketFilterSchema(), {} if raw is None else {"status": raw})["status"]
    page = tickets.list_all_tickets(request.db, status, page_request)
    return page_json(page, admin_ticket_body)


@view_config(
    route_name="dashboard.admin_ticket", request_method="PATCH", renderer="json", permission=ADMIN
)
def update_ticket(request):
    ticket_id = parse_path_id(request.matchdict["id"])
    ticket = tickets.find_ticket(request.db, ticket_id) if ticket_id is not None else None
    if ticket is None:
        raise TicketNotFound()
    data = read_json(request, TicketStatusSchema())
    tickets.set_ticket_status(request.db, ticket, data["status"])
    return admin_ticket_body(ticket)


@view_config(
    route_name="dashboard.admin_ticket", request_method="GET", renderer="json", permission=ADMIN
)
def get_ticket(request):
    return admin_conversation_body(any_ticket(request))


@view_config(
    route_name="dashboard.admin_ticket_messages",
    request_method="POST",
    renderer="json",
    permission=ADMIN,
)
def reply_to_ticket(request):
    ticket = any_ticket(request)
    data = read_json(request, StaffReplySchema())
    message = tickets.reply_as_staff(
        request.db,
        ticket,
        request.user,
        data["body"],
        data["status"],
        settings=request.registry.settings,
    )
    request.response.status = 201
    return {**admin_message_body(message), "ticketStatus": ticket.status}
