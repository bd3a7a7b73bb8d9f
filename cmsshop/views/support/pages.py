"""The customer's support ticket pages: the list, opening a ticket, a ticket's conversation
and replying. Same schemas as the JSON routes (views/support/api.py), same services
(cmsshop.services.support.tickets): a field is refused for the same reason in both."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop.errors import ApiError, RateLimited, ValidationFailed
from cmsshop.security import CUSTOMER
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.services.support import tickets
from cmsshop.views.shared.forms import (
    FormInvalid,
    field_errors,
    posted_fields,
    read_form,
    see_other,
)
from cmsshop.views.shared.json import read_page_request
from cmsshop.views.support.api import ReplySchema, TicketSchema, own_ticket
from cmsshop.web import format_date

NOTICES = {
    "ticket_opened": "Your ticket is open. We will answer on this page.",
    "ticket_replied": "Your reply was sent.",
}


def _refused(request, exc: ApiError) -> dict[str, str]:
    """A service's refusal (an order that is not the customer's, too many tickets or
    replies) as form errors, its headers (Retry-After) and status on the page."""
    request.response.status = exc.status
    for name, value in exc.headers.items():
        request.response.headers[name] = value
    return field_errors(exc)


@view_config(
    route_name="pages.account_tickets",
    request_method="GET",
    renderer="support/index.html",
    permission=CUSTOMER,
)
def tickets_list(request):
    page = tickets.list_customer_tickets(request.db, request.user.id, read_page_request(request))
    return {"page": page}


def _new_ticket_page(request, errors: dict, form: dict, status: int | None = None) -> dict:
    if status is not None:
        request.response.status = status
    orders = tickets.list_order_choices(request.db, request.user.id)
    order_options = [("", "No particular order")] + [
        (order.number, f"{order.number} ({format_date(order.created_at)})") for order in orders
    ]
    return {"errors": errors, "form": form, "order_options": order_options if orders else []}


@view_config(
    route_name="pages.account_ticket_new",
    request_method="GET",
    renderer="support/new.html",
    permission=CUSTOMER,
)
def new_ticket_page(request):
    return _new_ticket_page(request, {}, {})


@view_config(
    route_name="pages.account_ticket_new",
    request_method="POST",
    renderer="support/new.html",
    permission=CUSTOMER,
)
def new_ticket_submit(request):
    schema = TicketSchema()
    try:
        data = read_form(request, schema)
        ticket = tickets.submit_ticket(
            request.db,
            request.find_service(RateLimiter),
            request.user,
            data["subject"],
            data["body"],
            data["orderNumber"],
        )
    except FormInvalid as exc:
        return _new_ticket_page(request, exc.errors, exc.form, 422)
    except (ValidationFailed, RateLimited) as exc:
        errors = _refused(request, exc)
        typed = posted_fields(request, [node.name for node in schema.children])
        return _new_ticket_page(request, errors, typed)
    return see_other(request, f"/account/tickets/{ticket.id}", notice="ticket_opened")


def _ticket_page(request, ticket, errors: dict, form: dict, status: int | None = None) -> dict:
    if status is not None:
        request.response.status = status
    return {"ticket": ticket, "errors": errors, "form": form}


@view_config(
    route_name="pages.account_ticket",
    request_method="GET",
    renderer="support/ticket.html",
    permission=CUSTOMER,
)
def ticket_page(request):
    return _ticket_page(request, own_ticket(request), {}, {})


@view_config(
    route_name="pages.account_ticket_reply",
    request_method="POST",
    renderer="support/ticket.html",
    permission=CUSTOMER,
)
def reply_submit(request):
    ticket = own_ticket(request)
    try:
        data = read_form(request, ReplySchema())
        tickets.reply_as_customer(
            request.db, request.find_service(RateLimiter), request.user, ticket, data["body"]
        )
    except FormInvalid as exc:
        return _ticket_page(request, ticket, exc.errors, exc.form, 422)
    except (ValidationFailed, RateLimited) as exc:
        errors = _refused(request, exc)
        return _ticket_page(request, ticket, errors, posted_fields(request, ["body"]))
    return see_other(request, f"/account/tickets/{ticket.id}", notice="ticket_replied")
