"""Anonymous HTML pages from the answer cache (cmsshop.cache, ``add_cached_pages``).

Through the real app on the real database: a surely anonymous visitor (no session
cookie, or an anonymous one) gets the home page, the product list, a product page, the
docs list and an article from the cache, with no statement; the stored copy holds no
visitor's data (the buy form's CSRF token is filled in for each visitor, each token
valid for its own cookie only); a logged-in visitor, a flash notice, an unread query
parameter or a cookie of unknown form never reach the cache; every kind of write the
pages show (product, price, article, brand, legal page, logo) is visible on the next
request in the writing process, and within the check interval in another process.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest
from helpers.app import ROOT
from helpers.clients import logged_in, new_client, page_client
from helpers.docs import add_article
from helpers.store import add_currencies, add_product
from PIL import Image
from sqlalchemy import event, text

from cmsshop.security import ANONYMOUS_PREFIX, COOKIE_NAME
from cmsshop.web import FLASH_COOKIE

PAGES = ("/", "/products", "/products/site-guard", "/docs", "/docs/getting-started")


@pytest.fixture
def shop(dbsession):
    add_currencies(dbsession)
    add_product(dbsession, "site-guard", name="Site Guard", prices={"EUR": 4900})
    add_product(dbsession, "theme-pack", name="Theme Pack", prices={"EUR": 1900})
    add_article(dbsession, "getting-started", title="Getting started")


@pytest.fixture
def console(app, admin):
    return logged_in(app, admin)


def cache_of(app):
    return app.registry["cmsshop.answer_cache"]


def statements_during(app, call):
    seen = []

    def count(*args):
        seen.append(1)

    engine = app.registry["cmsshop.engine"]
    event.listen(engine, "before_cursor_execute", count)
    try:
        result = call()
    finally:
        event.remove(engine, "before_cursor_execute", count)
    return len(seen), result


def warm(app, url):
    """The process's first cacheable answer learns the content version; the next is kept."""
    page_client(app).get(url)
    page_client(app).get(url)


def csrf_of(page) -> str:
    return page.html.find("input", attrs={"name": "csrf_token"})["value"]


def anonymous_csrf(app, cookie: str) -> str:
    secret = app.registry.settings["cmsshop.secret"].encode()
    return hmac.new(secret, b"anonymous-csrf:" + cookie.encode(), hashlib.sha256).hexdigest()


def stored_bodies(app) -> list[bytes]:
    return [entry.body for entry in cache_of(app).entries.values()]


def test_anonymous_pages_come_from_the_cache_without_a_statement(app, shop):
    for url in PAGES:
        warm(app, url)
        live = page_client(app).get(url)
        count, hit = statements_during(app, lambda url=url: page_client(app).get(url))
        assert count == 0, url
        assert hit.content_type == "text/html"
        # No shared cache keeps a page personalised when served.
        assert hit.headers["Cache-Control"] == "private, no-cache"
        assert "Cookie" in hit.headers["Vary"]
        assert hit.headers["Content-Security-Policy"] == live.headers["Content-Security-Policy"]
        if url != "/products/site-guard":  # the buy form's token is each visitor's
            assert hit.body == live.body, url
            assert "Set-Cookie" not in hit.headers  # no form: no cookie, as live
    assert cache_of(app).hits >= len(PAGES)


def test_the_stored_page_holds_no_csrf_token_and_each_visitor_gets_their_own(app, shop):
    warm(app, "/products/site-guard")
    first, second = page_client(app), page_client(app)
    count, _ = statements_during(
        app, lambda: (first.get("/products/site-guard"), second.get("/products/site-guard"))
    )
    assert count == 0  # both from the cache
    tokens = []
    for visitor in (first, second):
        page = visitor.get("/products/site-guard")  # the cookie set by the first answer
        cookie = visitor.cookies[COOKIE_NAME]
        assert cookie.startswith(ANONYMOUS_PREFIX)
        token = csrf_of(page)
        assert token == anonymous_csrf(app, cookie)
        tokens.append(token)
    assert tokens[0] != tokens[1]
    for body in stored_bodies(app):
        assert not any(token.encode() in body for token in tokens)
    (product_body,) = [b for b in stored_bodies(app) if b"Buy Site Guard" in b]
    assert b'name="csrf_token" value="csrf-placeholder-' in product_body
    # Each token is good for its own cookie only.
    form = {"product": "site-guard", "currency": "EUR", "quantity": "1"}
    first.post("/cart/add", {**form, "csrf_token": tokens[1]}, status=403)
    first.post("/cart/add", {**form, "csrf_token": tokens[0]}, status=303)
    second.post("/cart/add", {**form, "csrf_token": tokens[1]}, status=303)


def test_a_visitor_with_an_anonymous_cookie_keeps_it(app, shop):
    visitor = page_client(app)
    visitor.get("/products/site-guard")
    cookie = visitor.cookies[COOKIE_NAME]
    warm(app, "/products/site-guard")
    count, page = statements_during(app, lambda: visitor.get("/products/site-guard"))
    assert count == 0
    assert "Set-Cookie" not in page.headers
    assert csrf_of(page) == anonymous_csrf(app, cookie)


