"""Ticket conversations through the JSON API: a customer reads their ticket's conversation
and replies; staff read any ticket and reply (optionally setting the status); replies are
limited per customer per hour; hostile bodies are refused with nothing written."""

from __future__ import annotations

import json

from helpers.clients import new_client
from helpers.purchases import make_purchase, openapi_validator
from helpers.support import TICKETS, open_ticket
from sqlalchemy import func, select

from cmsshop.models import SupportTicket, TicketMessage


def message_count(dbsession) -> int:
    dbsession.rollback()  # a fresh read transaction
    return dbsession.scalar(select(func.count()).select_from(TicketMessage))


def ticket_status(dbsession, ticket_id: int) -> str:
    dbsession.rollback()
    return dbsession.scalar(select(SupportTicket.status).where(SupportTicket.id == ticket_id))


def test_a_conversation_between_customer_and_staff(
    customer_app, admin_app, customer, admin, dbsession, storage_dir
):
    purchase = make_purchase(dbsession, customer, storage_dir)
    ticket = open_ticket(customer_app, orderNumber=purchase.order.number)
    path = f"{TICKETS}/{ticket['id']}"

    first = customer_app.get(path).json
    openapi_validator(customer_app, "/api/dashboard/tickets/{id}", "get", "200").validate(first)
    assert first["number"] == ticket["number"] and first["orderNumber"] == purchase.order.number
    assert first["messages"] == [
        {"author": "you", "body": "The link expired.", "createdAt": ticket["createdAt"]}
    ]

    staff = admin_app.post_json(
        f"/api/admin/tickets/{ticket['id']}/messages", {"body": "Here is a new link."}, status=201
    ).json
    openapi_validator(admin_app, "/api/admin/tickets/{id}/messages", "post", "201").validate(staff)
    assert staff["author"] == "staff" and staff["authorEmail"] == admin.email
    assert staff["ticketStatus"] == "pending"

    seen = customer_app.get(path)
    assert [m["author"] for m in seen.json["messages"]] == ["you", "staff"]
    assert seen.json["messages"][1]["body"] == "Here is a new link."
    assert seen.json["status"] == "pending"
    # The customer never learns which admin answered.
    assert admin.email not in seen.text and "Admin" not in seen.text

    reply = customer_app.post_json(f"{path}/messages", {"body": "Thanks, it works."}, status=201)
    openapi_validator(customer_app, "/api/dashboard/tickets/{id}/messages", "post", "201").validate(
        reply.json
    )
    assert reply.json["author"] == "you" and reply.json["ticketStatus"] == "open"
    assert reply.json["createdAt"].endswith("Z")

    full = admin_app.get(f"/api/admin/tickets/{ticket['id']}").json
    openapi_validator(admin_app, "/api/admin/tickets/{id}", "get", "200").validate(full)
    assert full["customer"] == {"id": customer.id, "email": customer.email, "name": customer.name}
    assert [(m["author"], m["authorEmail"]) for m in full["messages"]] == [
        ("customer", customer.email),
        ("staff", admin.email),
        ("customer", customer.email),
    ]
    assert [m["body"] for m in full["messages"]] == [
        "The link expired.",
        "Here is a new link.",
        "Thanks, it works.",
    ]
    assert full["status"] == "open"
    assert message_count(dbsession) == 2


def test_status_follows_the_conversation(customer_app, admin_app, dbsession):
    ticket = open_ticket(customer_app)
    staff_path = f"/api/admin/tickets/{ticket['id']}/messages"
    customer_path = f"{TICKETS}/{ticket['id']}/messages"
    # Answer and close in one step.
    closed = admin_app.post_json(staff_path, {"body": "Fixed.", "status": "closed"}, status=201)
    assert closed.json["ticketStatus"] == "closed"
    assert ticket_status(dbsession, ticket["id"]) == "closed"
    # The customer's reply reopens a closed ticket.
    customer_app.post_json(customer_path, {"body": "Not quite."}, status=201)
    assert ticket_status(dbsession, ticket["id"]) == "open"
    # A staff reply without a status leaves the ticket waiting on the customer.
    admin_app.post_json(staff_path, {"body": "Try again?"}, status=201)
    assert customer_app.get(f"{TICKETS}/{ticket['id']}").json["status"] == "pending"
    # ... and a status of "open" keeps it on staff's side.
    admin_app.post_json(staff_path, {"body": "Looking into it.", "status": "open"}, status=201)
    assert ticket_status(dbsession, ticket["id"]) == "open"
    # The PATCH route still sets the status alone.
    admin_app.patch_json(f"/api/admin/tickets/{ticket['id']}", {"status": "closed"})
    customer_app.post_json(customer_path, {"body": "One more thing."}, status=201)
    assert ticket_status(dbsession, ticket["id"]) == "open"
    assert message_count(dbsession) == 5


def test_another_customers_ticket_is_not_found(
    customer_app, other_customer_app, admin_app, dbsession
):
    ticket = open_ticket(customer_app)
    path = f"{TICKETS}/{ticket['id']}"
    assert other_customer_app.get(path, status=404).json["code"] == "ticket_not_found"
    response = other_customer_app.post_json(f"{path}/messages", {"body": "Mine now"}, status=404)
    assert response.json["code"] == "ticket_not_found"
    for raw in ("987654", "abc", "0", "-1", "99999999999", "1.5", "%F0%9F%98%80", "%D9%A3"):
        assert customer_app.get(f"{TICKETS}/{raw}", status=404).json["code"] == ("ticket_not_found")
        response = customer_app.post_json(f"{TICKETS}/{raw}/messages", {"body": "x"}, status=404)
        assert response.json["code"] == "ticket_not_found"
        assert admin_app.get(f"/api/admin/tickets/{raw}", status=404).json["code"] == (
            "ticket_not_found"
        )
        response = admin_app.post_json(
            f"/api/admin/tickets/{raw}/messages", {"body": "x"}, status=404
        )
        assert response.json["code"] == "ticket_not_found"
    assert message_count(dbsession) == 0
    assert ticket_status(dbsession, ticket["id"]) == "open"


