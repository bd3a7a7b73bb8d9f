"""Support tickets: customers open and list their own; admins see all and set status."""

from __future__ import annotations

import json
import re
import threading

import requests
from helpers.app import serve
from helpers.clients import new_client
from helpers.purchases import http_login, make_purchase, openapi_validator
from sqlalchemy import func, select

from cmsshop.models import SupportTicket

TICKETS = "/api/dashboard/tickets"
NUMBER = re.compile(r"^TCK-[0-9A-HJKMNP-TV-Z]{6}$")


def ticket_count(dbsession, user=None) -> int:
    dbsession.commit()  # a fresh read transaction
    query = select(func.count()).select_from(SupportTicket)
    if user is not None:
        query = query.where(SupportTicket.user_id == user.id)
    return dbsession.scalar(query)


def test_open_and_list_own_tickets(customer_app, other_customer_app, dbsession):
    response = customer_app.post_json(
        TICKETS, {"subject": "Cannot download", "body": "The link says expired."}, status=201
    )
    body = response.json
    assert NUMBER.match(body["number"])
    assert body["subject"] == "Cannot download"
    assert body["body"] == "The link says expired."
    assert body["status"] == "open"
    assert body["orderNumber"] is None
    assert body["createdAt"].endswith("Z")
    assert {"id", "number", "subject", "status", "createdAt"} <= set(body)
    openapi_validator(customer_app, TICKETS, "post", "201").validate(body)

    second = customer_app.post_json(TICKETS, {"subject": "Another", "body": "x"}, status=201).json
    assert second["number"] != body["number"]
    listed = customer_app.get(TICKETS).json
    assert [t["id"] for t in listed["items"]] == [second["id"], body["id"]]
    assert listed["total"] == 2
    openapi_validator(customer_app, TICKETS, "get", "200").validate(listed)
    assert other_customer_app.get(TICKETS).json == {
        "items": [],
        "page": 1,
        "perPage": 20,
        "total": 0,
    }


def test_order_number_must_be_one_of_the_customers_orders(
    customer_app, dbsession, customer, other_customer, storage_dir
):
    mine = make_purchase(dbsession, customer, storage_dir)
    theirs = make_purchase(dbsession, other_customer, storage_dir)
    ok = customer_app.post_json(
        TICKETS,
        {"subject": "Invoice address", "body": "Please fix it.", "orderNumber": mine.order.number},
        status=201,
    )
    assert ok.json["orderNumber"] == mine.order.number
    for number in (theirs.order.number, "ORD-NOPE", "' OR 1=1 --"):
        response = customer_app.post_json(
            TICKETS, {"subject": "Hello", "body": "x", "orderNumber": number}, status=422
        )
        assert response.json["code"] == "validation_failed"
        assert set(response.json["errors"]) == {"orderNumber"}
    assert ticket_count(dbsession) == 1


