"""Every /admin page, found from the app's own routes: a customer gets the 403 page
(GET and POST), a visitor who is not logged in is sent to log in, an admin gets in."""

from __future__ import annotations

import re

import pytest
import webtest
from helpers.clients import logged_in
from pyramid.interfaces import IRoutesMapper


def admin_page_routes(app) -> list[tuple[str, str, set[str]]]:
    """(route name, pattern, methods) of every route under /admin."""
    mapper = app.registry.queryUtility(IRoutesMapper)
    methods: dict[str, set[str]] = {}
    for intr in app.registry.introspector.get_category("views") or []:
        view = intr["introspectable"]
        route_name = view.get("route_name")
        if route_name:
            found = view.get("request_methods") or ("GET",)
            methods.setdefault(route_name, set()).update(
                [found] if isinstance(found, str) else found
            )
    return [
        (route.name, route.pattern, methods.get(route.name, set()))
        for route in mapper.get_routes()
        if route.pattern == "/admin" or route.pattern.startswith("/admin/")
    ]


def fill(pattern: str) -> str:
    return re.sub(r"\{[^}]+\}", "x1", pattern)


def test_there_are_admin_pages_of_every_area(app):
    patterns = {pattern for _, pattern, _ in admin_page_routes(app)}
    for expected in (
        "/admin",
        "/admin/products",
        "/admin/currencies",
        "/admin/articles",
        "/admin/orders",
        "/admin/customers",
        "/admin/payments",
        "/admin/licenses",
        "/admin/tickets",
        "/admin/errors",
    ):
        assert expected in patterns, expected


def test_a_customer_gets_403_on_every_admin_page(app, customer):
    client = logged_in(app, customer.email)
    token = client.get("/login").forms[0]["csrf_token"].value
    checked = 0
    for name, pattern, methods in admin_page_routes(app):
        path = fill(pattern)
        if "GET" in methods:
            response = client.get(path, status=403)
            assert response.content_type == "text/html", name
            assert "Forbidden" in response.html.title.text or "403" in response.text, name
            checked += 1
        if "POST" in methods:
            # With a valid CSRF token: the role, not the token, refuses it.
            client.post(path, {"csrf_token": token}, status=403)
            checked += 1
    assert checked >= 20


def test_a_visitor_is_sent_to_log_in(app):
    client = webtest.TestApp(app)
    for _, pattern, methods in admin_page_routes(app):
        if "GET" in methods:
            path = fill(pattern)
            response = client.get(path, status=303)
            assert "/login?next=" in response.location, path


@pytest.mark.parametrize(
    "path",
    [
        "/admin",
        "/admin/products",
        "/admin/currencies",
        "/admin/articles",
        "/admin/orders",
        "/admin/customers",
        "/admin/payments",
        "/admin/payments/events",
        "/admin/licenses",
        "/admin/tickets",
        "/admin/errors",
    ],
)
def test_an_admin_gets_in(app, admin, path):
    response = logged_in(app, admin.email).get(path)
    assert response.content_type == "text/html"
    assert len(response.html.find_all("h1")) == 1
