"""Password reset by a mailed, single-use, expiring link stored hashed; the
request answers the same for every email and is rate limited; a reset ends every
session of the account. JSON routes and the /forgot-password and /reset-password pages."""

from __future__ import annotations

import datetime as dt
import hashlib
import threading

import pytest
from helpers.app import PASSWORD
from helpers.clients import client_from, new_client, page_client
from helpers.mail_links import mails_to, reset_link, token_of
from helpers.notices import flashed
from sqlalchemy import func, select, update

from cmsshop.models import AccountToken, OutboxMessage, User, UserSession
from cmsshop.util import utcnow

RESET = "/api/auth/password-reset"
CONFIRM = "/api/auth/password-reset/confirm"
NEW_PASSWORD = "a brand new password"


def ask_reset(app, dbsession, email: str) -> str:
    """Ask for a reset of ``email`` and return the token of the mailed link."""
    client_from(app).post_json(RESET, {"email": email}, status=202)
    return token_of(reset_link(dbsession, email))


def test_known_and_unknown_emails_get_the_same_answer(app, customer, dbsession):
    client = client_from(app)
    known = client.post_json(RESET, {"email": customer.email.upper()}, status=202)
    unknown = client.post_json(RESET, {"email": "nobody@example.com"}, status=202)
    assert known.json == unknown.json
    assert known.json["status"] == "check_your_email"
    assert sorted(known.headers.keys()) == sorted(unknown.headers.keys())
    messages = mails_to(dbsession, customer.email)
    assert [m.kind for m in messages] == ["password_reset"]
    assert messages[0].subject == "Reset your password"
    assert "1 hour" in messages[0].text_body
    # Both are queued alike; the sender mails the account's owner and drops the other.
    assert dbsession.scalar(select(func.count()).select_from(OutboxMessage)) == 2
    link = reset_link(dbsession, customer.email)
    assert link.startswith("/reset-password?token=")
    assert dbsession.scalar(select(func.count()).select_from(OutboxMessage)) == 1
    assert dbsession.scalar(select(AccountToken)).purpose == "password_reset"


def queued(dbsession) -> int:
    dbsession.rollback()
    return dbsession.scalar(select(func.count()).select_from(OutboxMessage))


def test_requests_are_rate_limited_per_email_and_per_ip_without_saying_so(
    make_app, customer, dbsession
):
    app = make_app(
        **{
            "cmsshop.password_reset_max_per_email": "2",
            "cmsshop.password_reset_max_per_ip": "4",
        }
    )
    client = client_from(app, "10.1.0.1")
    answers = [client.post_json(RESET, {"email": customer.email}, status=202) for _ in range(3)]
    assert answers[0].json == answers[2].json  # limited: the same 202 and body
    assert queued(dbsession) == 2
    # Per IP: other emails from the same address, past 4 requests, queue nothing either.
    # Every address within the limits gets a job, known or not (the sender drops those
    # without an account).
    client.post_json(RESET, {"email": "x@example.com"}, status=202)  # 4th from this IP
    assert queued(dbsession) == 3
    client.post_json(RESET, {"email": "y@example.com"}, status=202)  # 5th from this IP
    other = client_from(app, "10.1.0.2")
    other.post_json(RESET, {"email": customer.email}, status=202)  # 3rd for the email
    assert queued(dbsession) == 3


def test_reset_sets_the_password_verifies_and_ends_every_session(app, customer, dbsession):
    phone, laptop = new_client(app), new_client(app)
    phone.login(customer.email)
    laptop.login(customer.email)
    dbsession.execute(update(User).values(email_verified_at=None))
    dbsession.commit()
    token = ask_reset(app, dbsession, customer.email)
    stranger = client_from(app, "10.2.0.1")
    body = stranger.post_json(CONFIRM, {"token": token, "password": NEW_PASSWORD}).json
    assert body["status"] == "password_changed" and body["user"] is None
    for client in (phone, laptop):
        assert client.get("/api/auth/session").json["user"] is None
    dbsession.rollback()
    assert dbsession.scalar(select(func.count()).select_from(UserSession)) == 0
    assert dbsession.get(User, customer.id).email_verified_at is not None
    fresh = client_from(app, "10.2.0.2")
    fresh.post_json("/api/auth/login", {"email": customer.email, "password": PASSWORD}, status=401)
    fresh.post_json("/api/auth/login", {"email": customer.email, "password": NEW_PASSWORD})


