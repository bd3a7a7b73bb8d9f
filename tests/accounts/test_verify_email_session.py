"""A verification link never swaps the session it is pressed in without asking: its page
names the address it confirms (and who is logged in), a plain confirm while someone else
is logged in confirms the address and keeps their session, and only the explicit "log
out of X and log in as Y" button (``switch``) changes who is logged in. Otherwise anyone
could log a visitor into an account of theirs by sending its link (login CSRF)."""

from __future__ import annotations

from helpers.app import HASHER, PASSWORD
from helpers.clients import client_from, logged_in, page_client
from helpers.html import h1_of
from helpers.mail_links import token_of, verify_link
from sqlalchemy import func, select

from cmsshop.models import User, UserSession
from cmsshop.services.accounts import tokens
from cmsshop.services.accounts.users import create_user

VERIFY = "/api/auth/verify-email"
NEW_PASSWORD = "a long new password"
MALLORY = "mallory@example.com"


def registered_link(app, dbsession, email: str = MALLORY) -> str:
    """The verification link the owner of ``email`` gets by registering."""
    client_from(app, "10.32.5.1").post_json(
        "/api/auth/register", {"email": email, "password": NEW_PASSWORD}, status=202
    )
    return verify_link(dbsession, email)


def session_email(client) -> str | None:
    user = client.get("/api/auth/session").json["user"]
    return user and user["email"]


def page_text(response) -> str:
    return " ".join(response.html.get_text().split())


def verify_form(page):
    """The page's confirm form (a logged-in page also has the header's log-out form)."""
    (form,) = [form for form in page.forms.values() if form.action == "/verify-email"]
    return form


def is_verified(dbsession, email: str) -> bool:
    dbsession.rollback()
    user = dbsession.scalar(select(User).where(User.email == email))
    return user.email_verified_at is not None


def sessions_of(dbsession, user) -> int:
    dbsession.rollback()
    return dbsession.scalar(
        select(func.count()).select_from(UserSession).where(UserSession.user_id == user.id)
    )


def cookie_of(client) -> str:
    return client.cookies["cmsshop_session"]


def test_nobody_logged_in_the_page_names_the_address_and_confirming_logs_in(app, dbsession):
    link = registered_link(app, dbsession)
    browser = page_client(app)
    page = browser.get(link)
    assert h1_of(page) == "Confirm your email address"
    assert MALLORY in page_text(page)
    assert "logged in as" not in page_text(page)
    form = verify_form(page)
    assert "switch" not in form.fields  # nobody to switch from: one button
    form.submit(status=303)
    assert session_email(browser) == MALLORY
    assert is_verified(dbsession, MALLORY)


def test_logged_in_as_someone_else_a_plain_confirm_keeps_their_session(app, dbsession, customer):
    link = registered_link(app, dbsession)
    browser = logged_in(app, customer)
    before = cookie_of(browser)
    page = browser.get(link)
    text = page_text(page)
    assert MALLORY in text
    assert f"You are logged in as {customer.email}." in text
    switch = page.html.find("button", attrs={"name": "switch"})
    assert switch["value"] == "1"
    expected = f"Log out of {customer.email} and log in as {MALLORY}"
    assert switch.get_text(" ", strip=True) == expected

    done = verify_form(page).submit(status=200)  # the first button: no switch
    text = page_text(done)
    assert f"The address {MALLORY} is confirmed" in text
    assert f"You are still logged in as {customer.email}" in text
    assert is_verified(dbsession, MALLORY)
    assert session_email(browser) == customer.email
    assert cookie_of(browser) == before
    assert sessions_of(dbsession, customer) == 1
    mallory = dbsession.scalar(select(User).where(User.email == MALLORY))
    assert sessions_of(dbsession, mallory) == 0
    # The link is used: pressing it again cannot switch either.
    csrf = verify_form(page)["csrf_token"].value
    again = browser.post(
        "/verify-email", {"token": token_of(link), "switch": "1", "csrf_token": csrf}, status=410
    )
    assert "already" in page_text(again) or "used" in page_text(again)
    assert session_email(browser) == customer.email


def test_logged_in_as_someone_else_the_switch_button_logs_out_and_in(app, dbsession, customer):
    link = registered_link(app, dbsession)
    browser = logged_in(app, customer)
    old_cookie = cookie_of(browser)
    page = browser.get(link)
    verify_form(page).submit("switch", status=303)
    assert session_email(browser) == MALLORY
    assert is_verified(dbsession, MALLORY)
    # The customer's session is over, not just left behind in this browser.
    assert sessions_of(dbsession, customer) == 0
    stale = page_client(app)
    stale.set_cookie("cmsshop_session", old_cookie)
    assert session_email(stale) is None


def test_the_owner_logged_in_keeps_their_session(app, dbsession, make_user):
    owner = create_user(dbsession, HASHER, "owner@example.com", PASSWORD)
    dbsession.commit()
    browser = logged_in(app, owner.email.upper())  # the login form's own spelling
    tokens.send_verification(dbsession, app.registry.settings, owner)
    dbsession.commit()
    page = browser.get(verify_link(dbsession, owner.email))
    assert "logged in as" not in page_text(page)
    assert "switch" not in verify_form(page).fields
    before = cookie_of(browser)
    verify_form(page).submit(status=303)
    assert session_email(browser) == owner.email
    assert cookie_of(browser) == before
    assert sessions_of(dbsession, owner) == 1


def test_the_addresses_are_escaped(app, dbsession, make_user):
    # An address the operator typed (the registration form would refuse it).
    odd = "<b>o'hara&co</b>@example.com"
    user = create_user(dbsession, HASHER, odd, NEW_PASSWORD, verified=False)
    dbsession.commit()
    tokens.send_verification(dbsession, app.registry.settings, user)
    dbsession.commit()
    link = verify_link(dbsession, odd)
    page = page_client(app).get(link)
    assert "<b>o" not in page.text
    assert odd in page_text(page)
    assert page.html.find("b") is None


def test_a_forged_switch_value_is_refused_and_changes_nothing(app, dbsession, customer):
    link = registered_link(app, dbsession)
    browser = logged_in(app, customer)
    form = verify_form(browser.get(link))
    fields = {"token": token_of(link), "csrf_token": form["csrf_token"].value, "switch": "yes"}
    refused = browser.post("/verify-email", fields, status=422)
    assert refused.content_type == "text/html"
    assert not is_verified(dbsession, MALLORY)
    assert session_email(browser) == customer.email


def test_the_api_keeps_another_users_session_unless_asked_to_switch(app, dbsession, customer):
    link = registered_link(app, dbsession)
    client = client_from(app)
    client.login(customer.email)
    body = client.post_json(VERIFY, {"token": token_of(link)}).json
    assert body["user"]["email"] == customer.email
    assert is_verified(dbsession, MALLORY)
    assert client.get("/api/auth/session").json["user"]["email"] == customer.email

    second = registered_link(app, dbsession, "trent@example.com")
    client.post_json(VERIFY, {"token": token_of(second), "switch": "yes"}, status=422)
    body = client.post_json(VERIFY, {"token": token_of(second), "switch": True}).json
    assert body["user"]["email"] == "trent@example.com"
    client.csrf_token = body["csrfToken"]
    assert client.get("/api/auth/session").json["user"]["email"] == "trent@example.com"
    assert sessions_of(dbsession, customer) == 0


def test_the_api_logs_in_when_nobody_is(app, dbsession):
    link = registered_link(app, dbsession)
    client = client_from(app)
    body = client.post_json(VERIFY, {"token": token_of(link), "switch": False}).json
    assert body["user"]["email"] == MALLORY
