"""Admin orders and customers pages (/admin/orders, /admin/customers): filters, the
order's payment story, manual fulfilment with the JSON route's rules."""

from __future__ import annotations

import datetime as dt

import pytest
import webtest
from fakes.shop import counts, make_order, order_status
from fakes.stripe_api import delivery, event, session_object
from helpers.clients import logged_in, page_client
from helpers.html import title_of
from helpers.notices import flashed
from sqlalchemy import func, select

from cmsshop.models import Order, OrderNote, SupportTicket


def order_numbers(response) -> list[str]:
    return [
        a.get_text(strip=True)
        for a in response.html.select("table a")
        if a["href"].startswith("/admin/orders/")
    ]


def set_created(session, order: Order, when: dt.datetime) -> None:
    row = session.get(Order, order.id)
    row.created_at = when
    session.commit()


def fulfil_form(page):
    return next(f for f in page.forms.values() if f.action.endswith("/fulfil"))


# --- the list ------------------------------------------------------------------------------------


def test_orders_list_filters_and_pages(admin_pages, dbsession, catalogue, customer, other_customer):
    now = dt.datetime.now(dt.UTC)
    old = make_order(dbsession, customer, status="paid")
    set_created(dbsession, old, now - dt.timedelta(days=40))
    mid = make_order(dbsession, other_customer, provider="walletprovider")
    set_created(dbsession, mid, now - dt.timedelta(days=10))
    new = make_order(dbsession, customer, ("themes",), currency="USD")

    page = admin_pages.get("/admin/orders")
    assert title_of(page).startswith("Orders")
    assert len(page.html.find_all("h1")) == 1
    assert order_numbers(page) == [new.number, mid.number, old.number]  # newest first
    assert "USD" in page.text  # the total in its currency

    def numbers(**query):
        return order_numbers(admin_pages.get("/admin/orders", query))

    assert numbers(status="paid") == [old.number]
    assert numbers(provider="walletprovider") == [mid.number]
    assert numbers(customer="ALICE") == [new.number, old.number]
    assert numbers(customer="bob@") == [mid.number]
    assert numbers(customer="%") == []  # a LIKE wildcard is plain text
    start = (now - dt.timedelta(days=11)).date().isoformat()
    end = (now - dt.timedelta(days=9)).date().isoformat()
    assert numbers(**{"from": start, "to": end}) == [mid.number]
    assert numbers(**{"from": start}) == [new.number, mid.number]
    # A filter form sends every field: empty ones are no filter.
    assert numbers(status="", provider="", customer="", **{"from": "", "to": ""}) == [
        new.number,
        mid.number,
        old.number,
    ]
    first = admin_pages.get("/admin/orders", {"perPage": "2", "customer": "e"})
    assert len(order_numbers(first)) == 2
    second = admin_pages.get(first.html.find("a", rel="next")["href"])
    assert order_numbers(second) == [old.number]
    # The filter form keeps what was chosen.
    chosen = admin_pages.get("/admin/orders", {"status": "paid", "customer": "alice"})
    assert chosen.html.find("option", selected=True)["value"] == "paid"
    assert chosen.html.find("input", id="f-customer")["value"] == "alice"


@pytest.mark.parametrize(
    "query",
    [
        {"status": "bogus"},
        {"from": "2026-02-30"},
        {"from": "yesterday"},
        {"from": "2026-05-02", "to": "2026-05-01"},
        {"customer": "x" * 1000},
        {"provider": "p" * 100},
        {"page": "0"},
        {"perPage": "1000"},
    ],
)
def test_orders_list_bad_filters_are_422_pages(admin_pages, query):
    response = admin_pages.get("/admin/orders", query, status=422)
    assert response.content_type == "text/html"


def test_orders_list_hostile_queries(admin_pages):
    admin_pages.get("/admin/orders?status=paid&status=failed", status=422)
    admin_pages.get("/admin/orders?customer=%00", status=422)
    admin_pages.get("/admin/orders?customer=%FF", status=400)
    admin_pages.get("/admin/orders", {"page": "9" * 40}, status=200)


# --- one order -----------------------------------------------------------------------------------


def test_order_page_shows_items_and_provider(admin_pages, dbsession, catalogue, customer):
    order = make_order(
        dbsession, customer, ("site-guard", "themes"), checkout_id="cs_test_checkout_42"
    )
    page = admin_pages.get(f"/admin/orders/{order.number}")
    assert title_of(page).startswith(f"Order {order.number}")
    text = page.text
    assert "SiteGuard" in text and "Theme Pack" in text
    assert "cs_test_checkout_42" in text and "Card payments (Stripe)" in text
    assert "cardprovider" not in page.html.find("main").get_text()  # the seller's name only
    assert "EUR68.00" in text  # 49.00 + 19.00
    assert "Not fulfilled" in text
    assert "No provider event names this order." in text
    assert fulfil_form(page) is not None