def test_a_logged_in_visitor_never_gets_a_stored_page(app, shop, customer, admin):
    for url in PAGES:
        warm(app, url)
    stored = stored_bodies(app)
    alice = logged_in(app, customer)
    root = logged_in(app, admin)
    for client in (alice, root):
        # A session's token never has the anonymous form (token_urlsafe has no ".").
        assert "." not in client.cookies[COOKIE_NAME]
    for url in PAGES:
        for client in (alice, root):
            count, page = statements_during(app, lambda url=url, client=client: client.get(url))
            assert count > 0, url  # rendered for them, not replayed
            assert "Log out" in page.text and "Log in" not in page.text
            assert page.headers["Cache-Control"] == "private, no-store"
    # Their pages were never stored, and an anonymous visitor sees none of them.
    assert sorted(stored_bodies(app)) == sorted(stored)
    page = page_client(app).get("/products/site-guard")
    assert "Log out" not in page.text and customer.email not in page.text
    sessions = {csrf_of(client.get("/products/site-guard")) for client in (alice, root)}
    assert csrf_of(page) not in sessions
    assert not any(token.encode() in body for token in sessions for body in stored_bodies(app))


def test_the_live_page_a_logged_in_visitor_gets_first_is_not_stored(app, shop, customer):
    alice = logged_in(app, customer)
    for _ in range(3):
        alice.get("/products/site-guard")
    assert not cache_of(app).entries
    page = page_client(app).get("/products/site-guard")
    assert "Log out" not in page.text


def test_a_flash_notice_is_never_stored_nor_hidden(app, shop):
    warm(app, "/")
    visitor = page_client(app)
    visitor.set_cookie(FLASH_COOKIE, "brand_saved")
    count, page = statements_during(app, lambda: visitor.get("/"))
    assert count > 0  # live: the cache is not even looked up
    assert "The brand is saved." in page.text
    assert page.headers["Cache-Control"] == "private, no-store"
    assert not any(b"The brand is saved." in body for body in stored_bodies(app))
    cache_of(app).clear()
    # Cold, the request with the notice refreshes nothing either.
    visitor.set_cookie(FLASH_COOKIE, "brand_saved")
    visitor.get("/")
    assert not cache_of(app).entries
    assert "The brand is saved." not in page_client(app).get("/").text


@pytest.mark.parametrize(
    "cookie",
    [
        "A" * 43,  # a token of a session's form (here, of none): not sure, so live
        "anon.",  # too short to be a token
        "",
    ],
)
def test_a_cookie_of_another_form_gets_the_live_page(app, shop, cookie):
    warm(app, "/products")
    visitor = page_client(app)
    visitor.set_cookie(COOKIE_NAME, cookie)
    count, page = statements_during(app, lambda: visitor.get("/products"))
    assert count > 0
    assert "Site Guard" in page.text


def test_a_parameter_the_page_does_not_read_is_not_cached(app, shop):
    warm(app, "/products")
    entries = len(cache_of(app).entries)
    for _ in range(2):
        count, page = statements_during(
            app, lambda: page_client(app).get("/products?utm_source=%22evil")
        )
        assert count > 0
    assert len(cache_of(app).entries) == entries
    assert not any(b"utm_source" in body for body in stored_bodies(app))
    # The parameters it reads choose the entry.
    warm(app, "/products?q=theme")
    hit = page_client(app).get("/products?q=theme")
    assert "Theme Pack" in hit.text and "Site Guard" not in hit.text


def test_a_page_asked_for_another_host_is_kept_apart(app, shop):
    warm(app, "/products")
    other = page_client(app, HTTP_HOST="evil.example")
    page = other.get("/products")
    assert "evil.example" in page.text  # its static links name the host asked for
    assert "evil.example" not in page_client(app).get("/products").text


# --- invalidation -------------------------------------------------------------------------


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 20), (10, 90, 200)).save(out, "PNG")
    return out.getvalue()


def form_to(page, action):
    (form,) = [form for form in page.forms.values() if form.action == action]
    return form


def test_every_kind_of_write_is_visible_on_the_next_request(make_app, shop, admin):
    # A process that would not read the version for an hour: what empties its cache is
    # its own sessions' writes (the tables each kind of write touches), nothing else.
    app = make_app(**{"cmsshop.answer_cache_check_interval": "3600"})
    console = logged_in(app, admin)
    admin_app = new_client(app)
    admin_app.login(admin.email)
    for url in PAGES:
        warm(app, url)
    assert len(cache_of(app).entries) == len(PAGES)

    def shown(url):
        return page_client(app).get(url).text

    admin_app.patch_json("/api/admin/products/site-guard", {"name": "Site Guard Pro"})
    assert "Site Guard Pro" in shown("/products/site-guard")
    assert "Site Guard Pro" in shown("/products")

    prices = [{"currency": "EUR", "amount": 5900}]
    admin_app.patch_json("/api/admin/products/site-guard", {"prices": prices})
    assert "59.00" in shown("/products/site-guard")

    admin_app.patch_json("/api/admin/articles/getting-started", {"title": "First steps"})
    assert "First steps" in shown("/docs/getting-started")
    assert "First steps" in shown("/docs")

    admin_app.put_json("/api/admin/settings/brand", {"shopName": "Pixel Works"})
    for url in PAGES:
        assert "Pixel Works" in shown(url), url

    admin_app.post_json("/api/admin/legal/terms", {"title": "Terms of sale", "body": "Terms."})
    assert 'href="/legal/terms"' in shown("/docs")

    assert "brand-logo" not in shown("/")
    form = form_to(console.get("/admin/brand"), "/admin/brand/logo")
    form["logo"] = ("logo.png", png(), "image/png")
    form.submit(status=303)
    assert "brand-logo" in shown("/")


