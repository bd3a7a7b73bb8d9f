"""Opening support tickets: through the JSON API and through the page's form."""

from __future__ import annotations

TICKETS = "/api/dashboard/tickets"


def open_ticket(client, subject: str = "Cannot download", body: str = "The link expired.", **kw):
    return client.post_json(TICKETS, {"subject": subject, "body": body, **kw}, status=201).json


def open_by_form(client, subject="Cannot download", body="The link expired.", order=None):
    form = client.get("/account/tickets/new").forms["ticket-form"]
    form["subject"] = subject
    form["body"] = body
    if order is not None:
        form["orderNumber"] = order
    response = form.submit(status=303)
    ticket_id = int(response.location.split("/account/tickets/")[1].split("?")[0])
    return ticket_id, response
