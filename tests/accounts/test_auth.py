"""Accounts, sessions and login throttling."""

from __future__ import annotations

from http.cookies import SimpleCookie

from sqlalchemy import func, select

from cmsshop.models import User, UserSession

PASSWORD = "correct horse battery"


def session_cookie(response) -> str:
    for header in response.headers.getall("Set-Cookie"):
        if header.startswith("cmsshop_session="):
            return header
    raise AssertionError("no session cookie set")


def test_register_creates_an_unverified_account_hashed_with_argon2(testapp, dbsession):
    # Registering does not log in; the account waits for its mailed link
    # (tests/test_email_verification.py follows it).
    response = testapp.post_json(
        "/api/auth/register",
        {"email": "New.User@Example.com", "password": "a long password", "name": "New"},
        status=202,
    )
    assert response.json["status"] == "check_your_email"
    user = dbsession.scalar(select(User).where(User.email == "new.user@example.com"))
    assert user.password_hash.startswith("$argon2id$")
    assert user.email_verified_at is None
    assert testapp.get("/api/auth/session").json["user"] is None


def test_register_taken_email_answers_like_a_new_one_without_a_session(testapp, customer):
    # Not 409 email_taken, which would tell anyone which emails have accounts: both
    # answer 202 with one body.
    new = testapp.post_json(
        "/api/auth/register",
        {"email": "fresh@example.com", "password": "another password"},
        status=202,
    )
    taken = testapp.post_json(
        "/api/auth/register",
        {"email": "ALICE@example.com", "password": "another password"},
        status=202,
    )
    assert new.json == taken.json
    assert testapp.get("/api/auth/session").json["user"] is None


def test_register_validates(testapp):
    response = testapp.post_json(
        "/api/auth/register", {"email": "not-an-email", "password": "short"}, status=422
    )
    assert set(response.json["errors"]) == {"email", "password"}


def test_register_can_be_closed(make_app):
    from helpers.clients import new_client

    client = new_client(make_app(**{"cmsshop.registration_open": "false"}))
    client.refresh_csrf()
    response = client.post_json(
        "/api/auth/register", {"email": "x@example.com", "password": "long enough pw"}, status=403
    )
    assert response.json["code"] == "registration_closed"


def test_https_post_from_another_origin_is_csrf_failed(app, customer):
    from helpers.clients import new_client

    client = new_client(app)
    client.extra_environ.update({"wsgi.url_scheme": "https", "HTTP_HOST": "localhost"})
    client.refresh_csrf()
    response = client.post_json(
        "/api/auth/login",
        {"email": customer.email, "password": PASSWORD},
        headers={"Origin": "https://evil.example"},
        status=403,
    )
    assert response.json["code"] == "csrf_failed"


def test_login_cookie_flags(testapp, customer):
    response = testapp.post_json("/api/auth/login", {"email": customer.email, "password": PASSWORD})
    cookie = session_cookie(response).lower()
    assert "httponly" in cookie and "samesite=lax" in cookie and "secure" not in cookie


def test_secure_cookie_when_configured(make_app, customer):
    from helpers.clients import new_client

    client = new_client(make_app(**{"cmsshop.session_cookie_secure": "true"}))
    client.extra_environ.update({"wsgi.url_scheme": "https", "HTTP_HOST": "localhost"})
    client.refresh_csrf()
    # Over HTTPS Pyramid also checks that the Origin is this site.
    response = client.post_json(
        "/api/auth/login",
        {"email": customer.email, "password": PASSWORD},
        headers={"Origin": "https://localhost"},
    )
    assert "; secure" in session_cookie(response).lower()


def test_login_starts_a_new_session(testapp, customer):
    before = testapp.cookies["cmsshop_session"]
    testapp.post_json("/api/auth/login", {"email": customer.email, "password": PASSWORD})
    after = testapp.cookies["cmsshop_session"]
    assert before != after
    # Logging in again (same browser) replaces the session instead of stacking them.
    testapp.csrf_token = testapp.get("/api/auth/session").json["csrfToken"]
    testapp.post_json("/api/auth/login", {"email": customer.email, "password": PASSWORD})
    assert testapp.cookies["cmsshop_session"] != after


def test_logout_makes_a_copied_cookie_useless(customer_app, app, dbsession):
    from helpers.clients import new_client

    stolen = customer_app.cookies["cmsshop_session"]
    customer_app.post_json("/api/auth/logout", {})
    thief = new_client(app)
    thief.set_cookie("cmsshop_session", stolen)
    assert thief.get("/api/auth/session").json["user"] is None
    assert dbsession.scalar(select(func.count()).select_from(UserSession)) == 0


def test_session_ids_are_stored_hashed(customer_app, dbsession):
    token = customer_app.cookies["cmsshop_session"]
    ids = dbsession.scalars(select(UserSession.id)).all()
    assert token not in ids and len(ids) == 1


def test_same_error_for_unknown_email_and_wrong_password(testapp, customer):
    unknown = testapp.post_json(
        "/api/auth/login", {"email": "nobody@example.com", "password": PASSWORD}, status=401
    ).json
    wrong = testapp.post_json(
        "/api/auth/login", {"email": customer.email, "password": "wrong password"}, status=401
    ).json
    for key in ("code", "title", "message", "hints"):
        assert unknown[key] == wrong[key]


def test_repeated_failures_are_throttled_even_with_the_right_password(testapp, customer):
    for _ in range(5):
        testapp.post_json(
            "/api/auth/login", {"email": customer.email, "password": "nope"}, status=401
        )
    response = testapp.post_json(
        "/api/auth/login", {"email": customer.email, "password": PASSWORD}, status=429
    )
    assert response.json["code"] == "rate_limited"
    assert int(response.headers["Retry-After"]) >= 1
    # Another account from the same address is not locked out by this one.
    other = testapp.post_json(
        "/api/auth/login", {"email": "else@example.com", "password": "x"}, status=401
    )
    assert other.json["code"] == "invalid_credentials"


def test_throttle_is_shared_between_processes(make_app, customer):
    """Two app instances (as behind a load balancer) share the failure count."""
    from helpers.clients import new_client

    first, second = new_client(make_app()), new_client(make_app())
    for client in (first, second):
        client.refresh_csrf()
    for index in range(5):
        client = first if index % 2 else second
        client.post_json(
            "/api/auth/login", {"email": customer.email, "password": "nope"}, status=401
        )
    first.post_json("/api/auth/login", {"email": customer.email, "password": PASSWORD}, status=429)


def test_session_route_for_anonymous(testapp):
    body = testapp.get("/api/auth/session").json
    assert body["user"] is None and len(body["csrfToken"]) >= 32


def test_bad_cookie_values_are_anonymous(app):
    from helpers.clients import new_client

    client = new_client(app)
    for value in ("x", "a" * 500, "not-a-known-session-token-0123456789"):
        client.set_cookie("cmsshop_session", value)
        assert client.get("/api/auth/session").json["user"] is None


def test_cookie_parses_as_standard_cookie(testapp, customer):
    response = testapp.post_json("/api/auth/login", {"email": customer.email, "password": PASSWORD})
    parsed = SimpleCookie()
    parsed.load(session_cookie(response))
    assert parsed["cmsshop_session"]["path"] == "/"
