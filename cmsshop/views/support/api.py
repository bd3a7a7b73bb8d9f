"""A customer's support tickets as JSON: their list, opening one, its conversation and
replies (services.support.tickets)."""

from __future__ import annotations

import colander
from pyramid.view import view_config

from cmsshop.errors import NotFound
from cmsshop.security import CUSTOMER
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.services.support import tickets
from cmsshop.util import isoformat_z
from cmsshop.views.shared.json import (
    StrictMapping,
    StrictString,
    page_json,
    parse_path_id,
    read_json,
    read_page_request,
)
from cmsshop.views.shared.schema import text_validator

# --- serialisation -----------------------------------------------------------------------


def ticket_body(ticket) -> dict:
    return {
        "id": ticket.id,
        "number": ticket.number,
        "subject": ticket.subject,
        "body": ticket.body,
        "status": ticket.status,
        "orderNumber": ticket.order.number if ticket.order is not None else None,
        "createdAt": isoformat_z(ticket.created_at),
        "updatedAt": isoformat_z(ticket.updated_at),
    }


def customer_message_body(message) -> dict:
    """A reply as its customer sees it: "you" or "staff" (never which admin wrote it)."""
    return {
        "author": "staff" if message.from_staff else "you",
        "body": message.body,
        "createdAt": isoformat_z(message.created_at),
    }


def customer_conversation_body(ticket) -> dict:
    """The ticket with its conversation: the opening message, then every reply."""
    opening = {"author": "you", "body": ticket.body, "createdAt": isoformat_z(ticket.created_at)}
    return {
        **ticket_body(ticket),
        "messages": [opening, *(customer_message_body(m) for m in ticket.messages)],
    }


# --- input -------------------------------------------------------------------------------


MESSAGE_LENGTH = (1, 20000)  # a ticket's opening message and every reply


class TicketSchema(colander.MappingSchema):
    schema_type = StrictMapping
    subject = colander.SchemaNode(StrictString(), validator=text_validator(3, 200))
    body = colander.SchemaNode(StrictString(), validator=text_validator(*MESSAGE_LENGTH))
    orderNumber = colander.SchemaNode(  # noqa: N815 - JSON name
        StrictString(), missing=None, validator=text_validator(1, 32, blank_ok=True)
    )


class ReplySchema(colander.MappingSchema):
    """A reply in a ticket's conversation: its body, as a ticket's opening message."""

    schema_type = StrictMapping
    body = colander.SchemaNode(StrictString(), validator=text_validator(*MESSAGE_LENGTH))


class TicketNotFound(NotFound):
    code, title = "ticket_not_found", "Ticket not found"
    message = "No support ticket has this id."


# --- views -------------------------------------------------------------------------------


@view_config(
    route_name="dashboard.tickets", request_method="GET", renderer="json", permission=CUSTOMER
)
def list_own_tickets(request):
    """A page of the logged-in customer's tickets."""
    page = tickets.list_customer_tickets(request.db, request.user.id, read_page_request(request))
    return page_json(page, ticket_body)


@view_config(
    route_name="dashboard.tickets", request_method="POST", renderer="json", permission=CUSTOMER
)
def open_ticket(request):
    data = read_json(request, TicketSchema())
    ticket = tickets.submit_ticket(
        request.db,
        request.find_service(RateLimiter),
        request.user,
        data["subject"],
        data["body"],
        data["orderNumber"],
    )
    request.response.status = 201
    return ticket_body(ticket)


def own_ticket(request):
    """The path's ticket with its conversation, if it is the logged-in customer's (404
    ``ticket_not_found`` if not: another customer's ticket looks like a missing one)."""
    ticket_id = parse_path_id(request.matchdict["id"])
    ticket = tickets.find_customer_ticket(request.db, request.user.id, ticket_id)
    if ticket is None:
        raise TicketNotFound()
    return ticket


@view_config(
    route_name="dashboard.ticket", request_method="GET", renderer="json", permission=CUSTOMER
)
def get_ticket(request):
    return customer_conversation_body(own_ticket(request))


@view_config(
    route_name="dashboard.ticket_messages",
    request_method="POST",
    renderer="json",
    permission=CUSTOMER,
)
def reply_to_ticket(request):
    ticket = own_ticket(request)
    data = read_json(request, ReplySchema())
    message = tickets.reply_as_customer(
        request.db, request.find_service(RateLimiter), request.user, ticket, data["body"]
    )
    request.response.status = 201
    return {**customer_message_body(message), "ticketStatus": ticket.status}
