"""Registration mails a verification link to a new email and an "account
exists" note to a taken one, answering both the same (no enumeration); an unverified
account cannot log in (said only after the password check); the link logs in, once."""

from __future__ import annotations

import datetime as dt

import pytest
import webtest
from helpers.clients import client_from, page_client, register
from helpers.mail_links import mails_to, token_of, verify_link
from helpers.notices import flashed
from sqlalchemy import func, select, update

from cmsshop.models import AccountToken, OutboxMessage, User, UserSession
from cmsshop.util import utcnow

VERIFY = "/api/auth/verify-email"
LOGIN = "/api/auth/login"
NEW_PASSWORD = "a long new password"


def test_new_and_taken_emails_get_identical_answers_and_the_right_mail(app, customer, dbsession):
    new = register(client_from(app, "10.5.0.1"), "fresh@example.com")
    taken = register(client_from(app, "10.5.0.2"), customer.email.upper())
    assert new.status_int == taken.status_int == 202
    assert new.body == taken.body
    assert new.json == {
        "status": "check_your_email",
        "message": new.json["message"],
    }
    assert sorted(new.headers.keys()) == sorted(taken.headers.keys())

    fresh = mails_to(dbsession, "fresh@example.com")
    assert [m.kind for m in fresh] == ["verify_email"]
    assert fresh[0].dedupe_key == f"verify-email:{fresh[0].user_id}"
    assert "7 days" in fresh[0].text_body
    # The token is issued when the mail is sent (see tests/accounts/test_mailed_tokens.py).
    assert verify_link(dbsession, "fresh@example.com").startswith("/verify-email?token=")
    token_row = dbsession.scalar(select(AccountToken))
    assert token_row.purpose == "verify_email"
    assert dt.timedelta(days=6) < token_row.expires_at - token_row.created_at

    existing = mails_to(dbsession, customer.email)
    assert [m.kind for m in existing] == ["account_exists"]
    today = utcnow().date().isoformat()
    assert existing[0].dedupe_key == f"account-exists:{customer.id}:{today}"
    assert "/forgot-password" in existing[0].text_body
    # The taken account is untouched; the new one waits for its link.
    assert dbsession.get(User, customer.id).email_verified_at is not None
    user = dbsession.scalar(select(User).where(User.email == "fresh@example.com"))
    assert user.email_verified_at is None


def test_a_flood_on_a_taken_email_sends_one_mail_a_day(app, customer, dbsession):
    for i in range(4):
        register(client_from(app, f"10.6.0.{i}"), customer.email)
    assert [m.kind for m in mails_to(dbsession, customer.email)] == ["account_exists"]
    assert dbsession.scalar(select(func.count()).select_from(OutboxMessage)) == 1


def test_unverified_login_is_refused_only_after_the_password_check(app, dbsession):
    client = client_from(app)
    register(client, "new@example.com")
    wrong = client.post_json(
        LOGIN, {"email": "new@example.com", "password": "wrong password"}, status=401
    )
    unknown = client.post_json(
        LOGIN, {"email": "nobody@example.com", "password": "wrong password"}, status=401
    )
    assert wrong.json["code"] == unknown.json["code"] == "invalid_credentials"
    right = client.post_json(
        LOGIN, {"email": "new@example.com", "password": NEW_PASSWORD}, status=403
    )
    assert right.json["code"] == "email_not_verified"
    assert any("password reset" in hint for hint in right.json["hints"])
    assert client.get("/api/auth/session").json["user"] is None
    # A right password takes its attempt back: being unverified does not lock one out.
    for _ in range(6):
        client.post_json(LOGIN, {"email": "new@example.com", "password": NEW_PASSWORD}, status=403)


def test_the_link_verifies_logs_in_and_works_once(app, dbsession):
    client = client_from(app)
    register(client, "new@example.com")
    token = token_of(verify_link(dbsession, "new@example.com"))
    body = client.post_json(VERIFY, {"token": token}).json
    assert body["user"]["email"] == "new@example.com"
    client.csrf_token = body["csrfToken"]
    assert client.get("/api/auth/session").json["user"]["email"] == "new@example.com"
    dbsession.rollback()
    user = dbsession.scalar(select(User).where(User.email == "new@example.com"))
    assert user.email_verified_at is not None
    assert dbsession.scalar(select(func.count()).select_from(UserSession)) == 1
    again = client_from(app).post_json(VERIFY, {"token": token}, status=410)
    assert again.json["code"] == "token_used"
    # From now on the password logs in.
    client_from(app).post_json(LOGIN, {"email": "new@example.com", "password": NEW_PASSWORD})


def test_an_expired_verification_link_and_the_way_forward(app, dbsession):
    client = client_from(app)
    register(client, "late@example.com")
    token = token_of(verify_link(dbsession, "late@example.com"))
    dbsession.execute(update(AccountToken).values(expires_at=utcnow() - dt.timedelta(seconds=1)))
    dbsession.commit()
    assert client.post_json(VERIFY, {"token": token}, status=410).json["code"] == "token_expired"
    # The way forward: a reset link also confirms the address.
    client.post_json("/api/auth/password-reset", {"email": "late@example.com"}, status=202)
    from helpers.mail_links import reset_link

    reset = token_of(reset_link(dbsession, "late@example.com"))
    client.post_json(
        "/api/auth/password-reset/confirm", {"token": reset, "password": "another password"}
    )
    client.post_json(LOGIN, {"email": "late@example.com", "password": "another password"})


