"""The support ticket pages through WebTest: the customer's list, new-ticket form and
conversation, the admin queue and ticket page. Forms keep what was typed and show the
API's own errors per field; CSRF, other customers' tickets, roles and hostile input are
refused with a 4xx page, never a 500."""

from __future__ import annotations

import pytest
from helpers.clients import logged_in, page_client
from helpers.html import h1_of, title_of
from helpers.notices import flashed
from helpers.purchases import make_purchase
from helpers.support import open_by_form
from sqlalchemy import func, select

from cmsshop.models import SupportTicket, TicketMessage


def field_errors(response) -> dict[str, str]:
    return {p["id"]: p.get_text(strip=True) for p in response.html.find_all(class_="error")}


def ticket_counts(dbsession) -> tuple[int, int]:
    dbsession.rollback()
    tickets = dbsession.scalar(select(func.count()).select_from(SupportTicket))
    messages = dbsession.scalar(select(func.count()).select_from(TicketMessage))
    return tickets, messages


def status_of(dbsession, ticket_id: int) -> str:
    dbsession.rollback()
    return dbsession.scalar(select(SupportTicket.status).where(SupportTicket.id == ticket_id))


@pytest.fixture
def alice(app, customer):
    return logged_in(app, customer.email)


@pytest.fixture
def bob(app, other_customer):
    return logged_in(app, other_customer.email)


@pytest.fixture
def staff(app, admin):
    return logged_in(app, admin.email)


# --- customer ----------------------------------------------------------------------------


def test_ticket_list_is_empty_then_lists_and_pages(alice, dbsession):
    response = alice.get("/account/tickets")
    assert title_of(response).startswith("Support tickets")
    assert h1_of(response) == "Support tickets"
    assert response.html.find("a", href="/account/tickets/new").get_text(strip=True) == (
        "Open a ticket"
    )
    assert "You have no support tickets" in response.text
    assert response.html.find("a", href="/account/tickets")["aria-current"] == "page"
    for n in range(3):
        open_by_form(alice, subject=f"Question {n}")
    listed = alice.get("/account/tickets")
    rows = listed.html.select("table tbody tr")
    assert [row.find("a").get_text(strip=True) for row in rows] == [
        "Question 2",
        "Question 1",
        "Question 0",
    ]
    assert rows[0].find(class_="status").get_text(strip=True) == "Open"
    assert listed.html.find("div", class_="table-scroll").find("table") is not None
    paged = alice.get("/account/tickets", params={"perPage": "2", "page": "2"})
    assert [a.get_text(strip=True) for a in paged.html.select("tbody a")] == ["Question 0"]
    assert paged.html.find("a", rel="prev")["href"] == "/account/tickets?perPage=2&page=1"
    for bad in ("0", "x", "-1", "1.5"):
        response = alice.get("/account/tickets", params={"page": bad}, status=422)
        assert response.content_type == "text/html"
    assert "no tickets on this page" in alice.get("/account/tickets?page=9").text


def test_open_a_ticket_about_an_order(alice, customer, dbsession, storage_dir):
    purchase = make_purchase(dbsession, customer, storage_dir)
    page = alice.get("/account/tickets/new")
    assert title_of(page).startswith("Open a ticket")
    assert h1_of(page) == "Open a support ticket"
    options = [o["value"] for o in page.html.find("select", id="f-orderNumber").find_all("option")]
    assert options == ["", purchase.order.number]
    for field in ("f-subject", "f-body", "f-orderNumber"):
        assert page.html.find("label", attrs={"for": field}) is not None
    ticket_id, response = open_by_form(alice, order=purchase.order.number)
    assert response.location.endswith(f"/account/tickets/{ticket_id}")
    assert flashed(response) == "ticket_opened"
    shown = response.follow()
    assert shown.html.find(class_="notice").get_text(strip=True).startswith("Your ticket is open")
    assert h1_of(shown) == "Cannot download"
    assert purchase.order.number in shown.text
    assert ticket_counts(dbsession) == (1, 0)


def test_new_ticket_form_keeps_input_and_shows_errors_per_field(
    alice, other_customer, dbsession, storage_dir
):
    form = alice.get("/account/tickets/new").forms["ticket-form"]
    form["subject"] = "ab"
    form["body"] = "   "
    response = form.submit(status=422)
    assert title_of(response).startswith("Error: Open a ticket")
    errors = field_errors(response)
    assert set(errors) == {"f-subject-error", "f-body-error"}
    assert response.html.find("input", id="f-subject")["value"] == "ab"
    assert response.html.find("input", id="f-subject")["aria-invalid"] == "true"
    assert response.html.find(class_="form-errors") is not None
    # A customer without orders gets no order field; a forged one is checked anyway.
    assert response.html.find("select") is None
    theirs = make_purchase(dbsession, other_customer, storage_dir)
    for forged in (theirs.order.number, "ORD-NOPE", "o" * 33):
        response = alice.post(
            "/account/tickets/new",
            {
                "csrf_token": form["csrf_token"].value,
                "subject": "Keep this subject",
                "body": "Keep this body",
                "orderNumber": forged,
            },
            status=422,
        )
        assert set(field_errors(response)) == {"f-orderNumber-error"}
        assert response.html.find("input", id="f-subject")["value"] == "Keep this subject"
        assert response.html.find("textarea", id="f-body").get_text() == "Keep this body"
    assert ticket_counts(dbsession) == (0, 0)


