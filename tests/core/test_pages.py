"""The page stack and the core pages (home, log in, register, log out), through WebTest:
security headers, static cache-busting, HTML errors with a support code, CSRF on forms,
forms that keep what was typed and show the API's own validation per field."""

from __future__ import annotations

import re

import pytest
from helpers.app import PASSWORD
from helpers.clients import new_client, page_client
from helpers.html import title_of
from helpers.mail_links import mails_to, verify_link
from helpers.notices import flashed
from pyramid.config import Configurator
from sqlalchemy import func, select

from cmsshop.models import ErrorRecord, User, UserSession


def test_home_page_is_html_with_security_headers(app):
    response = page_client(app).get("/")
    assert response.content_type == "text/html"
    csp = response.headers["Content-Security-Policy"]
    assert "unsafe-inline" not in csp and "script-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["Referrer-Policy"] == "same-origin"
    assert "private" in response.headers["Cache-Control"]
    assert len(response.html.find_all("h1")) == 1
    assert response.html.html["lang"] == "en"
    # No inline script or style anywhere (the CSP would block it).
    assert not response.html.find_all("script", src=False)
    assert not response.html.find_all("style")
    assert not response.html.find_all(style=True)


def test_api_answers_keep_their_json_and_get_no_page_policy(app):
    response = page_client(app).get("/api/health")
    assert response.content_type == "application/json"
    assert "Content-Security-Policy" not in response.headers


def test_static_files_are_cache_busted_by_content(app):
    home = page_client(app).get("/")
    href = home.html.find("link", rel="stylesheet")["href"]
    assert re.fullmatch(r"http://localhost/static/site\.css\?v=[0-9a-f]{12}", href)
    css = page_client(app).get(href.replace("http://localhost", ""))
    assert css.content_type == "text/css"
    assert "max-age=31536000" in css.headers["Cache-Control"]


def test_unknown_page_is_a_friendly_html_404(app):
    response = page_client(app).get("/no-such-page", status=404)
    assert response.content_type == "text/html"
    assert title_of(response).startswith("Not found")
    assert response.html.find(class_="support-code").get_text(strip=True).startswith("CS-")
    assert "Traceback" not in response.text


def test_disabled_modules_pages_are_a_plain_html_404(make_app):
    app = make_app(**{"cmsshop.modules": "licensing"})
    client = page_client(app)
    for path in ("/products", "/products/x", "/docs", "/account/orders", "/checkout/return"):
        response = client.get(path, status=404)
        assert response.content_type == "text/html", path
        assert "not enabled" in response.text
    # The API keeps its JSON answer.
    assert client.get("/api/store/products", status=404).json["code"] == "module_disabled"
    # The navigation leaves out what is off.
    nav = client.get("/").html.find("nav")
    assert nav.find("a", href="/products") is None and nav.find("a", href="/docs") is None


def test_a_server_error_on_a_page_is_html_with_a_stored_support_code(make_app, dbsession):
    app = make_app()

    def boom(request):
        raise RuntimeError("secret detail")

    # A page route that fails, added to the real app's registry for this test.
    config = Configurator(registry=app.registry)
    config.add_route("test.boom", "/boom-page")
    config.add_view(boom, route_name="test.boom")
    config.commit()
    response = page_client(app).get("/boom-page", status=500)
    assert response.content_type == "text/html"
    assert "secret detail" not in response.text and "Traceback" not in response.text
    code = response.html.find(class_="support-code").get_text(strip=True)
    dbsession.expire_all()
    record = dbsession.scalar(select(ErrorRecord).where(ErrorRecord.support_code == code))
    assert record is not None and record.status == 500 and record.path == "/boom-page"


def test_register_asks_to_check_the_mail_and_its_link_logs_in(app, dbsession):
    client = page_client(app)
    form = client.get("/register").forms[0]
    form["email"] = "new@example.com"
    form["password"] = "a long enough password"
    form["name"] = "New Customer"
    response = form.submit(status=303)
    assert response.location.endswith("/check-email?reason=register")
    page = response.follow()
    assert page.html.h1.get_text(strip=True) == "Check your email"
    assert dbsession.scalar(select(User).where(User.email == "new@example.com")) is not None
    assert client.get("/").html.find("button", string="Log out") is None
    # The link in the mail: a page with a button, then logged in.
    confirm = client.get(verify_link(dbsession, "new@example.com"))
    response = confirm.forms[0].submit(status=303)
    assert response.location.endswith("/account")
    assert flashed(response) == "email_verified"
    home = client.get("/")
    assert home.html.find("button", string="Log out") is not None