def test_the_browser_that_resets_is_logged_out_too(customer_app, customer, app, dbsession):
    token = ask_reset(app, dbsession, customer.email)
    body = customer_app.post_json(CONFIRM, {"token": token, "password": NEW_PASSWORD}).json
    assert body["user"] is None
    customer_app.csrf_token = body["csrfToken"]  # the anonymous token now works
    assert customer_app.get("/api/auth/session").json["user"] is None
    customer_app.post_json(RESET, {"email": customer.email}, status=202)


def test_only_the_hash_of_the_token_is_stored(app, customer, dbsession):
    token = ask_reset(app, dbsession, customer.email)
    row = dbsession.scalar(select(AccountToken))
    assert row.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert row.purpose == "password_reset" and row.used_at is None
    assert dt.timedelta(minutes=59) < row.expires_at - row.created_at <= dt.timedelta(hours=1)
    values = [str(v) for v in dbsession.execute(select(AccountToken.__table__)).one()]
    assert not any(token in value for value in values)


def test_a_link_works_once_and_a_newer_reset_kills_older_links(app, customer, dbsession):
    first = ask_reset(app, dbsession, customer.email)
    second = ask_reset(app, dbsession, customer.email)
    assert first != second
    client = client_from(app)
    client.post_json(CONFIRM, {"token": second, "password": NEW_PASSWORD})
    again = client.post_json(CONFIRM, {"token": second, "password": "yet another one"}, status=410)
    assert again.json["code"] == "token_used"
    older = client.post_json(CONFIRM, {"token": first, "password": "yet another one"}, status=410)
    assert older.json["code"] == "token_used"


def test_an_expired_link_is_refused(app, customer, dbsession):
    token = ask_reset(app, dbsession, customer.email)
    dbsession.execute(update(AccountToken).values(expires_at=utcnow() - dt.timedelta(seconds=1)))
    dbsession.commit()
    response = client_from(app).post_json(
        CONFIRM, {"token": token, "password": NEW_PASSWORD}, status=410
    )
    assert response.json["code"] == "token_expired"
    assert response.json["hints"]


def test_the_lifetime_is_a_setting(make_app, customer, dbsession):
    app = make_app(**{"cmsshop.password_reset_ttl": "600"})
    client_from(app).post_json(RESET, {"email": customer.email}, status=202)
    reset_link(dbsession, customer.email, settings=app.registry.settings)
    row = dbsession.scalar(select(AccountToken))
    assert row.expires_at - row.created_at == dt.timedelta(seconds=600)
    assert "within 10 minutes" in mails_to(dbsession, customer.email)[0].text_body


