"""Admin routes for support tickets: the queue of every customer's tickets, and status."""

from __future__ import annotations

import colander
from pyramid.view import view_config

from cmsshop.errors import NotFound
from cmsshop.models import TICKET_STATUSES
from cmsshop.security import ADMIN
from cmsshop.services.support import tickets
from cmsshop.views.common import (
    StrictMapping,
    StrictString,
    page_json,
    parse_path_id,
    query_value,
    read_json,
    read_page_request,
)
from cmsshop.views.common import validate as validate_data
from cmsshop.views.dashboard import ticket_body


class TicketNotFound(NotFound):
    code, title = "ticket_not_found", "Ticket not found"
    message = "No support ticket has this id."


class TicketFilterSchema(colander.MappingSchema):
    status = colander.SchemaNode(
        colander.String(), missing=None, validator=colander.OneOf(TICKET_STATUSES)
    )


class TicketStatusSchema(colander.MappingSchema):
    schema_type = StrictMapping
    status = colander.SchemaNode(StrictString(), validator=colander.OneOf(TICKET_STATUSES))


def admin_ticket_body(ticket) -> dict:
    body = ticket_body(ticket)
    body["customer"] = {"id": ticket.user.id, "email": ticket.user.email, "name": ticket.user.name}
    return body


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
