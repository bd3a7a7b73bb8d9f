"""A staff reply to a ticket queues one notice to its customer (JSON route and admin
page alike), signed by the shop; a customer's own reply queues none."""

from __future__ import annotations

from helpers.clients import logged_in
from helpers.support import TICKETS, open_by_form, open_ticket
from sqlalchemy import select

from cmsshop.models import OutboxMessage, TicketMessage


def outbox(dbsession) -> list[OutboxMessage]:
    dbsession.rollback()  # a fresh read transaction (SQLite snapshot)
    return list(dbsession.scalars(select(OutboxMessage).order_by(OutboxMessage.id)))


def newest_message(dbsession) -> TicketMessage:
    dbsession.rollback()
    return dbsession.scalar(select(TicketMessage).order_by(TicketMessage.id.desc()).limit(1))


def check_notice(message: OutboxMessage, dbsession, customer, admin, ticket_id: int, reply: str):
    staff_message = newest_message(dbsession)
    assert staff_message.from_staff and staff_message.body == reply
    assert message.kind == "ticket_reply"
    assert message.to_address == customer.email and message.user_id == customer.id
    assert message.dedupe_key == f"ticket-reply:{staff_message.id}"
    assert message.subject.startswith("Re: [TCK-") and "Cannot download" in message.subject
    for body in (message.text_body, message.html_body):
        assert f"http://localhost/account/tickets/{ticket_id}" in body
        assert "Cannot download" in body and "TCK-" in body
        # Staff sign as the shop: nothing names the admin who answered.
        assert admin.email not in body and admin.name not in body
    assert reply in message.text_body


def test_a_json_staff_reply_queues_one_notice(customer_app, admin_app, customer, admin, dbsession):
    ticket = open_ticket(customer_app)
    assert outbox(dbsession) == []
    path = f"/api/admin/tickets/{ticket['id']}/messages"
    admin_app.post_json(path, {"body": "Here is a new link: <https://x.example/?a=1&b=2>"})
    (message,) = outbox(dbsession)
    reply = "Here is a new link: <https://x.example/?a=1&b=2>"
    check_notice(message, dbsession, customer, admin, ticket["id"], reply)
    assert ticket["number"] in message.subject
    # Escaped in HTML, as typed in the text part.
    assert "&lt;https://x.example/?a=1&amp;b=2&gt;" in message.html_body

    # The customer answers: no notice of their own reply. A second staff reply is a new
    # message with its own notice.
    customer_app.post_json(f"{TICKETS}/{ticket['id']}/messages", {"body": "Thanks!"})
    assert len(outbox(dbsession)) == 1
    admin_app.post_json(path, {"body": "Glad it works.", "status": "closed"})
    first, second = outbox(dbsession)
    assert second.dedupe_key != first.dedupe_key
    assert "Glad it works." in second.text_body and "closed the ticket" in second.text_body


def test_an_admin_page_reply_queues_one_notice(app, customer, admin, dbsession):
    alice = logged_in(app, customer.email)
    staff = logged_in(app, admin.email)
    ticket_id, _ = open_by_form(alice)
    form = staff.get(f"/admin/tickets/{ticket_id}").forms["reply-form"]
    form["body"] = "Here is a new link."
    form.submit(status=303)
    (message,) = outbox(dbsession)
    check_notice(message, dbsession, customer, admin, ticket_id, "Here is a new link.")


def test_a_customer_reply_queues_nothing(app, customer, dbsession):
    alice = logged_in(app, customer.email)
    ticket_id, _ = open_by_form(alice)
    reply = alice.get(f"/account/tickets/{ticket_id}").forms["reply-form"]
    reply["body"] = "Any news?"
    reply.submit(status=303)
    assert outbox(dbsession) == []