def test_writes_to_what_the_pages_read_bump_the_version(engine, shop, dbsession):
    """Migration 0028's triggers: the brand's settings, the logo, the legal pages and the
    media files (the catalogue's are tested with the JSON answers)."""

    def version(conn):
        return conn.execute(text("SELECT version FROM content_versions")).scalar_one()

    writes = (
        "INSERT INTO shop_settings (key, value, updated_at) "
        "VALUES ('brand.headline', '\"Hi\"', CURRENT_TIMESTAMP)",
        "UPDATE shop_settings SET value = '\"Hello\"' WHERE key = 'brand.headline'",
        "DELETE FROM shop_settings",
        "INSERT INTO shop_files (name, content_type, data, sha256, updated_at) "
        "VALUES ('logo', 'image/png', :data, 'x', CURRENT_TIMESTAMP)",
        "UPDATE shop_files SET sha256 = 'y'",
        "DELETE FROM shop_files",
        "INSERT INTO legal_documents (kind, version, title, body, body_html, published_at) "
        "VALUES ('terms', 1, 'T', '', '', CURRENT_TIMESTAMP)",
        "UPDATE legal_documents SET title = 'Terms'",
        "DELETE FROM legal_documents",
        "INSERT INTO media_files (key, content_type, data, width, height, created_at) "
        "VALUES ('k', 'image/png', :data, 1, 1, CURRENT_TIMESTAMP)",
        "UPDATE media_files SET width = 2",
        "DELETE FROM media_files",
    )
    with engine.begin() as conn:
        for sql in writes:
            before = version(conn)
            conn.execute(text(sql), {"data": b"x"} if ":data" in sql else {})
            assert version(conn) > before, sql


# --- another process ------------------------------------------------------------------------


@pytest.fixture
def other_process(settings):
    """A second app process on the same database (as behind a load balancer), checking
    the content version every 0.1 s."""
    env = {
        **os.environ,
        "CMSSHOP_TEST_APP_SETTINGS": json.dumps(
            {**settings, "cmsshop.answer_cache_check_interval": "0.1"}
        ),
        "PYTHONPATH": ROOT,
    }
    script = os.path.join(ROOT, "tests", "fakes", "app_server.py")
    process = subprocess.Popen(
        [sys.executable, script], env=env, stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        port = process.stdout.readline().strip()
        assert port.isdigit(), f"server did not start (exit {process.poll()})"
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read().decode()


def eventually(url: str, wanted: str) -> str:
    """The page once it shows ``wanted`` (the other process checks every 0.1 s); fails
    after 10 s, which only a missed invalidation takes."""
    deadline = time.monotonic() + 10
    while True:
        page = fetch(url)
        if wanted in page or time.monotonic() > deadline:
            return page
        time.sleep(0.05)


def test_another_process_sees_each_kind_of_write_within_the_check_interval(
    other_process, shop, admin_app, console
):
    for url in PAGES:
        for _ in range(3):
            fetch(other_process + url)  # stored there
    assert "Site Guard" in fetch(other_process + "/products/site-guard")

    admin_app.patch_json("/api/admin/products/site-guard", {"name": "Site Guard Pro"})
    assert "Site Guard Pro" in eventually(other_process + "/products", "Site Guard Pro")
    prices = [{"currency": "EUR", "amount": 5900}]
    admin_app.patch_json("/api/admin/products/site-guard", {"prices": prices})
    assert "59.00" in eventually(other_process + "/products/site-guard", "59.00")
    admin_app.patch_json("/api/admin/articles/getting-started", {"title": "First steps"})
    assert "First steps" in eventually(other_process + "/docs/getting-started", "First steps")
    admin_app.put_json("/api/admin/settings/brand", {"shopName": "Pixel Works"})
    assert "Pixel Works" in eventually(other_process + "/", "Pixel Works")
    admin_app.post_json("/api/admin/legal/terms", {"title": "Terms of sale", "body": "Terms."})
    assert "/legal/terms" in eventually(other_process + "/docs", "/legal/terms")
    form = form_to(console.get("/admin/brand"), "/admin/brand/logo")
    form["logo"] = ("logo.png", png(), "image/png")
    form.submit(status=303)
    assert "brand-logo" in eventually(other_process + "/products", "brand-logo")
