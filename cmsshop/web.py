"""The web pages' stack: Jinja2 templates, static files, security headers, page helpers.

Pages are server-rendered with Jinja2 through pyramid_jinja2, as PyPI's warehouse does:
templates under ``cmsshop/templates/<feature>/`` (autoescaped, undefined names are
errors), page views beside the JSON views of the same feature, registered by the same
module. Every page works without JavaScript; forms carry Pyramid's CSRF token in the
``csrf_token`` field. Everything outside ``/api`` is a page: errors there render as a
friendly HTML page with the support code (``cmsshop.views.errors``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import os
from urllib.parse import urlencode

from pyramid.csrf import get_csrf_token
from pyramid.events import BeforeRender
from pyramid.static import QueryStringCacheBuster

from cmsshop.security import answer_depends_on_session
from cmsshop.services.store.currencies import format_amount
from cmsshop.services.storefront.seo import is_disallowed
from cmsshop.settings import as_list, declare

STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
# A year: a changed file gets a new URL (its content hash), so a cached copy never goes
# stale.
STATIC_MAX_AGE = 365 * 24 * 3600

SETTINGS = {
    # Where the checkout form may send the buyer: the providers' hosted payment pages
    # (CSP form-action applies to the redirect after a form is submitted, too).
    "cmsshop.web.payment_origins": (
        as_list,
        # Stripe's checkout, and its billing portal where a subscriber replaces the card.
        [
            "https://checkout.stripe.com",
            "https://billing.stripe.com",
            "https://www.paypal.com",
            "https://www.sandbox.paypal.com",
        ],
        "CMSSHOP_WEB_PAYMENT_ORIGINS",
    ),
}


def is_api_path(path: str) -> bool:
    return path == "/api" or path.startswith("/api/")


class ContentHashCacheBuster(QueryStringCacheBuster):
    """``/static/site.css?x=<hash of the file>``: the URL changes when the file does."""

    def __init__(self, directory: str):
        super().__init__(param="v")
        self._directory = directory
        self._tokens: dict[str, str] = {}

    def tokenize(self, request, subpath, kw) -> str:
        token = self._tokens.get(subpath)
        if token is None:
            path = os.path.join(self._directory, subpath)
            try:
                with open(path, "rb") as handle:
                    token = hashlib.sha256(handle.read()).hexdigest()[:12]
            except OSError:
                token = "missing"
            self._tokens[subpath] = token
        return token


def content_security_policy(settings) -> str:
    """No inline script or style anywhere: every script and stylesheet is a file of ours."""
    form_action = " ".join(["'self'", *settings["cmsshop.web.payment_origins"]])
    return "; ".join(
        [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            "font-src 'self'",
            "connect-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
            f"form-action {form_action}",
        ]
    )


def security_headers_tween_factory(handler, registry):
    """``nosniff`` and the caching rule on every answer; the usual security headers on
    every page (answers outside /api)."""
    page_headers = {
        "Content-Security-Policy": content_security_policy(registry.settings),
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "same-origin",
        "Cross-Origin-Opener-Policy": "same-origin",
        "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=()",
    }

    lowered = {name.lower(): (name, value) for name, value in page_headers.items()}

    def security_headers_tween(request):
        response = handler(request)
        headerlist = response.headerlist
        # One pass over the answer's headers (webob's setdefault scans them all per call:
        # a cached page's whole cost is a few of those).
        present = {name.lower() for name, _ in headerlist}
        # A browser must never guess a type: a JSON answer echoing text is not a page.
        if "x-content-type-options" in present:
            response.headers["X-Content-Type-Options"] = "nosniff"
        else:
            headerlist.append(("X-Content-Type-Options", "nosniff"))
        path = request.environ.get("PATH_INFO", "")
        is_page = not is_api_path(path)
        # The paths robots.txt keeps crawlers from also say so in every answer: a crawler
        # that reached one by a link (robots.txt forbids crawling, not indexing) or
        # ignores robots.txt leaves it out of its index.
        if is_disallowed(path):
            headerlist.append(("X-Robots-Tag", "noindex"))
        if is_page:
            headerlist.extend(pair for key, pair in lowered.items() if key not in present)
        if answer_depends_on_session(request, anonymous_too=not is_page):
            # The caller's own answer (the user, a CSRF token, an account's data, or a
            # 401/403 saying there is none): no cache keeps it, not even the browser's.
            response.headers["Cache-Control"] = "private, no-store"
        elif is_page and "cache-control" not in present and response.content_type == "text/html":
            # An anonymous page still holds the visitor's CSRF token: never stored by a
            # shared cache.
            headerlist.append(("Cache-Control", "private, no-cache"))
        return response

    return security_headers_tween


# --- what every template sees -------------------------------------------------------------


def format_money(amount: int | None, currency) -> str:
    """``€49.00`` for a Currency (or anything with symbol and decimals)."""
    if amount is None:
        return ""
    return format_amount(amount, currency.symbol, currency.decimals)


def format_date(value: dt.datetime | None, with_time: bool = False) -> str:
    if value is None:
        return ""
    value = value.astimezone(dt.UTC)
    return value.strftime("%Y-%m-%d %H:%M UTC") if with_time else value.strftime("%Y-%m-%d")


def page_url(request, **changes) -> str:
    """This page's URL with some query parameters changed (None removes one)."""
    params = {key: value for key, value in request.GET.items()}
    for key, value in changes.items():
        if value is None:
            params.pop(key, None)
        else:
            params[key] = str(value)
    query = urlencode(params)
    return request.path + (f"?{query}" if query else "")


