"""The account settings pages under /account/settings: name, e-mail change and the page
of its mailed link, password change, the data download and deleting the account (the
JSON routes' rules, tests/accounts/test_self_service_api.py, rendered as forms)."""

from __future__ import annotations

import json

from helpers.app import PASSWORD
from helpers.clients import logged_in, page_client
from helpers.html import errors_of, h1_of
from helpers.mail_links import mailed_link, mails_to
from sqlalchemy import select

from cmsshop.models import AuditEntry, User

OLD_EMAIL = "alice@example.com"  # the customer fixture's
NEW_EMAIL = "alice.new@example.com"
NEW_PASSWORD = "a brand new password"


def fresh_user(dbsession, user_id: int) -> User:
    dbsession.rollback()
    dbsession.expire_all()
    return dbsession.get(User, user_id)


def test_the_settings_page_changes_the_name_and_lists_the_activity(app, customer, dbsession):
    client = logged_in(app, customer)
    page = client.get("/account/settings")
    assert h1_of(page) == "Account settings"
    assert page.html.find("a", href="/account/billing") is not None
    assert page.html.find("a", href="/account/settings/export") is not None
    assert "No changes yet." in page.text
    form = page.forms["name-form"]
    form["name"] = "Alice Liddell"
    page = form.submit(status=303).follow()
    assert "Your name was saved." in page.text
    assert page.forms["name-form"]["name"].value == "Alice Liddell"
    activity = page.html.find(id="activity-heading").find_parent("section")
    assert "Name changed" in activity.get_text()
    assert fresh_user(dbsession, customer.id).name == "Alice Liddell"


def test_an_empty_name_is_marked(app, customer):
    client = logged_in(app, customer)
    form = client.get("/account/settings").forms["name-form"]
    form["name"] = ""
    page = form.submit(status=422)
    assert set(errors_of(page)) == {"name"}
    assert page.html.title.get_text().startswith("Error:")


def test_the_pages_need_a_login_and_a_csrf_token(app, customer):
    anonymous = page_client(app)
    for path in ("/account/settings", "/account/settings/email", "/account/settings/delete"):
        assert "/login" in anonymous.get(path, status=303).location
    client = logged_in(app, customer)
    client.post("/account/settings", {"name": "Mallory"}, status=403)
    client.post(
        "/account/settings/delete", {"password": PASSWORD, "confirmation": "DELETE"}, status=403
    )


def test_email_change_by_the_pages(app, customer, dbsession):
    client = logged_in(app, customer)
    form = client.get("/account/settings/email").forms["email-form"]
    form["newEmail"] = NEW_EMAIL
    form["currentPassword"] = "not my password"
    page = form.submit(status=422)
    assert set(errors_of(page)) == {"currentPassword"}
    assert page.forms["email-form"]["newEmail"].value == NEW_EMAIL
    form = page.forms["email-form"]
    form["currentPassword"] = PASSWORD
    page = form.submit(status=303).follow()
    assert "We have sent a link to your new address." in page.text
    assert fresh_user(dbsession, customer.id).email == OLD_EMAIL
    link = mailed_link(dbsession, NEW_EMAIL, "email_change", "/account/settings/email/confirm")
    # Opening the link shows a button (mail scanners open links): nothing changes yet.
    confirm = client.get(link)
    assert h1_of(confirm) == "Confirm your new email address"
    assert NEW_EMAIL in confirm.text
    assert fresh_user(dbsession, customer.id).email == OLD_EMAIL
    page = confirm.forms["confirm-email-form"].submit(status=303).follow()
    assert "Your email address is changed." in page.text
    assert NEW_EMAIL in page.text
    assert fresh_user(dbsession, customer.id).email == NEW_EMAIL
    assert [m.kind for m in mails_to(dbsession, OLD_EMAIL)] == ["email_changed_notice"]
    # The link works once.
    again = client.get(link, status=410)
    assert "used already" in again.text


def test_a_taken_address_is_marked(app, customer, other_customer):
    client = logged_in(app, customer)
    form = client.get("/account/settings/email").forms["email-form"]
    form["newEmail"] = other_customer.email
    form["currentPassword"] = PASSWORD
    page = form.submit(status=422)
    assert errors_of(page) == {"newEmail": "Another account uses this address."}


def test_a_bad_link_says_so(app):
    page = page_client(app).get("/account/settings/email/confirm?token=nonsense", status=400)
    assert "not valid" in page.text


