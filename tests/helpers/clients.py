"""WebTest clients: one for the JSON API (sends its CSRF header), one for pages (a
browser-like client whose forms carry their own token), logged in or not."""

from __future__ import annotations

import webtest

from helpers.app import PASSWORD

LOOPBACK = "127.0.0.1"


class ApiClient(webtest.TestApp):
    """A WebTest client that sends its CSRF token on unsafe methods.

    The token is added only when the request does not set X-CSRF-Token itself, so a
    test can still send a missing, wrong or stale one.
    """

    csrf_token: str | None = None

    def do_request(self, req, status=None, expect_errors=None):
        if (
            self.csrf_token
            and req.method not in ("GET", "HEAD", "OPTIONS")
            and "X-CSRF-Token" not in req.headers
        ):
            req.headers["X-CSRF-Token"] = self.csrf_token
        return super().do_request(req, status=status, expect_errors=expect_errors)

    def refresh_csrf(self) -> str:
        self.csrf_token = self.get("/api/auth/session").json["csrfToken"]
        return self.csrf_token

    def login(self, email: str, password: str = PASSWORD):
        self.refresh_csrf()
        response = self.post_json("/api/auth/login", {"email": email, "password": password})
        self.csrf_token = response.json["csrfToken"]
        return response


def new_client(app) -> ApiClient:
    return ApiClient(app, extra_environ={"REMOTE_ADDR": LOOPBACK})


def client_from(app, ip: str = LOOPBACK) -> ApiClient:
    """An anonymous API client from address ``ip``, with a CSRF token."""
    client = new_client(app)
    client.extra_environ["REMOTE_ADDR"] = ip
    client.refresh_csrf()
    return client


def page_client(app, **environ) -> webtest.TestApp:
    """A browser-like client: no CSRF header, forms carry their own token."""
    return webtest.TestApp(app, extra_environ={"REMOTE_ADDR": LOOPBACK, **environ})


def logged_in(app, user, **environ) -> webtest.TestApp:
    """A page client logged in through the /login form; ``user`` is a User or an email."""
    client = page_client(app, **environ)
    form = client.get("/login").forms[0]
    form["email"] = getattr(user, "email", user)
    form["password"] = PASSWORD
    form.submit(status=303)
    return client


def call_with_body(client, method: str, url: str, body: dict, **kwargs):
    """``method`` on ``url``: POST and PATCH send ``body`` as JSON, the rest send none."""
    if method in ("post", "patch"):
        return getattr(client, f"{method}_json")(url, body, **kwargs)
    return getattr(client, method)(url, **kwargs)


def register(client, email: str, password: str = "a long new password", status: int = 202):
    """Register ``email`` through the JSON API."""
    return client.post_json(
        "/api/auth/register", {"email": email, "password": password}, status=status
    )