def test_too_many_tickets_is_a_friendly_429_form(make_app, customer, dbsession):
    app = make_app(**{"cmsshop.tickets_per_hour": "1"})
    client = logged_in(app, customer.email)
    open_by_form(client)
    form = client.get("/account/tickets/new").forms["ticket-form"]
    form["subject"] = "Second one"
    form["body"] = "Please keep this text"
    response = form.submit(status=429)
    assert 1 <= int(response.headers["Retry-After"]) <= 3600
    assert "at most 1 tickets per hour" in response.html.find(class_="form-errors").text
    assert response.html.find("textarea", id="f-body").get_text() == "Please keep this text"
    assert ticket_counts(dbsession) == (1, 0)


def test_the_conversation_page_and_replying(alice, staff, admin, dbsession):
    ticket_id, _ = open_by_form(alice, body="Line one\nLine two <b>not bold</b>")
    page = alice.get(f"/account/tickets/{ticket_id}")
    assert title_of(page).startswith("Cannot download (TCK-")
    assert page.html.find(class_="message-body").get_text() == "Line one\nLine two <b>not bold</b>"
    assert page.html.find("b") is None  # escaped, not rendered
    # Staff answer; the customer sees it marked as a staff reply, without the admin's name.
    form = staff.get(f"/admin/tickets/{ticket_id}").forms["reply-form"]
    form["body"] = "Here is a new link."
    form.submit(status=303)
    page = alice.get(f"/account/tickets/{ticket_id}")
    items = page.html.select("ol.conversation > li")
    assert len(items) == 2 and "staff" in items[1]["class"]
    assert "Staff reply" in items[1].get_text()
    assert admin.email not in page.text and "Admin" not in items[1].get_text()
    assert page.html.find(class_="status").get_text(strip=True) == "Answered"
    reply = page.forms["reply-form"]
    reply["body"] = "Thanks!"
    response = reply.submit(status=303)
    assert response.location.endswith(f"/account/tickets/{ticket_id}")
    assert flashed(response) == "ticket_replied"
    page = response.follow()
    assert [li.find(class_="message-body").get_text() for li in page.html.select("ol > li")][
        -1
    ] == "Thanks!"
    assert status_of(dbsession, ticket_id) == "open"


def test_reply_errors_keep_input_and_closed_tickets_reopen(alice, staff, dbsession):
    ticket_id, _ = open_by_form(alice)
    staff.post(
        f"/admin/tickets/{ticket_id}/status",
        {"status": "closed", "csrf_token": _token(staff, f"/admin/tickets/{ticket_id}")},
        status=303,
    )
    page = alice.get(f"/account/tickets/{ticket_id}")
    assert "This ticket is closed" in page.text
    form = page.forms["reply-form"]
    form["body"] = " \n "
    response = form.submit(status=422)
    assert set(field_errors(response)) == {"f-body-error"}
    assert response.html.find("textarea", id="f-body").get_text() == " \n "
    assert title_of(response).startswith("Error: ")
    assert ticket_counts(dbsession) == (1, 0) and status_of(dbsession, ticket_id) == "closed"
    form = response.forms["reply-form"]
    form["body"] = "It broke again."
    form.submit(status=303)
    assert status_of(dbsession, ticket_id) == "open"


def _token(client, path: str) -> str:
    """The CSRF token of the first form on ``path`` that carries one."""
    for form in client.get(path).forms.values():
        if "csrf_token" in form.fields:
            return form["csrf_token"].value
    raise AssertionError(f"no form with a CSRF token on {path}")


def test_too_many_replies_is_a_429_form_error(make_app, customer, dbsession):
    app = make_app(**{"cmsshop.ticket_replies_per_hour": "1"})
    client = logged_in(app, customer.email)
    ticket_id, _ = open_by_form(client)
    for expected in (303, 429):
        form = client.get(f"/account/tickets/{ticket_id}").forms["reply-form"]
        form["body"] = "Anyone there?"
        response = form.submit(status=expected)
    assert "at most 1 replies per hour" in response.html.find(class_="form-errors").text
    assert response.html.find("textarea", id="f-body").get_text() == "Anyone there?"
    assert ticket_counts(dbsession) == (1, 1)