def test_two_concurrent_uses_of_one_link_succeed_once(app, customer, dbsession):
    token = ask_reset(app, dbsession, customer.email)
    clients = [client_from(app, f"10.3.0.{i}") for i in (1, 2)]
    barrier = threading.Barrier(2)
    statuses: list[int] = []

    def use(client, password):
        barrier.wait()
        response = client.post_json(
            CONFIRM, {"token": token, "password": password}, expect_errors=True
        )
        statuses.append(response.status_int)

    threads = [
        threading.Thread(target=use, args=(client, f"password number {i}"))
        for i, client in enumerate(clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(statuses) == [200, 410]
    dbsession.rollback()
    assert dbsession.scalar(select(AccountToken.used_at)) is not None


@pytest.mark.parametrize(
    "token, status",
    [
        ("\x00" * 43, 422),
        ("a" * 100_000, 422),
        (12345, 422),
        (["x"], 422),
        (None, 422),
        ("", 422),
        ("A" * 43, 400),
        ("é" * 43, 400),
        ("../../etc/passwd-0123456789", 400),
        ("a b" * 15, 400),
    ],
)
def test_hostile_tokens_are_refused(testapp, token, status):
    response = testapp.post_json(CONFIRM, {"token": token, "password": NEW_PASSWORD}, status=status)
    assert response.json["code"] in ("validation_failed", "invalid_token")


def test_a_verification_token_does_not_reset_a_password(testapp, dbsession):
    from helpers.mail_links import verify_link

    testapp.post_json(
        "/api/auth/register", {"email": "v@example.com", "password": "a long password"}
    )
    token = token_of(verify_link(dbsession, "v@example.com"))
    response = testapp.post_json(CONFIRM, {"token": token, "password": NEW_PASSWORD}, status=400)
    assert response.json["code"] == "invalid_token"


def test_confirm_checks_the_password_rules_and_csrf(app, customer, dbsession):
    token = ask_reset(app, dbsession, customer.email)
    client = client_from(app)
    short = client.post_json(CONFIRM, {"token": token, "password": "short"}, status=422)
    assert set(short.json["errors"]) == {"password"}
    client.post_json(
        CONFIRM,
        {"token": token, "password": NEW_PASSWORD},
        headers={"X-CSRF-Token": "forged"},
        status=403,
    )
    # Neither used the link up.
    client.post_json(CONFIRM, {"token": token, "password": NEW_PASSWORD})


def test_request_validates_the_email(testapp):
    for body in ({"email": "not-an-email"}, {"email": 5}, {}, {"email": "a@b.c", "x": 1}):
        testapp.post_json(RESET, body, status=422)


# --- pages ---------------------------------------------------------------------------


def test_forgot_password_page_answers_alike_for_any_email(app, customer, dbsession):
    client = page_client(app)
    page = client.get("/forgot-password")
    assert page.html.title.get_text().startswith("Forgot your password")
    locations = []
    for email in (customer.email, "nobody@example.com"):
        form = client.get("/forgot-password").forms[0]
        form["email"] = email
        locations.append(form.submit(status=303).location)
    assert locations[0] == locations[1]
    done = client.get(locations[0])
    assert "If an account exists" in done.text
    assert done.html.h1.get_text(strip=True) == "Check your email"
    assert [m.kind for m in mails_to(dbsession, customer.email)] == ["password_reset"]
    bad = client.get("/forgot-password").forms[0]
    bad["email"] = "not an email"
    response = bad.submit(status=422)
    assert response.html.find("input", id="f-email")["value"] == "not an email"


def test_reset_page_sets_the_password_and_sends_to_login(app, customer, dbsession):
    token = ask_reset(app, dbsession, customer.email)
    client = page_client(app)
    page = client.get(f"/reset-password?token={token}")
    assert page.html.title.get_text().startswith("Choose a new password")
    form = page.forms[0]
    form["password"] = "short"
    retry = form.submit(status=422)
    assert retry.html.find(id="f-password-error") is not None
    form = retry.forms[0]
    assert form["token"].value == token  # kept for the second try
    form["password"] = NEW_PASSWORD
    response = form.submit(status=303)
    assert response.location.endswith("/login")
    assert flashed(response) == "password_reset"
    assert "every device is logged out" in response.follow().text
    login = client.get("/login").forms[0]
    login["email"] = customer.email
    login["password"] = NEW_PASSWORD
    login.submit(status=303)
    # The link is used up: the page says so and offers a new one.
    used = client.get(f"/reset-password?token={token}", status=410)
    assert "used already" in used.text and "/forgot-password" in used.text


@pytest.mark.parametrize(
    "query, status",
    [
        ("", 400),
        ("?token=", 400),
        ("?token=%00%00", "4*"),
        ("?token=" + "a" * 5000, 400),
        ("?token=" + "A" * 43, 400),
        ("?token=%ff%fe", "4*"),
        ("?token=a&token=b", 400),
    ],
)
def test_reset_page_hostile_tokens_are_4xx_pages(app, query, status):
    response = page_client(app).get(f"/reset-password{query}", status=status)
    assert response.content_type == "text/html"
    assert '<form method="post" action="/reset-password"' not in response.text


def test_reset_page_post_refuses_without_csrf_and_with_bad_tokens(app, customer, dbsession):
    token = ask_reset(app, dbsession, customer.email)
    client = page_client(app)
    page = client.get(f"/reset-password?token={token}")
    response = client.post(
        "/reset-password", {"token": token, "password": NEW_PASSWORD}, status=403
    )
    assert response.content_type == "text/html"
    csrf = page.forms[0]["csrf_token"].value
    for bad in ("\x00", "x" * 300, "A" * 43):
        response = client.post(
            "/reset-password",
            {"token": bad, "password": NEW_PASSWORD, "csrf_token": csrf},
            status=400,
        )
        assert "not valid" in response.text
    dbsession.rollback()
    assert dbsession.scalar(select(AccountToken.used_at)) is None  # still usable


def test_expired_link_page(app, customer, dbsession):
    token = ask_reset(app, dbsession, customer.email)
    dbsession.execute(update(AccountToken).values(expires_at=utcnow() - dt.timedelta(seconds=1)))
    dbsession.commit()
    response = page_client(app).get(f"/reset-password?token={token}", status=410)
    assert "expired" in response.text


def test_login_page_links_to_forgot_password(app):
    page = page_client(app).get("/login")
    assert page.html.find("a", string="Forgot your password?")["href"] == "/forgot-password"
