"""The customer's account pages through WebTest: overview, orders, invoices (printable),
downloads (a POST that answers 303 to a fresh signed URL) and licenses (deactivate an
activation); login required, another customer's records unreachable, CSRF on every
form, hostile ids a 4xx page."""

from __future__ import annotations

import pytest
from helpers.account_data import RELEASE_BYTES, RUNTIME_IP, activate, license_call, make_account
from helpers.clients import logged_in, page_client
from helpers.html import assert_error_page, h1_of, title_of
from helpers.licensing import runtime
from helpers.notices import flashed
from sqlalchemy import select, update

from cmsshop.models import Activation, Entitlement, LicenseAuditEntry

ACCOUNT_PAGES = [
    ("/account", "Your account"),
    ("/account/orders", "Your orders"),
    ("/account/invoices", "Your invoices"),
    ("/account/downloads", "Your downloads"),
    ("/account/licenses", "Your licenses"),
    ("/account/subscriptions", "Your subscriptions"),
]
HOSTILE_IDS = ["0", "-1", "99999999999999999999", "2147483648", "abc", "1.5", "%00", "1%00"]
HOSTILE_NUMBERS = ["%00", "INV-%00", "x" * 300, "%F0%9F%98%80", "'%20OR%201=1--", "0", "-1"]


@pytest.fixture
def client(app, customer):
    return logged_in(app, customer)


@pytest.fixture
def other_client(app, other_customer):
    return logged_in(app, other_customer)


# --- every page ------------------------------------------------------------------------------


def test_every_page_needs_a_login(app):
    anonymous = page_client(app)
    for path, _ in ACCOUNT_PAGES:
        response = anonymous.get(path, status=303)
        assert "/login?next=" in response.location, path


def test_every_page_renders_with_the_account_navigation(client, account):
    for path, heading in ACCOUNT_PAGES:
        response = client.get(path)
        assert response.content_type == "text/html"
        assert h1_of(response) == heading and title_of(response).startswith(heading)
        nav = response.html.find("nav", attrs={"aria-label": "Your account"})
        links = {a["href"]: a for a in nav.find_all("a")}
        others = {"/account/tickets", "/account/billing", "/account/settings"}
        assert set(links) == {p for p, _ in ACCOUNT_PAGES} | others
        assert links[path].get("aria-current") == "page"
        assert not response.html.find_all("script", src=False)
        assert not response.html.find_all(style=True)


def test_overview_counts_and_recent_orders(client, account):
    response = client.get("/account")
    text = response.html.get_text(" ", strip=True)
    assert "1 order" in text and "1 invoice" in text and "2 products" in text
    assert "1 license" in text
    assert response.html.find("a", href=f"/account/orders/{account.order.number}")
    assert response.html.find("a", href="/account/tickets")


def test_an_empty_account_says_so(client):
    for path, _ in ACCOUNT_PAGES:
        assert "no " in client.get(path).html.find("main").get_text(" ").lower()


# --- orders and invoices ---------------------------------------------------------------------


def test_orders_list_status_total_items_and_detail(client, account, dbsession, customer):
    response = client.get("/account/orders")
    row = response.html.find("a", href=f"/account/orders/{account.order.number}").find_parent("tr")
    assert row.find(class_="status status-paid").get_text(strip=True) == "paid"
    cells = [td.get_text(" ", strip=True) for td in row.find_all("td")]
    assert "SiteGuard, Theme Pack" in cells and "EUR68.00" in cells

    detail = client.get(f"/account/orders/{account.order.number}")
    assert h1_of(detail) == f"Order {account.order.number}"
    assert detail.html.find("a", href=f"/account/invoices/{account.invoice.number}")
    assert "EUR49.00" in detail.text and "EUR19.00" in detail.text


def test_orders_are_paged(client, account, dbsession, customer):
    from helpers.account_data import paid_order

    dbsession.rollback()
    for _ in range(20):
        paid_order(dbsession, customer, ("themes",))
    first = client.get("/account/orders")
    assert len(first.html.find("tbody").find_all("tr")) == 20
    assert first.html.find("a", rel="next")["href"] == "/account/orders?page=2"
    second = client.get("/account/orders?page=2")
    assert len(second.html.find("tbody").find_all("tr")) == 1
    assert second.html.find("a", rel="prev")
    past = client.get("/account/orders?page=99")
    assert "no orders on this page" in past.text
    assert_error_page(client.get("/account/orders?page=x", status=422), 422)
    assert_error_page(client.get("/account/orders?perPage=1000", status=422), 422)


def test_invoice_is_a_printable_page(client, account, customer):
    listing = client.get("/account/invoices")
    link = listing.html.find("a", href=f"/account/invoices/{account.invoice.number}")
    assert link is not None
    response = client.get(f"/account/invoices/{account.invoice.number}")
    assert title_of(response).startswith(f"Invoice {account.invoice.number}")
    invoice = response.html.find("article", class_="invoice")
    text = invoice.get_text(" ", strip=True)
    assert "cmsshop" in invoice.find(class_="invoice-seller").get_text()  # the site name
    for expected in (
        account.invoice.number,
        account.order.number,
        customer.email,
        "Alice",
        "SiteGuard",
        "Theme Pack",
        "EUR49.00",
        "EUR19.00",
        "Total (EUR)",
        "EUR68.00",
        account.invoice.issued_at.strftime("%Y-%m-%d"),
    ):
        assert expected in text, expected
    # Printing is the browser's: no script; the navigation is marked to stay off paper.
    assert not response.html.find_all("script")
    assert "no-print" in response.html.find("nav", attrs={"aria-label": "Your account"})["class"]