def test_register_shows_the_apis_errors_per_field_and_keeps_the_input(app, dbsession):
    client = page_client(app)
    form = client.get("/register").forms[0]
    form["email"] = "not-an-email"
    form["password"] = "short"
    form["name"] = "Keep Me"
    response = form.submit(status=422)
    errors = {p["id"]: p.get_text(strip=True) for p in response.html.find_all(class_="error")}
    assert "f-email-error" in errors and "f-password-error" in errors
    assert response.html.find("input", id="f-name")["value"] == "Keep Me"
    assert response.html.find("input", id="f-email")["value"] == "not-an-email"
    assert response.html.find("input", id="f-email")["aria-invalid"] == "true"
    # The password is never echoed back.
    assert "value" not in response.html.find("input", id="f-password").attrs
    assert dbsession.scalar(select(func.count()).select_from(User)) == 0


def test_register_with_a_taken_email_answers_neutrally_and_logs_nobody_in(app, customer, dbsession):
    client = page_client(app)
    form = client.get("/register").forms[0]
    form["email"] = customer.email
    form["password"] = "a long enough password"
    response = form.submit(status=303)
    assert response.location.endswith("/check-email?reason=register")
    assert dbsession.scalar(select(func.count()).select_from(UserSession)) == 0
    assert [m.kind for m in mails_to(dbsession, customer.email)] == ["account_exists"]


def test_registration_closed_page(make_app):
    client = page_client(make_app(**{"cmsshop.registration_open": "false"}))
    assert "closed" in client.get("/register").text
    assert not client.get("/register").forms


def test_login_and_logout(app, customer, dbsession):
    client = page_client(app)
    form = client.get("/login?next=/products").forms[0]
    form["email"] = customer.email
    form["password"] = PASSWORD
    response = form.submit(status=303)
    assert response.location.endswith("/products")
    logout = client.get("/").forms[0]
    assert logout.action == "/logout"
    response = logout.submit(status=303)
    assert response.location.endswith("/")
    assert flashed(response) == "logged_out"
    assert "You are logged out." in response.follow().text
    assert dbsession.scalar(select(func.count()).select_from(UserSession)) == 0


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/x", "/\\evil"])
def test_login_never_redirects_off_site(app, customer, target):
    client = page_client(app)
    token = client.get("/login").forms[0]["csrf_token"].value
    fields = {"csrf_token": token, "email": customer.email, "password": PASSWORD, "next": target}
    response = client.post("/login", fields, status=303)
    assert response.location in ("http://localhost/account", "http://localhost/")


def test_wrong_password_is_a_form_error(app, customer):
    client = page_client(app)
    form = client.get("/login").forms[0]
    form["email"] = customer.email
    form["password"] = "wrong password"
    response = form.submit(status=401)
    assert "The email or password is wrong." in response.html.find(class_="form-errors").text
    assert response.html.find("input", id="f-email")["value"] == customer.email


def test_forms_without_the_csrf_token_are_refused(app, customer, dbsession):
    client = page_client(app)
    client.get("/login")  # the anonymous cookie
    response = client.post("/login", {"email": customer.email, "password": PASSWORD}, status=403)
    assert response.content_type == "text/html"
    response = client.post(
        "/register",
        {"email": "x@example.com", "password": "a long enough password", "csrf_token": "bad"},
        status=403,
    )
    assert dbsession.scalar(select(func.count()).select_from(UserSession)) == 0
    # Logged in, a forged log-out does nothing.
    logged_in = new_client(app)
    logged_in.login(customer.email)
    logged_in.post("/logout", {}, headers={"X-CSRF-Token": "forged"}, status=403)
    logged_in.post("/logout", {"csrf_token": "forged"}, headers={"X-CSRF-Token": ""}, status=403)
    dbsession.rollback()  # a new snapshot
    assert dbsession.scalar(select(func.count()).select_from(UserSession)) == 1


def test_hostile_form_input_is_refused_without_a_500(app, customer):
    client = page_client(app)
    form = client.get("/login").forms[0]
    form["email"] = "a\x00b@example.com"
    form["password"] = "x"
    response = form.submit(status=422)
    assert response.content_type == "text/html"
    # A body that is not UTF-8.
    token = form["csrf_token"].value
    response = client.post(
        "/login",
        b"csrf_token=" + token.encode() + b"&email=%FF%FE&password=x",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        status="4*",
    )
    assert response.content_type == "text/html"


def test_the_stylesheet_is_well_formed():
    """Every rule closes: one missing brace silently drops every rule after it."""
    from pathlib import Path

    from cmsshop.web import STATIC_DIR

    css = (Path(STATIC_DIR) / "site.css").read_text(encoding="utf-8")
    depth = 0
    for number, line in enumerate(css.splitlines(), 1):
        depth += line.count("{") - line.count("}")
        assert 0 <= depth <= 1 or line.lstrip().startswith("@"), f"line {number}: {line}"
        assert depth <= 2, f"line {number}: rules nest too deep"
    assert depth == 0
