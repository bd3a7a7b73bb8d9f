"""One-time notices after a post/redirect/get: kept in a short-lived cookie, never in the
URL, shown once by the next page, styled and announced as what they say."""

from __future__ import annotations

import pathlib
import re

import pytest
from helpers.clients import logged_in, page_client
from helpers.notices import flashed
from pyramid import testing

from cmsshop.views.shared.forms import see_other
from cmsshop.web import (
    FLASH_COOKIE,
    KEEP_NOTICE_HEADER,
    NOTICES_KEY,
    Notice,
    add_page_notices,
    error,
)


def set_cookie_headers(response, name: str) -> list[str]:
    return [h for h in response.headers.getall("Set-Cookie") if h.startswith(f"{name}=")]


def log_out(client):
    form = next(f for f in client.get("/account").forms.values() if f.action == "/logout")
    return form.submit(status=303)


def notice_of(page):
    return page.html.find(id="page-notice")


def test_a_notice_travels_in_a_short_lived_http_only_cookie_not_the_url(app, customer):
    client = logged_in(app, customer)
    response = log_out(client)
    assert response.location == "http://localhost/"
    assert "notice" not in response.location
    assert flashed(response) == "logged_out"
    [header] = set_cookie_headers(response, FLASH_COOKIE)
    attributes = header.lower()
    assert "httponly" in attributes and "samesite=lax" in attributes and "path=/" in attributes
    assert "max-age=60" in attributes


def test_the_next_page_shows_it_once_and_a_reload_does_not(app, customer):
    client = logged_in(app, customer)
    home = log_out(client).follow()
    notice = notice_of(home)
    assert notice.get_text(strip=True) == "You are logged out."
    assert notice["role"] == "status"
    assert "notice-success" in notice["class"]
    # The page that took the notice is nobody's to keep, and clears the cookie.
    assert home.headers["Cache-Control"] == "private, no-store"
    [cleared] = set_cookie_headers(home, FLASH_COOKIE)
    assert "max-age=0" in cleared.lower()
    assert FLASH_COOKIE not in client.cookies
    reloaded = client.get("/")
    assert notice_of(reloaded) is None
    assert not set_cookie_headers(reloaded, FLASH_COOKIE)


def test_an_error_notice_is_red_and_an_alert(app):
    client = page_client(app)
    client.set_cookie(FLASH_COOKIE, "event_cannot_reprocess")
    notice = notice_of(client.get("/"))
    assert notice["role"] == "alert"
    assert "notice-error" in notice["class"] and "notice-success" not in notice["class"]
    assert notice.get_text(strip=True).startswith("Not reprocessed")


def test_an_info_notice_is_neutral_and_a_status(app):
    client = page_client(app)
    client.set_cookie(FLASH_COOKIE, "mail_pending")
    notice = notice_of(client.get("/"))
    assert notice["role"] == "status"
    assert "notice-info" in notice["class"]


def test_a_forged_cookie_shows_nothing_and_is_cleared(app):
    client = page_client(app)
    client.set_cookie(FLASH_COOKIE, "<b>you-won</b>")
    page = client.get("/")
    assert notice_of(page) is None
    assert "you-won" not in page.text
    assert "max-age=0" in set_cookie_headers(page, FLASH_COOKIE)[0].lower()


def test_a_notice_in_the_query_string_is_ignored(app):
    page = page_client(app).get("/", {"notice": "logged_out"})
    assert notice_of(page) is None
    assert "You are logged out." not in page.text


def test_a_json_answer_leaves_the_notice_for_the_page(app):
    client = page_client(app)
    client.set_cookie(FLASH_COOKIE, "logged_out")
    answer = client.get("/api/health")
    assert not set_cookie_headers(answer, FLASH_COOKIE)
    assert notice_of(client.get("/")).get_text(strip=True) == "You are logged out."


def test_a_script_following_the_redirect_leaves_the_notice_for_the_page(app):
    """upload.js follows the 303 itself, then loads the page: that page shows it."""
    client = page_client(app)
    client.set_cookie(FLASH_COOKIE, "release_uploaded")
    followed = client.get("/", headers={KEEP_NOTICE_HEADER: "1"})
    assert notice_of(followed) is None and not set_cookie_headers(followed, FLASH_COOKIE)
    assert notice_of(client.get("/"))["data-notice"] == "release_uploaded"


def test_a_redirect_keeps_its_fragment_and_query_without_a_notice(app):
    request = testing.DummyRequest()
    request.registry = app.registry
    response = see_other(request, "/admin/orders/ORD-1?tab=x#notes", notice="order_note_added")
    assert response.location == "/admin/orders/ORD-1?tab=x#notes"


def test_only_registered_notices_can_be_flashed(app):
    request = testing.DummyRequest()
    request.registry = app.registry
    with pytest.raises(ValueError, match="not a registered page notice"):
        see_other(request, "/", notice="whatever the request said")


def test_each_notice_has_a_known_level():
    config = testing.setUp()
    try:
        add_page_notices(config, {"saved": "Saved.", "broken": error("It broke.")})
        registered = config.registry[NOTICES_KEY]
        assert registered["saved"] == Notice("Saved.", "success", "saved")
        assert registered["broken"].level == "error" and registered["broken"].role == "alert"
        with pytest.raises(ValueError):
            Notice("Odd.", "green")
    finally:
        testing.tearDown()


def test_every_notice_a_page_flashes_is_registered(app):
    """see_other refuses an unregistered key (a 500): each literal key in the views is
    one the modules registered (all modules are on in the test app)."""
    registered = app.registry[NOTICES_KEY]
    views = pathlib.Path(__file__).resolve().parents[2] / "cmsshop" / "views"
    used = {
        (path.name, key)
        for path in views.rglob("*.py")
        for key in re.findall(r'notice="([a-z_]+)"', path.read_text())
    }
    assert used, "the scan found the views' notices"
    assert {(name, key) for name, key in used if key not in registered} == set()