def test_another_customers_order_and_invoice_are_404(other_client, account):
    for path in (
        f"/account/orders/{account.order.number}",
        f"/account/invoices/{account.invoice.number}",
    ):
        assert_error_page(other_client.get(path, status=404), 404)
    assert account.order.number not in other_client.get("/account/orders").text
    assert account.invoice.number not in other_client.get("/account/invoices").text


@pytest.mark.parametrize("number", HOSTILE_NUMBERS)
def test_hostile_order_and_invoice_numbers_are_a_4xx_page(client, account, number):
    for prefix in ("/account/orders/", "/account/invoices/"):
        response = client.get(prefix + number, status="*")
        assert 400 <= response.status_int < 500, (prefix, number)
        assert response.content_type == "text/html"


# --- downloads -------------------------------------------------------------------------------


def test_downloads_page_has_post_buttons_and_never_a_signed_link(client, account):
    response = client.get("/account/downloads")
    assert "/api/downloads/" not in response.text
    assert response.headers["Cache-Control"]
    forms = [f for f in response.forms.values() if f.action.startswith("/account/downloads/")]
    assert [f.action for f in forms] == [f"/account/downloads/{account.licensed.id}"]
    assert forms[0].method.upper() == "POST" and forms[0]["csrf_token"].value
    text = response.html.get_text(" ", strip=True)
    assert "2.0.0" in text and "site-guard-2.0.0.zip" in text
    assert "Nothing to download yet" in text  # themes has no release


def test_download_button_redirects_to_a_fresh_working_signed_url(client, account):
    page = client.get("/account/downloads")
    form = page.forms[next(k for k, f in page.forms.items() if f.action.startswith("/account/d"))]
    first = form.submit(status=303)
    assert first.headers["Cache-Control"] == "private, no-store"
    assert first.location.startswith("http://localhost/api/downloads/")
    second = form.submit(status=303)
    assert second.location != first.location  # made at click time, every time
    file = client.get(first.location.removeprefix("http://localhost"))
    assert file.body == RELEASE_BYTES
    assert "site-guard-2.0.0.zip" in file.headers["Content-Disposition"]


def test_revoked_and_on_hold_downloads_show_their_state_and_no_button(client, account, dbsession):
    dbsession.rollback()
    dbsession.execute(
        update(Entitlement).where(Entitlement.id == account.licensed.id).values(status="on_hold")
    )
    dbsession.commit()
    page = client.get("/account/downloads")
    assert not [f for f in page.forms.values() if f.action.startswith("/account/downloads/")]
    assert "On hold" in page.text and page.html.find(class_="status-on_hold")
    token = page.forms[0]["csrf_token"].value
    held = client.post(
        f"/account/downloads/{account.licensed.id}", {"csrf_token": token}, status=403
    )
    assert_error_page(held, 403)

    dbsession.execute(
        update(Entitlement).where(Entitlement.id == account.licensed.id).values(status="revoked")
    )
    dbsession.commit()
    page = client.get("/account/downloads")
    assert "Not available" in page.text and page.html.find(class_="status-revoked")
    gone = client.post(
        f"/account/downloads/{account.licensed.id}", {"csrf_token": token}, status=410
    )
    assert_error_page(gone, 410)


def test_download_of_a_product_without_release_is_a_404_page(client, account):
    token = client.get("/account/downloads").forms[0]["csrf_token"].value
    response = client.post(
        f"/account/downloads/{account.unlicensed.id}", {"csrf_token": token}, status=404
    )
    assert_error_page(response, 404)


def test_another_customers_download_is_404(other_client, account):
    page = other_client.get("/account/downloads")
    assert f"/account/downloads/{account.licensed.id}" not in page.text
    token = page.forms[0]["csrf_token"].value
    response = other_client.post(
        f"/account/downloads/{account.licensed.id}", {"csrf_token": token}, status=404
    )
    assert_error_page(response, 404)
    assert "/api/downloads/" not in response.text


def test_download_form_needs_the_csrf_token(client, account):
    for fields in ({}, {"csrf_token": "forged"}):
        response = client.post(f"/account/downloads/{account.licensed.id}", fields, status=403)
        assert_error_page(response, 403)
        assert "/api/downloads/" not in response.text


@pytest.mark.parametrize("raw_id", HOSTILE_IDS)
def test_hostile_download_ids_are_a_4xx_page(client, account, raw_id):
    token = client.get("/account/downloads").forms[0]["csrf_token"].value
    response = client.post(f"/account/downloads/{raw_id}", {"csrf_token": token}, status="*")
    assert 400 <= response.status_int < 500, raw_id
    assert response.content_type == "text/html"