def test_manual_fulfilment_form_and_its_duplicate(
    admin_pages, dbsession, admin, catalogue, customer
):
    order = make_order(dbsession, customer, ("site-guard", "themes"))
    page = admin_pages.get(f"/admin/orders/{order.number}")
    form = fulfil_form(page)
    form["reason"] = "Paid by bank transfer, ref 42"
    form["paymentReference"] = "bank-42"
    done = form.submit(status=303)
    assert done.location.endswith(f"/admin/orders/{order.number}")
    assert flashed(done) == "order_fulfilled"
    assert order_status(dbsession, order.number) == "paid"
    shown = done.follow()
    assert "Already processed" in shown.text and admin.email in shown.text
    assert "INV-" in shown.text and "bank-42" in shown.text
    assert not any(f.action.endswith("/fulfil") for f in shown.forms.values())
    before = counts(dbsession)
    # The same form sent again (a second tab, a double click): refused, nothing created.
    again = form.submit(status=409)
    assert "already fulfilled manually by admin" in again.text
    assert counts(dbsession) == before and before["fulfilments"] == 1


def test_manual_fulfilment_form_errors(admin_pages, dbsession, catalogue, customer):
    order = make_order(dbsession, customer)
    page = admin_pages.get(f"/admin/orders/{order.number}")
    form = fulfil_form(page)
    form["reason"] = "  "
    form["paymentReference"] = "kept-ref"
    response = form.submit(status=422)
    assert response.html.find(id="f-reason-error") is not None
    assert response.html.find("input", id="f-paymentReference")["value"] == "kept-ref"
    form["reason"] = "x" * 3000
    assert form.submit(status=422).html.find(id="f-reason-error") is not None
    form["reason"] = "ok\x00ok"
    form.submit(status=422)
    refunded = make_order(dbsession, customer, status="refunded")
    page = admin_pages.get(f"/admin/orders/{refunded.number}")
    form = fulfil_form(page)
    form["reason"] = "why not"
    assert "only pending, needs_review" in form.submit(status=409).text
    assert counts(dbsession)["fulfilments"] == 0


def test_a_webhook_paid_order_shows_its_event_and_refuses_manual_fulfilment(
    card_admin_pages, card_app, dbsession, catalogue, customer, fake_stripe
):
    order = make_order(dbsession, customer)
    page = card_admin_pages.get(f"/admin/orders/{order.number}")
    stale = fulfil_form(page)
    checkout = fake_stripe.add_session(session_object(order.number, order.total))
    payload = event("checkout.session.completed", checkout)
    body, headers = delivery(payload)
    webtest.TestApp(card_app).post("/api/webhooks/cardprovider", body, headers=headers, status=200)
    page = card_admin_pages.get(f"/admin/orders/{order.number}")
    fulfilment = page.html.find("section", attrs={"aria-labelledby": "fulfilment"}).get_text(" ")
    assert "Already processed" in fulfilment and payload["id"] in fulfilment
    events = page.html.find("section", attrs={"aria-labelledby": "events"})
    assert payload["id"] in events.get_text() and "processed" in events.get_text()
    link = events.find("a")["href"]
    assert card_admin_pages.get(link).status_int == 200
    licenses = page.html.find("section", attrs={"aria-labelledby": "entitlements"})
    assert licenses.find("a", href=lambda h: h and h.startswith("/admin/licenses/"))
    before = counts(dbsession)
    stale["reason"] = "customer says not delivered"
    refused = stale.submit(status=409)
    assert f"by cardprovider event {payload['id']}" in refused.text
    assert counts(dbsession) == before


def test_order_page_hostile_and_missing(admin_pages, dbsession, catalogue, customer):
    order = make_order(dbsession, customer)
    token = admin_pages.get(f"/admin/orders/{order.number}").forms[0]["csrf_token"].value
    admin_pages.get("/admin/orders/ORD-NOPE", status=404)
    admin_pages.get("/admin/orders/" + "N" * 300, status=404)
    admin_pages.get("/admin/orders/%00", status=400)
    admin_pages.get("/admin/orders/%E2%80%AE", status=404)
    admin_pages.post("/admin/orders/ORD-NOPE/fulfil", {"csrf_token": token}, status=404)
    admin_pages.post(
        f"/admin/orders/{order.number}/fulfil",
        {"csrf_token": token, "reason": ["a", "b"] * 3},
        status=422,
    )
    # Without the CSRF token: the 403 page, nothing fulfilled.
    response = admin_pages.post(
        f"/admin/orders/{order.number}/fulfil", {"reason": "no token"}, status=403
    )
    assert response.content_type == "text/html"
    assert order_status(dbsession, order.number) == "pending"


# --- customers -----------------------------------------------------------------------------------


