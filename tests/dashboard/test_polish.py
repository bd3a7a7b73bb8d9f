"""The small things of the account and the forms, through WebTest: where a login lands,
form errors that say what went wrong, license keys with a copy button, invoice PDF links,
file sizes in decimal units, and a renewal offered only near the expiry, with its price."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from helpers.account_data import RELEASE_BYTES
from helpers.app import PASSWORD
from helpers.clients import logged_in, page_client
from pyramid.config import ConfigurationError
from sqlalchemy import update

from cmsshop.models import License, Product
from cmsshop.settings import load_settings
from cmsshop.util import format_filesize


@pytest.fixture
def client(app, customer):
    return logged_in(app, customer)


def post_login(app, email: str, next_path: str | None = None):
    client = page_client(app)
    form = client.get("/login" + (f"?next={next_path}" if next_path else "")).forms[0]
    form["email"] = email
    form["password"] = PASSWORD
    return form.submit(status=303)


# --- where a login lands -------------------------------------------------------------------


def test_an_admin_lands_on_the_console(app, admin):
    assert post_login(app, admin.email).location == "http://localhost/admin"


def test_a_customer_lands_on_their_account(app, customer):
    assert post_login(app, customer.email).location == "http://localhost/account"


def test_a_safe_next_wins_for_an_admin_too(app, admin):
    assert post_login(app, admin.email, "/admin/orders").location.endswith("/admin/orders")
    assert post_login(app, admin.email, "/products").location.endswith("/products")


@pytest.mark.parametrize("hostile", ["//evil.example", "https://evil.example/", "/\\evil"])
def test_an_unsafe_next_sends_an_admin_to_the_console(app, admin, hostile):
    assert post_login(app, admin.email, hostile).location == "http://localhost/admin"


# --- form errors ---------------------------------------------------------------------------


def test_a_refusal_with_no_field_marked_says_what_went_wrong(app, customer):
    form = page_client(app).get("/login").forms[0]
    form["email"] = customer.email
    form["password"] = "not the password"
    summary = form.submit(status=401).html.find(class_="form-errors")
    text = summary.get_text(" ", strip=True)
    assert "The email or password is wrong." in text
    assert "marked below" not in text and "correcting" not in text
    assert summary.find("a") is None  # nothing to jump to


def test_a_field_error_is_named_and_linked_to_its_field(app):
    form = page_client(app).get("/register").forms[0]
    form["email"] = "not-an-address"
    form["password"] = "long enough password"
    page = form.submit(status=422)
    summary = page.html.find(class_="form-errors")
    [link] = summary.find_all("a")
    assert link["href"] == "#f-email"
    assert page.html.find(id="f-email") is not None  # the field it jumps to is there
    message = page.html.find(id="f-email-error").get_text(strip=True)
    assert link.get_text(strip=True) == message
    assert "marked below" not in summary.get_text()


# --- license keys ------------------------------------------------------------------------------


def test_a_license_key_is_one_selectable_line_with_a_copy_button_for_scripts(client, account):
    page = client.get("/account/licenses")
    key = page.html.find("code", class_="license-key")
    assert key.get_text() == account.license.key
    assert "key-copy" in key.parent["class"]  # the box that scrolls on a phone
    button = page.html.find("button", attrs={"data-copy-target": key["id"]})
    assert button.has_attr("hidden")  # shown by the script only
    assert button["type"] == "button"
    assert page.html.find("script", src=re.compile(r"/static/copy-button\.js\?v="))


# --- invoices ------------------------------------------------------------------------------


def test_the_invoice_list_and_the_order_link_the_pdf(client, account):
    pdf = f"/account/invoices/{account.invoice.number}.pdf"
    listing = client.get("/account/invoices")
    assert listing.html.find("a", href=pdf).has_attr("download")
    order = client.get(f"/account/orders/{account.order.number}")
    assert order.html.find("a", href=pdf)
    response = client.get(pdf)
    assert response.content_type == "application/pdf" and response.body.startswith(b"%PDF-")


# --- file sizes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 bytes"),
        (1, "1 byte"),
        (999, "999 bytes"),
        (1000, "1 kB"),
        (1536, "1.5 kB"),
        (820_000, "820 kB"),
        (999_999, "1 MB"),
        (3 * 1024 * 1024, "3.1 MB"),
        (200 * 1000 * 1000, "200 MB"),
        (5 * 10**9, "5 GB"),
        (None, ""),
    ],
)
def test_file_sizes_are_in_decimal_units(size, text):
    assert format_filesize(size) == text


def test_the_downloads_page_gives_each_release_its_size(client, account):
    page = client.get("/account/downloads")
    assert format_filesize(len(RELEASE_BYTES)) in page.html.find("main").get_text()


# --- renewals --------------------------------------------------------------------------------


def expiring(dbsession, account, days: int) -> None:
    dbsession.execute(
        update(License)
        .where(License.id == account.license.id)
        .values(expires_at=dt.datetime.now(dt.UTC) + dt.timedelta(days=days))
    )
    dbsession.execute(update(Product).where(Product.slug == "site-guard").values(duration_days=365))
    dbsession.commit()


def renew_form(page):
    return next((f for f in page.forms.values() if "renew" in f.fields), None)


def test_no_renewal_the_day_after_purchase(client, account, dbsession):
    expiring(dbsession, account, 364)
    assert renew_form(client.get("/account/licenses")) is None


@pytest.mark.parametrize("days", [29, 1, -1, -29])
def test_a_renewal_near_the_expiry_or_in_the_grace_says_its_price(client, account, dbsession, days):
    expiring(dbsession, account, days)
    page = client.get("/account/licenses")
    form = renew_form(page)
    assert form["renew"].value == account.license.key
    assert form["currency"].value == account.order.currency  # what the buyer paid in
    button = page.html.find("input", attrs={"name": "renew"}).find_parent("form").button
    assert re.search(r"Renew until \d{4}-\d{2}-\d{2} for \D*49\.00", button.get_text(" "))


def test_no_renewal_after_the_grace(client, account, dbsession):
    expiring(dbsession, account, -31)
    assert renew_form(client.get("/account/licenses")) is None


def test_the_window_is_a_setting_checked_at_start_up():
    with pytest.raises(ConfigurationError, match="license_renewal_window_days"):
        load_settings({"cmsshop.license_renewal_window_days": "-1"}, environ={})


def test_a_ticket_form_links_its_refused_field(client):
    new = client.get("/account/tickets/new")
    form = next(f for f in new.forms.values() if "subject" in f.fields)
    form["subject"] = "x"
    form["body"] = "The download link expired."
    page = form.submit(status=422)
    summary = page.html.find(class_="form-errors")
    [link] = summary.find_all("a")
    assert link["href"] == "#f-subject" and page.html.find(id="f-subject") is not None
    assert link.get_text(strip=True) == page.html.find(id="f-subject-error").get_text(strip=True)
    assert "marked below" not in summary.get_text()