def test_password_change_by_the_page_keeps_this_session_only(app, customer, dbsession):
    client, elsewhere = logged_in(app, customer), logged_in(app, customer)
    form = client.get("/account/settings/password").forms["password-form"]
    form["currentPassword"] = "wrong"
    form["newPassword"] = NEW_PASSWORD
    page = form.submit(status=422)
    assert set(errors_of(page)) == {"currentPassword"}
    form = page.forms["password-form"]
    form["currentPassword"] = PASSWORD
    form["newPassword"] = NEW_PASSWORD
    page = form.submit(status=303).follow()
    assert "Your password is changed." in page.text
    assert h1_of(client.get("/account/settings")) == "Account settings"
    assert "/login" in elsewhere.get("/account/settings", status=303).location


def test_the_data_download(app, customer, account):
    client = logged_in(app, customer)
    response = client.get("/account/settings/export")
    assert response.headers["Content-Disposition"].startswith("attachment;")
    data = json.loads(response.body)
    assert data["profile"]["email"] == OLD_EMAIL
    assert data["licenses"][0]["key"] == account.license.key


def test_delete_by_the_page(app, customer, dbsession):
    client = logged_in(app, customer)
    form = client.get("/account/settings/delete").forms["delete-form"]
    form["password"] = PASSWORD
    form["confirmation"] = "yes"
    page = form.submit(status=422)
    assert set(errors_of(page)) == {"confirmation"}
    form = page.forms["delete-form"]
    form["password"] = PASSWORD
    form["confirmation"] = "DELETE"
    page = form.submit(status=303).follow()
    assert "Your account is deleted." in page.text
    assert fresh_user(dbsession, customer.id).deleted_at is not None
    assert "/login" in client.get("/account/settings", status=303).location
    login = page_client(app).get("/login").forms[0]
    login["email"] = OLD_EMAIL
    login["password"] = PASSWORD
    login.submit(status=401)
    dbsession.rollback()
    entries = dbsession.scalars(select(AuditEntry).where(AuditEntry.object_id == str(customer.id)))
    assert [e.action for e in entries] == ["account.deleted"]


def test_the_pages_answer_with_the_dashboard_module_off(make_app, customer, dbsession):
    app = make_app(**{"cmsshop.modules": "store"})
    client = logged_in(app, customer)
    page = client.get("/account/settings")
    assert h1_of(page) == "Account settings"
    assert page.html.find("a", href="/account/orders") is None
    form = page.forms["name-form"]
    form["name"] = "Alice Offline"
    form.submit(status=303)
    assert fresh_user(dbsession, customer.id).name == "Alice Offline"


def test_the_admin_sees_the_activity_and_the_deletion(app, customer, admin_pages, dbsession):
    client = logged_in(app, customer)
    form = client.get("/account/settings").forms["name-form"]
    form["name"] = "Alice Renamed"
    form.submit(status=303)
    page = admin_pages.get(f"/admin/customers/{customer.id}")
    activity = page.html.find(id="activity").find_parent("section").get_text(" ")
    assert "Name changed" in activity and f"user:{customer.id}" in activity
    form = client.get("/account/settings/delete").forms["delete-form"]
    form["password"] = PASSWORD
    form["confirmation"] = "DELETE"
    form.submit(status=303)
    page = admin_pages.get(f"/admin/customers/{customer.id}")
    facts = page.html.find("dl", class_="facts").get_text(" ")
    assert "Deleted" in facts and f"deleted-{customer.id}@invalid" in facts
    assert "Account deleted" in page.html.find(id="activity").find_parent("section").get_text()


def test_a_link_opened_logged_out_or_as_someone_else(app, customer, other_customer, dbsession):
    client = logged_in(app, customer)
    form = client.get("/account/settings/email").forms["email-form"]
    form["newEmail"] = NEW_EMAIL
    form["currentPassword"] = PASSWORD
    form.submit(status=303)
    link = mailed_link(dbsession, NEW_EMAIL, "email_change", "/account/settings/email/confirm")
    bob = logged_in(app, other_customer)
    page = bob.get(link).forms["confirm-email-form"].submit(status=200)
    text = " ".join(page.html.find("main").get_text(" ").split())
    assert f"Your email address is changed: it is now {NEW_EMAIL}" in text
    assert "You are logged in as bob@example.com" in text
    assert fresh_user(dbsession, customer.id).email == NEW_EMAIL
    # Bob stays Bob.
    assert bob.get("/account/settings").forms["name-form"]["name"].value == "Bob"