def test_another_customers_ticket_is_a_404_page(alice, bob, dbsession):
    ticket_id, _ = open_by_form(alice)
    token = _token(bob, "/account/tickets/new")
    response = bob.get(f"/account/tickets/{ticket_id}", status=404)
    assert response.content_type == "text/html"
    assert title_of(response).startswith("Ticket not found")
    assert "Cannot download" not in response.text
    bob.post(f"/account/tickets/{ticket_id}/reply", {"csrf_token": token, "body": "x"}, status=404)
    for raw in ("987654", "abc", "0", "-1", "99999999999", "%F0%9F%98%80", "%E2%80%AE1"):
        bob.get(f"/account/tickets/{raw}", status=404)
        bob.post(f"/account/tickets/{raw}/reply", {"csrf_token": token, "body": "x"}, status=404)
    # A control character in the path is refused before routing.
    assert bob.get("/account/tickets/%00", status=400).content_type == "text/html"
    assert ticket_counts(dbsession) == (1, 0)


def test_forms_without_the_csrf_token_are_refused(alice, staff, dbsession):
    ticket_id, _ = open_by_form(alice)
    posts = [
        (alice, "/account/tickets/new", {"subject": "Hello", "body": "x"}),
        (alice, f"/account/tickets/{ticket_id}/reply", {"body": "x"}),
        (staff, f"/admin/tickets/{ticket_id}/reply", {"body": "x"}),
        (staff, f"/admin/tickets/{ticket_id}/status", {"status": "closed"}),
    ]
    for client, path, fields in posts:
        for token in (None, "stale"):
            data = dict(fields) if token is None else {**fields, "csrf_token": token}
            response = client.post(path, data, status=403)
            assert response.content_type == "text/html", path
            assert "support-code" in response.text
    assert ticket_counts(dbsession) == (1, 0) and status_of(dbsession, ticket_id) == "open"


def test_hostile_form_input_is_a_4xx_page(alice, staff, dbsession):
    ticket_id, _ = open_by_form(alice)
    token = _token(alice, "/account/tickets/new")
    cases = [
        {"subject": "Hello\x00", "body": "x"},
        {"subject": "Hello", "body": "nul\x00"},
        {"subject": "s" * 201, "body": "x"},
        {"subject": "Hello", "body": "b" * 20001},
        {"subject": "Hello"},
        {},
    ]
    for fields in cases:
        response = alice.post("/account/tickets/new", {**fields, "csrf_token": token}, status=422)
        assert response.content_type == "text/html"
    for body in ("nul\x00", "b" * 20001, ""):
        alice.post(
            f"/account/tickets/{ticket_id}/reply", {"body": body, "csrf_token": token}, status=422
        )
    # Not UTF-8, and a body over the request limit.
    response = alice.post(
        "/account/tickets/new",
        b"csrf_token=" + token.encode() + b"&subject=%FF%FE&body=x",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        expect_errors=True,
    )
    assert response.status_int in (400, 422) and response.content_type == "text/html"
    alice.post(
        "/account/tickets/new",
        {"csrf_token": token, "subject": "Hello", "body": "x" * (2 * 1024 * 1024)},
        status=413,
    )
    staff_token = _token(staff, f"/admin/tickets/{ticket_id}")
    for fields in ({"body": "nul\x00"}, {"body": "x", "status": "resolved"}, {}):
        staff.post(
            f"/admin/tickets/{ticket_id}/reply", {**fields, "csrf_token": staff_token}, status=422
        )
    for status in ("resolved", "", "OPEN"):
        response = staff.post(
            f"/admin/tickets/{ticket_id}/status",
            {"status": status, "csrf_token": staff_token},
            status=422,
        )
        assert "f-status-error" in field_errors(response)
    assert ticket_counts(dbsession) == (1, 0) and status_of(dbsession, ticket_id) == "open"


def test_anonymous_visitors_are_sent_to_log_in(app, alice, dbsession):
    ticket_id, _ = open_by_form(alice)
    client = page_client(app)
    for path in (
        "/account/tickets",
        "/account/tickets/new",
        f"/account/tickets/{ticket_id}",
        "/admin/tickets",
        f"/admin/tickets/{ticket_id}",
    ):
        response = client.get(path, status=303)
        assert "/login?next=" in response.location, path


# --- admin -------------------------------------------------------------------------------


def test_customers_get_403_on_every_admin_ticket_page(alice, dbsession):
    ticket_id, _ = open_by_form(alice)
    token = _token(alice, "/account/tickets/new")
    for path in ("/admin/tickets", f"/admin/tickets/{ticket_id}", "/admin/tickets/999"):
        response = alice.get(path, status=403)
        assert response.content_type == "text/html"
    alice.post(f"/admin/tickets/{ticket_id}/reply", {"body": "x", "csrf_token": token}, status=403)
    alice.post(
        f"/admin/tickets/{ticket_id}/status", {"status": "closed", "csrf_token": token}, status=403
    )
    assert ticket_counts(dbsession) == (1, 0) and status_of(dbsession, ticket_id) == "open"