NOTICES_KEY = "cmsshop.web.notices"
# The one-time notice of a post/redirect/get travels in this cookie, not in the URL: a
# URL is bookmarked, shared and reloaded, and would show "saved" again every time.
FLASH_COOKIE = "cmsshop_notice"
# Long enough for the browser to follow the redirect, short enough that a notice never
# turns up on a page opened much later.
FLASH_MAX_AGE = 60
NOTICE_LEVELS = ("success", "info", "error")
# Sent by a script that follows a redirect itself before loading the page (upload.js).
KEEP_NOTICE_HEADER = "X-Keep-Notice"


@dataclasses.dataclass(frozen=True)
class Notice:
    """A fixed message and how it reads: ``success`` (green), ``info`` (neutral) or
    ``error`` (red, announced at once with role=alert)."""

    message: str
    level: str = "success"
    key: str = ""  # set when registered: the page names it, so a test can wait for it

    def __post_init__(self):
        if self.level not in NOTICE_LEVELS:
            raise ValueError(f"notice level {self.level!r} is not one of {NOTICE_LEVELS}")

    @property
    def role(self) -> str:
        return "alert" if self.level == "error" else "status"

    def __str__(self) -> str:
        return self.message


def info(message: str) -> Notice:
    return Notice(message, "info")


def error(message: str) -> Notice:
    return Notice(message, "error")


def add_page_notices(config, notices: dict[str, str | Notice]) -> None:
    """``config.add_page_notices({"key": "Message.", "other": error("Message.")})``: the
    fixed messages a page shows once after a post/redirect/get (never text taken from
    the request). A plain string is a success."""
    registered = config.registry.setdefault(NOTICES_KEY, {})
    for key, value in notices.items():
        notice = value if isinstance(value, Notice) else Notice(value)
        registered[key] = dataclasses.replace(notice, key=key)


def is_notice(registry, key: str) -> bool:
    return key in registry.get(NOTICES_KEY, {})


