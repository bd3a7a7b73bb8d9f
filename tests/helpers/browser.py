"""Real-browser fixtures: Debian's Chromium driven by Playwright, axe-core, screenshots.

A plugin of tests/conftest.py. The browser is the system Chromium
(``apt-get install chromium chromium-driver``; Playwright's own browser download is not
used): ``CMSSHOP_CHROMIUM`` names another binary. Without one the browser tests skip and
say why; ``.ci/run`` installs it first, so CI always runs them.

``check_page(page, name)`` is the check every page of a journey passes: axe-core finds
no violation at all (minor ones included), nothing scrolls sideways on a 375 px phone,
and screenshots at desktop and phone width are saved under ``var/screenshots/`` (or
``CMSSHOP_SCREENSHOTS``), which is not committed.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import threading

import pytest

from cmsshop.server import app_limits, create_server
from helpers.app import PASSWORD, ROOT, serve

DESKTOP = {"width": 1280, "height": 800}
# The narrowest phone the pages are made for (an iPhone SE or mini).
PHONE = {"width": 375, "height": 812}
SCREENSHOTS = os.environ.get("CMSSHOP_SCREENSHOTS") or os.path.join(ROOT, "var", "screenshots")


def chromium_path() -> str | None:
    for candidate in (
        os.environ.get("CMSSHOP_CHROMIUM"),
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture(scope="session")
def browser():
    path = chromium_path()
    if path is None:
        pytest.skip(
            "no Chromium to drive: install Debian's packages (apt-get install chromium "
            "chromium-driver; .ci/run does) or set CMSSHOP_CHROMIUM to a Chromium binary"
        )
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    playwright = sync_api.sync_playwright().start()
    try:
        browser = playwright.chromium.launch(
            executable_path=path, args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
    except Exception as exc:  # noqa: BLE001 - a broken install is a reason to skip, said
        playwright.stop()
        pytest.skip(f"Chromium at {path} did not start: {exc}")
    yield browser
    browser.close()
    playwright.stop()


@pytest.fixture
def site(app):
    """The test app served over HTTP on loopback: the URL a browser opens."""
    with serve(app) as url:
        yield url


@contextlib.contextmanager
def serve_on(sock: socket.socket, app):
    """Serve ``app`` with waitress on an already bound loopback socket."""
    server = create_server(
        app, *app_limits(app), sockets=[sock], threads=8, clear_untrusted_proxy_headers=True
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.close()
        thread.join(timeout=5)


@contextlib.contextmanager
def host_shop(make_app, settings: dict, fake_stripe):
    """The app on loopback with the fake Stripe API and its hosted checkout page.

    The provider's return URLs are built from ``cmsshop.base_url``, so the app must know
    its own address before it is built: the socket is bound first (port 0, no race),
    the app built with that URL, then served on that very socket.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = make_app(
        **settings,
        **{"cmsshop.base_url": url, "cmsshop.web.payment_origins": fake_stripe.url},
    )
    fake_stripe.hosted = True
    fake_stripe.webhook_url = f"{url}/api/webhooks/cardprovider"
    with serve_on(sock, app):
        yield url


@pytest.fixture
def hosted_shop(make_app, card_settings, fake_stripe, catalogue):
    """The shop with the card provider connected by the server's settings."""
    with host_shop(make_app, card_settings, fake_stripe) as url:
        yield url


@pytest.fixture
def unconnected_shop(make_app, card_settings, fake_stripe, catalogue):
    """The shop before the seller connected the card provider: the API address is set
    (the fake's), the secret key and the webhook signing secrets are not."""
    settings = {
        name: value
        for name, value in card_settings.items()
        if name not in ("cmsshop.cardprovider.api_key", "cmsshop.cardprovider.webhook_secrets")
    }
    with host_shop(make_app, settings, fake_stripe) as url:
        yield url


@pytest.fixture
def new_page(browser):
    """``new_page(base_url)``: a fresh browser context (own cookies) at desktop width."""
    contexts = []

    def open_page(base_url: str):
        context = browser.new_context(base_url=base_url, viewport=DESKTOP)
        context.set_default_timeout(15_000)
        contexts.append(context)
        return context.new_page()

    yield open_page
    for context in contexts:
        context.close()


@pytest.fixture
def page(new_page, site):
    return new_page(site)


def axe_violations(page) -> list[str]:
    """Every axe-core violation on the page as it is now, whatever its impact."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    found = []
    for violation in results.response["violations"]:
        targets = [", ".join(node["target"]) for node in violation["nodes"]][:3]
        found.append(f"{violation['id']} ({violation['impact']}): {targets}")
    return found


# What sticks out: the innermost elements reaching past the viewport (for the message).
WIDEST_ELEMENTS = """() => {
  const limit = document.documentElement.clientWidth;
  const past = (e) => e.getBoundingClientRect().right > limit + 1;
  const wide = [...document.querySelectorAll("body *")].filter(
    (e) => past(e) && ![...e.children].some(past));
  return wide.slice(0, 3).map((e) => e.tagName.toLowerCase() +
    (e.id ? "#" + e.id : "") + (e.className ? "." + e.className : "") +
    " (" + Math.round(e.getBoundingClientRect().right) + "px)").join(", ");
}"""


def assert_fits_phone(page, name: str) -> None:
    """Nothing overflows sideways at phone width (a table or a key scrolls in its own
    box), checked with the page at ``PHONE`` as it is now (the caller sets the size)."""
    overflow = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 1, (
        f"{name}: the page is {overflow}px wider than a {PHONE['width']} px phone; widest: "
        + page.evaluate(WIDEST_ELEMENTS)
    )


@contextlib.contextmanager
def on_phone(page):
    """The page at ``PHONE`` width for the block, back at desktop width after it."""
    page.set_viewport_size(PHONE)
    try:
        yield page
    finally:
        page.set_viewport_size(DESKTOP)


def save_screenshots(page, name: str) -> None:
    os.makedirs(SCREENSHOTS, exist_ok=True)
    slug = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    page.screenshot(path=os.path.join(SCREENSHOTS, f"{slug}-desktop.png"), full_page=True)
    with on_phone(page):
        page.screenshot(path=os.path.join(SCREENSHOTS, f"{slug}-phone.png"), full_page=True)
        assert_fits_phone(page, name)


def check_page(page, name: str) -> None:
    """Every page of a journey: one <h1>, a <title>, no axe-core violation of any impact,
    no sideways scrolling on a 375 px phone; screenshots saved at both widths.

    A click that navigates returns once the new document is committed, not loaded: the
    checks wait for its load event first, or they could read a half-parsed page (an empty
    <title>) on a busy machine."""
    page.wait_for_load_state("load")
    assert page.title().strip(), f"{name}: the page has no <title>"
    assert page.locator("h1").count() == 1, f"{name}: a page has exactly one <h1>"
    assert axe_violations(page) == [], f"{name}: accessibility violations"
    save_screenshots(page, name)


def log_in(
    page, email: str, next_path: str | None = None, *, password: str = PASSWORD, lands_on=None
) -> None:
    """Log in through the /login form (on to ``next_path``), then wait until the browser
    is at ``lands_on`` (by default ``next_path``; no wait when neither is given)."""
    page.goto(f"/login?next={next_path}" if next_path else "/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    if lands_on or next_path:
        page.wait_for_url(f"**{lands_on or next_path}")