def test_admin_queue_filters_and_orders(alice, bob, staff, dbsession):
    first, _ = open_by_form(alice, subject="Alice first")
    second, _ = open_by_form(bob, subject="Bob second")
    third, _ = open_by_form(alice, subject="Alice third")
    queue = staff.get("/admin/tickets")
    assert title_of(queue).startswith("Support tickets")
    assert h1_of(queue) == "Support tickets"
    nav = queue.html.find("nav", attrs={"aria-label": "Administration"})
    assert nav.find("a", href="/admin/tickets")["aria-current"] == "page"
    # Open tickets: the longest waiting first.
    subjects = [a.get_text(strip=True) for a in queue.html.select("tbody td:first-child a")]
    assert subjects == ["Alice first", "Bob second", "Alice third"]
    assert "bob@example.com" in queue.text
    # Staff answer the first: it leaves the open queue for pending.
    form = staff.get(f"/admin/tickets/{first}").forms["reply-form"]
    form["body"] = "Done?"
    form.submit(status=303)
    assert [a.get_text(strip=True) for a in staff.get("/admin/tickets").html.select("tbody a")] == [
        "Bob second",
        "Alice third",
    ]
    pending = staff.get("/admin/tickets", params={"status": "pending"})
    assert [a.get_text(strip=True) for a in pending.html.select("tbody td:first-child a")] == [
        "Alice first"
    ]
    assert pending.html.find("option", selected=True)["value"] == "pending"
    everything = staff.get("/admin/tickets", params={"status": "all"})
    subjects = [a.get_text(strip=True) for a in everything.html.select("tbody td:first-child a")]
    assert subjects == ["Alice third", "Bob second", "Alice first"]  # newest first
    assert "No tickets here" in staff.get("/admin/tickets?status=closed").text
    paged = staff.get("/admin/tickets", params={"status": "all", "perPage": "1", "page": "3"})
    assert [a.get_text(strip=True) for a in paged.html.select("tbody td:first-child a")] == [
        "Alice first"
    ]
    assert paged.html.find("a", rel="prev")["href"] == "/admin/tickets?status=all&perPage=1&page=2"
    for bad in ("bogus", "OPEN", "%00"):
        assert staff.get(f"/admin/tickets?status={bad}", status=422).content_type == "text/html"
    staff.get("/admin/tickets?status=open&status=closed", status=422)
    staff.get("/admin/tickets?status=%ff", status=400)
    staff.get("/admin/tickets?page=0", status=422)
    assert second != third


def test_admin_ticket_page_shows_customer_order_and_conversation(
    alice, staff, customer, dbsession, storage_dir
):
    purchase = make_purchase(dbsession, customer, storage_dir)
    ticket_id, _ = open_by_form(alice, order=purchase.order.number)
    page = staff.get(f"/admin/tickets/{ticket_id}")
    assert title_of(page).startswith("Cannot download (TCK-")
    assert h1_of(page) == "Cannot download"
    assert customer.email in page.text and "Alice" in page.text
    order_link = page.html.find("a", href=f"/admin/orders/{purchase.order.number}")
    assert order_link is not None
    assert page.html.find("select", id="f-status").find("option", selected=True)["value"] == "open"
    # Reply and close in one step, with the second button.
    form = page.forms["reply-form"]
    form["body"] = "Fixed on our side."
    response = form.submit("status", value="closed", status=303)
    assert response.location.endswith(f"/admin/tickets/{ticket_id}")
    assert flashed(response) == "ticket_answered"
    shown = response.follow()
    assert "the customer sees it" in shown.html.find(class_="notice").get_text()
    assert status_of(dbsession, ticket_id) == "closed"
    staff_item = shown.html.select("ol.conversation > li")[1]
    assert "staff" in staff_item["class"] and "Admin" in staff_item.get_text()
    # The status form.
    form = shown.forms["status-form"]
    form["status"] = "pending"
    response = form.submit(status=303)
    assert flashed(response) == "ticket_status_changed"
    assert status_of(dbsession, ticket_id) == "pending"
    # An empty reply keeps the page, with the error on the field.
    form = staff.get(f"/admin/tickets/{ticket_id}").forms["reply-form"]
    form["body"] = ""
    response = form.submit(status=422)
    assert set(field_errors(response)) == {"f-body-error"}
    assert ticket_counts(dbsession) == (1, 1)
    for raw in ("987654", "abc", "0", "99999999999"):
        assert staff.get(f"/admin/tickets/{raw}", status=404).content_type == "text/html"