def test_customers_search_and_detail(admin_pages, dbsession, catalogue, customer, other_customer):
    order = make_order(dbsession, customer)
    dbsession.add(
        SupportTicket(
            number="TCK-ADMIN1", user_id=customer.id, order_id=order.id, subject="Where?", body="?"
        )
    )
    dbsession.commit()
    listing = admin_pages.get("/admin/customers")
    assert title_of(listing).startswith("Customers")
    assert "alice@example.com" in listing.text and "bob@example.com" in listing.text
    by_name = admin_pages.get("/admin/customers", {"q": "ALI"})
    assert "alice@example.com" in by_name.text and "bob@example.com" not in by_name.text
    by_email = admin_pages.get("/admin/customers", {"q": "bob@"})
    assert "bob@example.com" in by_email.text and "alice@example.com" not in by_email.text
    assert "No account" in admin_pages.get("/admin/customers", {"q": "_"}).text
    detail = admin_pages.get(f"/admin/customers/{customer.id}")
    assert title_of(detail).startswith("Customer alice@example.com")
    assert order.number in detail.text and "TCK-ADMIN1" in detail.text
    admin_pages.get("/admin/customers/999999", status=404)
    admin_pages.get("/admin/customers/abc", status=404)
    admin_pages.get("/admin/customers/99999999999999", status=404)
    admin_pages.get("/admin/customers", {"q": "q" * 400}, status=422)
    ticket = dbsession.scalar(select(SupportTicket))
    assert ticket is not None


# --- who may see these pages ---------------------------------------------------------------------


def test_customers_get_403_and_visitors_the_login(app, dbsession, catalogue, customer):
    order = make_order(dbsession, customer)
    paths = [
        "/admin/orders",
        f"/admin/orders/{order.number}",
        "/admin/customers",
        f"/admin/customers/{customer.id}",
    ]
    visitor = page_client(app)
    for path in paths:
        assert "/login?next=" in visitor.get(path, status=303).location
    client = logged_in(app, customer.email)
    for path in paths:
        response = client.get(path, status=403)
        assert response.content_type == "text/html"
    token = client.get("/").html.find("input", attrs={"name": "csrf_token"})["value"]
    client.post(
        f"/admin/orders/{order.number}/fulfil",
        {"csrf_token": token, "reason": "let me in"},
        status=403,
    )
    assert order_status(dbsession, order.number) == "pending"


def test_orders_pages_are_on_without_the_payment_modules(make_app, admin, dbsession, catalogue):
    app = make_app(**{"cmsshop.modules": "store"})
    client = logged_in(app, admin.email)
    order = make_order(dbsession, admin)
    page = client.get(f"/admin/orders/{order.number}")
    assert page.html.find("a", href="/admin/payments") is None
    client.get("/admin/payments", status=404)


def notes_form(page):
    return next(f for f in page.forms.values() if f.action.endswith("/notes"))


def test_staff_notes_on_an_order(admin_pages, app, dbsession, catalogue, customer, admin):
    order = make_order(dbsession, customer, ("themes",))
    page = admin_pages.get(f"/admin/orders/{order.number}")
    assert "No notes yet." in page.text
    form = notes_form(page)
    form["body"] = "Customer asked for a VAT invoice <b>by mail</b>."
    response = form.submit(status=303)
    assert response.location.endswith(f"/admin/orders/{order.number}#notes")
    assert flashed(response) == "order_note_added"
    page = admin_pages.get(f"/admin/orders/{order.number}")
    notes = page.html.find(id="notes").parent
    assert "Customer asked for a VAT invoice <b>by mail</b>." in notes.get_text()
    assert notes.find("b") is None  # escaped, not markup
    assert admin.email in notes.get_text()
    dbsession.rollback()
    assert [n.body for n in dbsession.scalars(select(OrderNote))] == [
        "Customer asked for a VAT invoice <b>by mail</b>."
    ]

    # Blank, NUL or too long: 422 on the field, what was typed kept, nothing stored.
    for body in ("   ", "a\x00b", "x" * 5001):
        form = notes_form(admin_pages.get(f"/admin/orders/{order.number}"))
        form["body"] = body
        response = form.submit(status=422)
        assert response.html.find(id="f-note-body-error") is not None
    dbsession.rollback()
    assert dbsession.scalar(select(func.count()).select_from(OrderNote)) == 1

    # Unknown order: 404; customers: 403; no token: 403.
    token = notes_form(page)["csrf_token"].value
    admin_pages.post("/admin/orders/NOPE-1/notes", {"csrf_token": token, "body": "x"}, status=404)
    admin_pages.post(f"/admin/orders/{order.number}/notes", {"body": "x"}, status=403)
    shopper = logged_in(app, customer.email)
    shopper.post(f"/admin/orders/{order.number}/notes", {"body": "x"}, status=403)
    dbsession.rollback()
    assert dbsession.scalar(select(func.count()).select_from(OrderNote)) == 1