def set_flash(request, key: str) -> None:
    """Keep ``key`` (a registered notice) for the next page this browser renders."""
    if not is_notice(request.registry, key):
        raise ValueError(f"{key!r} is not a registered page notice")
    settings = request.registry.settings

    def callback(request, response):
        response.set_cookie(
            FLASH_COOKIE,
            key,
            max_age=FLASH_MAX_AGE,
            path="/",
            httponly=True,
            samesite="Lax",
            secure=settings["cmsshop.session_cookie_secure"],
        )

    request.add_response_callback(callback)


def current_notice(request) -> Notice | None:
    """The flash notice, taken once: the answer clears the cookie and is never stored,
    so a reload or the back button does not show it again."""
    key = request.cookies.get(FLASH_COOKIE)
    if not key:
        return None
    if request.headers.get(KEEP_NOTICE_HEADER):
        # A script's request (upload.js follows the 303 itself, then loads the page):
        # the page the browser shows next takes the notice, not this one.
        return None
    if FLASH_COOKIE in request.environ:  # a second template of the same answer
        return request.environ[FLASH_COOKIE]

    def callback(request, response):
        # Unless this very answer set a new one (a page that renders and flashes).
        if FLASH_COOKIE not in _cookies_set(response):
            response.delete_cookie(FLASH_COOKIE, path="/")
        response.headers["Cache-Control"] = "private, no-store"

    request.add_response_callback(callback)
    # An unknown key (an old or forged cookie) is cleared and shows nothing.
    notice = request.registry.get(NOTICES_KEY, {}).get(key)
    request.environ[FLASH_COOKIE] = notice
    return notice


def _cookies_set(response) -> set[str]:
    return {value.split("=", 1)[0].strip() for value in response.headers.getall("Set-Cookie")}


def add_template_globals(event) -> None:
    request = event.get("request")
    if request is None or not str(event.get("renderer_name", "")).endswith(".html"):
        return  # JSON answers use none of them (and must not pay for request.user)
    settings = request.registry.settings
    event.setdefault("site_name", settings.get("cmsshop.site_name") or "cmsshop")
    event.setdefault("enabled_modules", settings["cmsshop.modules"])
    # A function, not a value: the anonymous token sets a cookie, needed by forms only.
    event.setdefault("csrf_token", lambda: get_csrf_token(request))
    event.setdefault("static_url", lambda path: request.static_url(f"cmsshop:static/{path}"))
    event.setdefault("page_url", lambda **changes: page_url(request, **changes))
    event.setdefault("user", request.user)
    if "notice" not in event:
        event["notice"] = current_notice(request)
    event.setdefault("errors", {})
    event.setdefault("form", {})


def includeme(config) -> None:
    settings = config.get_settings()
    declare(settings, SETTINGS)
    settings.setdefault("jinja2.undefined", "strict")
    settings.setdefault("jinja2.trim_blocks", "true")
    settings.setdefault("jinja2.lstrip_blocks", "true")
    settings.setdefault(
        "jinja2.filters",
        "money = cmsshop.web.format_money\ndate = cmsshop.web.format_date\n"
        # File sizes in decimal units (format_filesize says why).
        "filesize = cmsshop.util.format_filesize\n"
        # An order's provider as the seller knows it ("Card payments (Stripe)"), never
        # the plugin name; the admin order pages are always on, so is this name table.
        "provider = cmsshop.services.payments.connect.seller_name\n"
        # An order's tax as a line names it ("VAT 19 %"), from Order.tax_details.
        "tax_label = cmsshop.services.tax.checkout.tax_label",
    )
    config.include("pyramid_jinja2")
    config.add_jinja2_renderer(".html")
    config.add_jinja2_search_path("cmsshop:templates", name=".html")
    config.add_subscriber(add_template_globals, BeforeRender)
    config.add_directive("add_page_notices", add_page_notices)
    config.add_static_view("static", "cmsshop:static", cache_max_age=STATIC_MAX_AGE)
    config.add_cache_buster("cmsshop:static/", ContentHashCacheBuster(STATIC_DIR))
    config.add_tween("cmsshop.web.security_headers_tween_factory")