@pytest.mark.parametrize(
    "token, status",
    [("\x00", 422), ("b" * 10_000, 422), (7, 422), ({}, 422), ("B" * 43, 400), ("ü" * 30, 400)],
)
def test_hostile_verification_tokens(testapp, token, status):
    testapp.post_json(VERIFY, {"token": token}, status=status)


def test_verification_needs_csrf(app, dbsession):
    client = client_from(app)
    register(client, "new@example.com")
    token = token_of(verify_link(dbsession, "new@example.com"))
    client.post_json(VERIFY, {"token": token}, headers={"X-CSRF-Token": "forged"}, status=403)
    client.post_json(VERIFY, {"token": token})


def test_operator_made_users_are_verified(make_user):
    assert make_user("made@example.com").email_verified_at is not None


def test_the_migration_verifies_existing_users(tmp_path):
    import sqlalchemy as sa
    from alembic import command
    from helpers.app import alembic_config

    url = f"sqlite:///{tmp_path / 'migrate.sqlite'}"
    cfg = alembic_config(url)
    command.upgrade(cfg, "0010")
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO users (email, name, password_hash, role, created_at) "
            "VALUES ('old@example.com', 'Old', 'x', 'customer', '2024-01-01 00:00:00')"
        )
    command.upgrade(cfg, "head")
    with engine.connect() as conn:
        verified = conn.exec_driver_sql("SELECT email_verified_at FROM users").scalar()
    engine.dispose()
    assert verified is not None


# --- pages ---------------------------------------------------------------------------


def register_on_the_page(client, email: str, next_path: str = "") -> webtest.TestResponse:
    form = client.get(f"/register?next={next_path}" if next_path else "/register").forms[0]
    form["email"] = email
    form["password"] = NEW_PASSWORD
    return form.submit(status=303)


def test_the_page_link_shows_a_button_and_only_the_post_uses_it(app, dbsession):
    client = page_client(app)
    register_on_the_page(client, "new@example.com", "/products")
    link = verify_link(dbsession, "new@example.com")
    assert "next=%2Fproducts" in link
    # Mail scanners open links: two GETs use nothing up.
    for _ in range(2):
        page = client.get(link)
        assert page.html.title.get_text().startswith("Confirm your email address")
    dbsession.rollback()
    assert dbsession.scalar(select(AccountToken.used_at)) is None
    response = page.forms[0].submit(status=303)
    assert response.location.endswith("/products")
    assert flashed(response) == "email_verified"
    assert "Your email address is confirmed" in response.follow().text
    used = client.get(link, status=410)
    assert "used already" in used.text and 'href="/login"' in used.text


def test_the_page_without_next_goes_to_the_account(app, dbsession):
    client = page_client(app)
    register_on_the_page(client, "new@example.com")
    response = client.get(verify_link(dbsession, "new@example.com")).forms[0].submit(status=303)
    assert response.location.endswith("/account")
    assert flashed(response) == "email_verified"


def test_verify_page_refuses_without_csrf_and_bad_tokens(app, dbsession):
    client = page_client(app)
    register_on_the_page(client, "new@example.com")
    link = verify_link(dbsession, "new@example.com")
    page = client.get(link)
    token = token_of(link)
    assert client.post("/verify-email", {"token": token}, status=403).content_type == "text/html"
    csrf = page.forms[0]["csrf_token"].value
    for bad in ("", "\x00", "y" * 500, "C" * 43):
        response = client.post("/verify-email", {"token": bad, "csrf_token": csrf}, status=400)
        assert "not valid" in response.text
    for query in ("", "?token=", "?token=%00", "?token=" + "z" * 3000, "?next=//evil.example"):
        assert client.get(f"/verify-email{query}", expect_errors=True).status_int in (400, 422)
    # A next pointing off site is dropped, not followed.
    response = client.post(
        "/verify-email", {"token": token, "csrf_token": csrf, "next": "//evil.example/"}
    )
    assert response.status_int == 303
    assert response.location.endswith("/account")
    assert flashed(response) == "email_verified"


def test_unverified_login_page_shows_the_way_forward(app):
    client = page_client(app)
    register_on_the_page(client, "new@example.com")
    form = client.get("/login").forms[0]
    form["email"] = "new@example.com"
    form["password"] = NEW_PASSWORD
    response = form.submit(status=403)
    assert "Confirm your email address" in response.html.find(class_="form-errors").text
    assert response.html.find("a", string="Ask for a password reset link")["href"] == (
        "/forgot-password"
    )
    wrong = client.get("/login").forms[0]
    wrong["email"] = "new@example.com"
    wrong["password"] = "not the password"
    assert "Confirm your email" not in wrong.submit(status=401).text


def test_register_page_tells_nothing_about_a_taken_email(app, customer, dbsession):
    client = page_client(app)
    new = register_on_the_page(client, "new@example.com")
    taken = register_on_the_page(client, customer.email)
    assert new.location == taken.location
    assert client.get(new.location).text == client.get(taken.location).text
    assert "finish creating your account" in client.get(new.location).text