def test_invalid_tickets_are_422_with_field_errors_and_do_not_count(
    customer_app, dbsession, customer
):
    cases = [
        ({}, {"subject", "body"}),
        ({"subject": "ab", "body": "x"}, {"subject"}),
        ({"subject": "s" * 201, "body": "x"}, {"subject"}),
        ({"subject": 123, "body": "x"}, {"subject"}),
        ({"subject": "   ", "body": "x"}, {"subject"}),
        ({"subject": "abc\u0000", "body": "x"}, {"subject"}),
        ({"subject": "Hello", "body": ""}, {"body"}),
        ({"subject": "Hello", "body": " \n\t "}, {"body"}),
        ({"subject": "Hello", "body": "b" * 20001}, {"body"}),
        ({"subject": "Hello", "body": None}, {"body"}),
        ({"subject": "Hello", "body": ["x"]}, {"body"}),
        ({"subject": "Hello", "body": "x", "orderNumber": 5}, {"orderNumber"}),
        ({"subject": "Hello", "body": "x", "orderNumber": "o" * 33}, {"orderNumber"}),
    ]
    for payload, fields in cases:
        response = customer_app.post_json(TICKETS, payload, status=422)
        assert response.json["code"] == "validation_failed"
        assert set(response.json["errors"]) == fields, payload
    # Unknown fields, a lone surrogate, and bodies that are not a JSON object.
    for raw in (
        '{"subject": "Hello", "body": "x", "priority": "urgent"}',
        '{"subject": "Hello", "body": "\\ud800"}',
        "[]",
        '"just a string"',
    ):
        response = customer_app.post(
            TICKETS, params=raw, content_type="application/json", status=422
        )
        assert response.json["code"] == "validation_failed"
    for raw in ('{"subject": "Hello", "body": "x"', "{'subject': 1}", "\xff\xfe"):
        response = customer_app.post(
            TICKETS, params=raw.encode("latin-1"), content_type="application/json", status=400
        )
        assert response.json["code"] == "malformed_json"
    response = customer_app.post(
        TICKETS, params=b"subject=Hello", content_type="text/plain", status=415
    )
    assert response.json["code"] == "unsupported_media_type"
    huge = json.dumps({"subject": "Hello", "body": "x" * (2 * 1024 * 1024)})
    response = customer_app.post(TICKETS, params=huge, content_type="application/json", status=413)
    assert response.json["code"] == "payload_too_large"
    # None of that counted against the hourly limit (5): five real tickets still go in.
    for n in range(5):
        customer_app.post_json(TICKETS, {"subject": f"Ticket {n}", "body": "x"}, status=201)
    assert ticket_count(dbsession, customer) == 5


def test_tickets_need_login_and_csrf(testapp, customer_app):
    assert testapp.post_json(TICKETS, {"subject": "abc", "body": "x"}, status=401).json["code"] == (
        "not_authenticated"
    )
    for token in ("", "stale"):
        response = customer_app.post_json(
            TICKETS, {"subject": "abc", "body": "x"}, headers={"X-CSRF-Token": token}, status=403
        )
        assert response.json["code"] == "csrf_failed"


def test_hourly_limit_per_customer(make_app, customer, other_customer, dbsession):
    app = make_app(**{"cmsshop.tickets_per_hour": "2"})
    alice, bob = new_client(app), new_client(app)
    alice.login(customer.email)
    bob.login(other_customer.email)
    for n in range(2):
        alice.post_json(TICKETS, {"subject": f"Ticket {n}", "body": "x"}, status=201)
    for _ in range(2):
        response = alice.post_json(TICKETS, {"subject": "One more", "body": "x"}, status=429)
        assert response.json["code"] == "ticket_rate_limited"
        assert 1 <= int(response.headers["Retry-After"]) <= 3600
        assert response.json["retryAfter"] == int(response.headers["Retry-After"])
    bob.post_json(TICKETS, {"subject": "Bob's ticket", "body": "x"}, status=201)
    assert ticket_count(dbsession, customer) == 2
    assert ticket_count(dbsession, other_customer) == 1


