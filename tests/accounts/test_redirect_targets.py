"""Every redirect whose target comes from the request (the ``next`` of logging in, of
confirming an email address, of a page that needs a login) sends a Location of ASCII
only, percent-encoded and still on this site: a WSGI server can write nothing else in a
header, and waitress answers a plain-text 500 instead (nobody logged in, no support
code)."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import requests
from helpers.app import PASSWORD
from helpers.clients import page_client
from helpers.mail_links import verify_link
from helpers.notices import flashed

NEW_PASSWORD = "a long new password"
# RFC 3986: what a Location may carry unencoded (plus the escapes themselves).
URI_CHARACTERS = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]*")
ESCAPE_OR_NOT_PERCENT = re.compile(r"%(?![0-9A-F]{2})")

# (next as posted, the path and query the browser is sent to)
TARGETS = [
    ("/\u3000/x", "/%E3%80%80/x"),
    ("/%E3%80%80/x", "/%E3%80%80/x"),  # already encoded: left as it is
    ("/products?q=caf\u00e9#top", "/products?q=caf%C3%A9#top"),
    ('/a b"<>{}|^`', "/a%20b%22%3C%3E%7B%7D%7C%5E%60"),
    ("/50%", "/50%25"),  # a percent sign that starts no escape
    ("/x\r\nSet-Cookie: stolen=1", "/x%0D%0ASet-Cookie:%20stolen=1"),
    # Browsers drop tabs and line breaks from a URL: unencoded, this would be //evil...
    ("/\t/evil.example/", "/%09/evil.example/"),
]


def assert_local_ascii(location: str, expected: str | None = None) -> None:
    """``location`` is ASCII, a valid URI (every other byte percent-encoded) on this site."""
    assert location.isascii(), location
    assert URI_CHARACTERS.fullmatch(location.replace("%", "")), location
    assert not ESCAPE_OR_NOT_PERCENT.search(location), location
    parts = urlsplit(location)
    assert (parts.scheme, parts.netloc) in (("", ""), ("http", "localhost")), location
    if expected is not None:
        assert location.removeprefix("http://localhost") == expected


def post_login(client, email: str, next_path: str, **kwargs):
    token = client.get("/login").forms[0]["csrf_token"].value
    fields = {"csrf_token": token, "email": email, "password": PASSWORD, "next": next_path}
    return client.post("/login", fields, **kwargs)


@pytest.mark.parametrize(("next_path", "expected"), TARGETS)
def test_login_sends_the_next_page_percent_encoded(app, customer, next_path, expected):
    response = post_login(page_client(app), customer.email, next_path, status=303)
    assert_local_ascii(response.location, expected)
    assert "stolen" not in response.headers.get("Set-Cookie", "")


@pytest.mark.parametrize(("next_path", "expected"), TARGETS)
def test_the_login_form_keeps_next_as_a_local_ascii_path(app, customer, next_path, expected):
    """The next of the query string goes into the form, then into the redirect."""
    client = page_client(app)
    form = client.get("/login", {"next": next_path}).forms[0]
    assert_local_ascii(form["next"].value, expected)
    form["email"] = customer.email
    form["password"] = PASSWORD
    assert_local_ascii(form.submit(status=303).location, expected)


def register_with_next(client, email: str, next_path: str) -> None:
    form = client.get("/register", {"next": next_path}).forms[0]
    form["email"] = email
    form["password"] = NEW_PASSWORD
    form.submit(status=303)


@pytest.mark.parametrize(("next_path", "expected"), TARGETS[:4])
def test_confirming_an_email_sends_the_next_page_percent_encoded(
    app, dbsession, next_path, expected
):
    client = page_client(app)
    register_with_next(client, "new@example.com", next_path)
    link = verify_link(dbsession, "new@example.com")
    assert link.isascii()
    response = client.get(link).forms[0].submit(status=303)
    assert_local_ascii(response.location, expected)
    assert flashed(response) == "email_verified"


@pytest.mark.parametrize(("next_path", "expected"), TARGETS)
def test_a_posted_next_of_the_confirmation_is_percent_encoded(app, dbsession, next_path, expected):
    client = page_client(app)
    register_with_next(client, "new@example.com", "")
    page = client.get(verify_link(dbsession, "new@example.com"))
    fields = {
        "csrf_token": page.forms[0]["csrf_token"].value,
        "token": page.forms[0]["token"].value,
        "next": next_path,
    }
    response = client.post("/verify-email", fields, status=303)
    assert_local_ascii(response.location, expected)
    assert flashed(response) == "email_verified"


def test_a_page_that_needs_a_login_comes_back_percent_encoded(app, customer):
    client = page_client(app)
    response = client.get("/account?tab=%E3%80%80%22", status=303)
    assert_local_ascii(response.location)
    next_path = parse_qs(urlsplit(response.location).query)["next"][0]
    assert unquote(next_path) == '/account?tab=\u3000"'
    form = response.follow().forms[0]
    form["email"] = customer.email
    form["password"] = PASSWORD
    assert_local_ascii(form.submit(status=303).location, "/account?tab=%E3%80%80%22")


def test_over_http_a_non_ascii_next_is_a_303_not_a_plain_text_500(live_server, customer):
    """What waitress itself does with the Location header (WebTest has no such limit)."""
    with requests.Session() as browser:
        login_page = browser.get(f"{live_server}/login", timeout=10)
        token = re.search(r'name="csrf_token" value="([^"]+)"', login_page.text).group(1)
        response = browser.post(
            f"{live_server}/login",
            data={
                "csrf_token": token,
                "email": customer.email,
                "password": PASSWORD,
                "next": "/\u3000/x",
            },
            allow_redirects=False,
            timeout=10,
        )
    assert response.status_code == 303, response.text[:200]
    assert response.headers["Location"].endswith("/%E3%80%80/x")
    assert_local_ascii(response.headers["Location"].replace(live_server, "http://localhost"))
    assert "cmsshop_session" in response.headers["Set-Cookie"]