def test_download_page_route_only_posts(client, account):
    response = client.get(f"/account/downloads/{account.licensed.id}", status="*")
    assert response.status_int in (404, 405)
    assert response.content_type == "text/html"


# --- licenses --------------------------------------------------------------------------------


@pytest.fixture
def sites(app, account):
    return {
        "shop": activate(app, account.license.key, "shop.example.com", "install-shop-01"),
        "old": activate(app, account.license.key, "old.example.com", "install-old-01"),
        "dev": activate(app, account.license.key, "localhost", "install-dev-01"),
    }


def test_licenses_page_shows_keys_seats_and_activations(client, account, sites):
    response = client.get("/account/licenses")
    assert response.headers["Cache-Control"] == "private, no-store"
    section = response.html.find("section", class_="license")
    text = section.get_text(" ", strip=True)
    assert account.license.key in text and "SiteGuard" in text
    assert section.find(class_="status status-active")
    assert account.license.expires_at.strftime("%Y-%m-%d") in text
    assert "2 of 3" in text and "plus 1 staging or local" in text
    for domain, fingerprint in (
        ("shop.example.com", "install-shop-01"),
        ("old.example.com", "install-old-01"),
        ("localhost", "install-dev-01"),
    ):
        assert domain in text and fingerprint in text
    actions = sorted(f.action for f in response.forms.values() if "/activations/" in f.action)
    assert actions == sorted(
        f"/account/licenses/{account.license.key}/activations/{i}/deactivate"
        for i in sites.values()
    )


def test_deactivate_button_frees_the_seat(app, client, account, sites, dbsession):
    page = client.get("/account/licenses")
    action = f"/account/licenses/{account.license.key}/activations/{sites['old']}/deactivate"
    form = next(f for f in page.forms.values() if f.action == action)
    response = form.submit(status=303)
    assert response.location.endswith("/account/licenses")
    assert flashed(response) == "activation_deactivated"
    after = response.follow()
    assert "The activation was deactivated" in after.html.find(class_="notice").text
    assert "old.example.com" not in after.text and "1 of 3" in after.text
    # The runtime of that site is refused from now on; the others keep working.
    refused = license_call(
        runtime(app, RUNTIME_IP),
        "validate",
        account.license.key,
        "old.example.com",
        "install-old-01",
        404,
    )
    assert refused.json["code"] == "activation_not_found"
    license_call(
        runtime(app, RUNTIME_IP),
        "validate",
        account.license.key,
        "shop.example.com",
        "install-shop-01",
        200,
    )
    # The same form again (a double click): nothing changes, and the page says so.
    again = form.submit(status=303)
    assert flashed(again) == "activation_already_inactive"
    assert "already inactive" in again.follow().text
    dbsession.rollback()
    entries = dbsession.scalars(
        select(LicenseAuditEntry.outcome).where(LicenseAuditEntry.action == "customer_deactivate")
    ).all()
    assert sorted(entries) == ["already_inactive", "deactivated"]


def test_deactivate_form_needs_the_csrf_token(client, account, sites, dbsession):
    path = f"/account/licenses/{account.license.key}/activations/{sites['shop']}/deactivate"
    for fields in ({}, {"csrf_token": "forged"}):
        assert_error_page(client.post(path, fields, status=403), 403)
    dbsession.rollback()
    assert dbsession.get(Activation, sites["shop"]).active is True


def test_another_customers_licenses_and_activations_are_404(
    other_client, other_customer, account, sites, dbsession, storage_dir
):
    page = other_client.get("/account/licenses")
    assert account.license.key not in page.text and "shop.example.com" not in page.text
    token = page.forms[0]["csrf_token"].value
    key = account.license.key
    response = other_client.post(
        f"/account/licenses/{key}/activations/{sites['shop']}/deactivate",
        {"csrf_token": token},
        status=404,
    )
    assert_error_page(response, 404)
    dbsession.rollback()
    theirs = make_account(dbsession, other_customer, storage_dir, catalogue=False)
    response = other_client.post(
        f"/account/licenses/{theirs.license.key}/activations/{sites['shop']}/deactivate",
        {"csrf_token": token},
        status=404,
    )
    assert_error_page(response, 404)
    dbsession.rollback()
    assert dbsession.get(Activation, sites["shop"]).active is True


@pytest.mark.parametrize("raw_id", HOSTILE_IDS)
def test_hostile_activation_ids_and_keys_are_a_4xx_page(client, account, sites, raw_id):
    token = client.get("/account/licenses").forms[0]["csrf_token"].value
    key = account.license.key
    for path in (
        f"/account/licenses/{key}/activations/{raw_id}/deactivate",
        f"/account/licenses/{raw_id}/activations/{sites['shop']}/deactivate",
        f"/account/licenses/{key}%00/activations/{sites['shop']}/deactivate",
        f"/account/licenses/{'K' * 3000}/activations/{sites['shop']}/deactivate",
    ):
        response = client.post(path, {"csrf_token": token}, status="*")
        assert 400 <= response.status_int < 500, path
        assert response.content_type == "text/html"