def test_concurrent_tickets_cannot_exceed_the_limit(make_app, customer, dbsession):
    """Six tickets at once against a limit of two: exactly two are opened.

    The shared counter is one atomic upsert per request, so concurrent requests see
    distinct counts on PostgreSQL and SQLite alike.
    """
    app = make_app(**{"cmsshop.tickets_per_hour": "2"})
    with serve(app) as base_url:
        clients = [http_login(base_url, customer.email) for _ in range(6)]
        barrier = threading.Barrier(len(clients))
        statuses: list[int] = [0] * len(clients)

        def send(index: int, client: requests.Session) -> None:
            barrier.wait()
            response = client.post(
                base_url + TICKETS, json={"subject": f"Race {index}", "body": "x"}, timeout=60
            )
            statuses[index] = response.status_code

        threads = [threading.Thread(target=send, args=(i, c)) for i, c in enumerate(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for client in clients:
            client.close()
    assert sorted(statuses) == [201, 201, 429, 429, 429, 429]
    assert ticket_count(dbsession, customer) == 2


# --- admin -------------------------------------------------------------------------------


def test_admin_lists_every_ticket_and_filters_by_status(
    admin_app, customer_app, other_customer_app, customer, other_customer
):
    first = customer_app.post_json(TICKETS, {"subject": "Alice 1", "body": "a"}).json
    second = other_customer_app.post_json(TICKETS, {"subject": "Bob 1", "body": "b"}).json
    body = admin_app.get("/api/admin/tickets").json
    assert body["total"] == 2
    assert [t["id"] for t in body["items"]] == [second["id"], first["id"]]
    assert body["items"][0]["customer"] == {
        "id": other_customer.id,
        "email": other_customer.email,
        "name": other_customer.name,
    }
    assert body["items"][1]["body"] == "a"
    openapi_validator(admin_app, "/api/admin/tickets", "get", "200").validate(body)

    patched = admin_app.patch_json(f"/api/admin/tickets/{first['id']}", {"status": "pending"})
    assert patched.json["status"] == "pending"
    assert patched.json["customer"]["email"] == customer.email
    openapi_validator(admin_app, "/api/admin/tickets/{id}", "patch", "200").validate(patched.json)
    open_only = admin_app.get("/api/admin/tickets", params={"status": "open"}).json
    assert [t["id"] for t in open_only["items"]] == [second["id"]]
    pending = admin_app.get("/api/admin/tickets", params={"status": "pending"}).json
    assert [t["id"] for t in pending["items"]] == [first["id"]]
    assert admin_app.get("/api/admin/tickets", params={"status": "closed"}).json["total"] == 0
    for bad in ("bogus", "OPEN"):
        response = admin_app.get("/api/admin/tickets", params={"status": bad}, status=422)
        assert set(response.json["errors"]) == {"status"}
    # A repeated filter is refused, not read as "the last one" (as every list does).
    repeated = admin_app.get("/api/admin/tickets?status=open&status=closed", status=422)
    assert set(repeated.json["errors"]) == {"status"}
    assert admin_app.get("/api/admin/tickets?status=%ff", status=400).json["code"] in {
        "malformed_query",
        "malformed_request",
    }
    paged = admin_app.get("/api/admin/tickets", params={"perPage": "1", "page": "2"}).json
    assert [t["id"] for t in paged["items"]] == [first["id"]] and paged["total"] == 2

    # The customer sees the new status in their own list.
    assert customer_app.get(TICKETS).json["items"][0]["status"] == "pending"
    admin_app.patch_json(f"/api/admin/tickets/{first['id']}", {"status": "closed"})
    assert customer_app.get(TICKETS).json["items"][0]["status"] == "closed"


def test_admin_status_changes_are_validated(admin_app, customer_app):
    ticket = customer_app.post_json(TICKETS, {"subject": "Alice 1", "body": "a"}).json
    path = f"/api/admin/tickets/{ticket['id']}"
    for payload in ({}, {"status": "resolved"}, {"status": 1}, {"status": "open", "x": 1}):
        response = admin_app.patch_json(path, payload, status=422)
        assert response.json["code"] == "validation_failed"
    admin_app.patch(path, params=b"{", content_type="application/json", status=400)
    for raw in ("987654", "abc", "0", "-1", "99999999999", "%F0%9F%98%80"):
        response = admin_app.patch_json(f"/api/admin/tickets/{raw}", {"status": "open"}, status=404)
        assert response.json["code"] == "ticket_not_found"
    response = admin_app.patch_json(
        path, {"status": "closed"}, headers={"X-CSRF-Token": "nope"}, status=403
    )
    assert response.json["code"] == "csrf_failed"
    assert customer_app.get(TICKETS).json["items"][0]["status"] == "open"


def test_admin_routes_are_for_admins_only(testapp, customer_app, customer):
    ticket = customer_app.post_json(TICKETS, {"subject": "Alice 1", "body": "a"}).json
    path = f"/api/admin/tickets/{ticket['id']}"
    assert customer_app.get("/api/admin/tickets", status=403).json["code"] == "forbidden"
    assert customer_app.patch_json(path, {"status": "closed"}, status=403).json["code"] == (
        "forbidden"
    )
    assert testapp.get("/api/admin/tickets", status=401).json["code"] == "not_authenticated"
    assert testapp.patch_json(path, {"status": "closed"}, status=401).json["code"] == (
        "not_authenticated"
    )