def test_login_role_and_csrf_are_required(testapp, customer_app, admin_app, dbsession):
    ticket = open_ticket(customer_app)
    mine = f"{TICKETS}/{ticket['id']}"
    staff = f"/api/admin/tickets/{ticket['id']}"
    assert testapp.get(mine, status=401).json["code"] == "not_authenticated"
    assert testapp.post_json(f"{mine}/messages", {"body": "x"}, status=401).json["code"] == (
        "not_authenticated"
    )
    assert testapp.get(staff, status=401).json["code"] == "not_authenticated"
    assert customer_app.get(staff, status=403).json["code"] == "forbidden"
    response = customer_app.post_json(f"{staff}/messages", {"body": "I am staff"}, status=403)
    assert response.json["code"] == "forbidden"
    for client, path in ((customer_app, f"{mine}/messages"), (admin_app, f"{staff}/messages")):
        for token in ("", "stale"):
            response = client.post_json(
                path, {"body": "x"}, headers={"X-CSRF-Token": token}, status=403
            )
            assert response.json["code"] == "csrf_failed"
    assert message_count(dbsession) == 0


def test_replies_are_limited_per_customer_per_hour(make_app, customer, other_customer, admin):
    app = make_app(**{"cmsshop.ticket_replies_per_hour": "2"})
    alice, bob, staff = new_client(app), new_client(app), new_client(app)
    alice.login(customer.email)
    bob.login(other_customer.email)
    staff.login(admin.email)
    mine = open_ticket(alice)
    theirs = open_ticket(bob)
    path = f"{TICKETS}/{mine['id']}/messages"
    # Refused replies (invalid) do not use up the allowance.
    alice.post_json(path, {"body": ""}, status=422)
    for n in range(2):
        alice.post_json(path, {"body": f"Reply {n}"}, status=201)
    for _ in range(2):
        response = alice.post_json(path, {"body": "One more"}, status=429)
        assert response.json["code"] == "rate_limited"
        assert "2 replies per hour" in response.json["message"]
        assert 1 <= int(response.headers["Retry-After"]) <= 3600
    # Other customers and staff are not affected.
    bob.post_json(f"{TICKETS}/{theirs['id']}/messages", {"body": "Hello"}, status=201)
    for n in range(3):
        staff.post_json(f"/api/admin/tickets/{mine['id']}/messages", {"body": f"S{n}"}, status=201)
    conversation = alice.get(f"{TICKETS}/{mine['id']}").json
    assert [m["body"] for m in conversation["messages"]] == [
        "The link expired.",
        "Reply 0",
        "Reply 1",
        "S0",
        "S1",
        "S2",
    ]
    # Opening tickets has its own allowance, untouched by replies.
    open_ticket(alice, subject="Another thing")


def test_hostile_replies_are_refused_and_write_nothing(customer_app, admin_app, dbsession):
    ticket = open_ticket(customer_app)
    admin_app.patch_json(f"/api/admin/tickets/{ticket['id']}", {"status": "closed"})
    customer_path = f"{TICKETS}/{ticket['id']}/messages"
    staff_path = f"/api/admin/tickets/{ticket['id']}/messages"
    invalid = [
        {},
        {"body": ""},
        {"body": " \n\t "},
        {"body": "nul\u0000byte"},
        {"body": "b" * 20001},
        {"body": None},
        {"body": 42},
        {"body": ["x"]},
        {"body": {"text": "x"}},
        {"body": True},
        {"body": "x", "status": "open"},  # customers cannot set a status
        {"body": "x", "author": "staff"},
    ]
    for payload in invalid:
        response = customer_app.post_json(customer_path, payload, status=422)
        assert response.json["code"] == "validation_failed", payload
    for payload in [*invalid[:10], {"body": "x", "status": "resolved"}, {"body": "x", "status": 1}]:
        response = admin_app.post_json(staff_path, payload, status=422)
        assert response.json["code"] == "validation_failed", payload
    for path, client in ((customer_path, customer_app), (staff_path, admin_app)):
        for raw in ('{"body": "\\ud800"}', "[]", '"text"', "null", "1"):
            response = client.post(path, params=raw, content_type="application/json", status=422)
            assert response.json["code"] == "validation_failed"
        for raw in (b'{"body": "x"', b"\xff\xfe", b"{'body': 1}", b'{"body": NaN}'):
            response = client.post(path, params=raw, content_type="application/json", status=400)
            assert response.json["code"] == "malformed_json"
        response = client.post(path, params=b"body=x", content_type="text/plain", status=415)
        assert response.json["code"] == "unsupported_media_type"
        huge = json.dumps({"body": "x" * (2 * 1024 * 1024)})
        response = client.post(path, params=huge, content_type="application/json", status=413)
        assert response.json["code"] == "payload_too_large"
    assert message_count(dbsession) == 0
    assert ticket_status(dbsession, ticket["id"]) == "closed"
    # The longest allowed reply still goes in.
    customer_app.post_json(customer_path, {"body": "é" * 20000}, status=201)
    assert message_count(dbsession) == 1
