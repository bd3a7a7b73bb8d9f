"""The OpenAPI document describes every route, and the app keeps its promises.

The schemathesis part fuzzes every documented operation (as an admin, so protected
routes are exercised beyond 401) and checks: no 5xx, only documented status codes,
JSON only, responses matching their schemas, and the error body on every error.
"""

from __future__ import annotations

import re

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from cmsshop.openapi import build_document

METHODS = {"get", "post", "put", "patch", "delete"}


def api_routes(app) -> dict[str, set[str]]:
    """{openapi path: {methods}} of every /api route with a view (stubs excluded)."""
    routes: dict[str, set[str]] = {}
    introspector = app.registry.introspector
    for view in introspector.get_category("views") or []:
        intr = view["introspectable"]
        route_name = intr.get("route_name")
        if not route_name or route_name.startswith("disabled."):
            continue
        route = introspector.get("routes", route_name)
        pattern = route["pattern"]
        if not pattern.startswith("/api"):
            continue
        path = re.sub(r"\{(\w+):[^}]*\}", r"{\1}", pattern)
        methods = intr.get("request_methods") or ()
        methods = [methods] if isinstance(methods, str) else list(methods)
        routes.setdefault(path, set()).update(m.lower() for m in methods)
    return routes


def test_every_api_route_is_documented_and_nothing_else(app):
    document = build_document(app.registry)
    documented = {
        path: {m for m in operations if m in METHODS}
        for path, operations in document["paths"].items()
    }
    registered = api_routes(app)
    assert set(registered) == set(documented), (
        f"undocumented: {sorted(set(registered) - set(documented))}; "
        f"documented but not served: {sorted(set(documented) - set(registered))}"
    )
    for path, methods in registered.items():
        assert methods == documented[path], (path, methods, documented[path])


def test_document_is_served_and_has_the_error_body(testapp):
    document = testapp.get("/api/openapi.json").json
    assert document["openapi"].startswith("3.1")
    assert set(document["components"]["schemas"]["Error"]["required"]) == {
        "code",
        "title",
        "message",
        "hints",
        "supportCode",
    }
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if method in METHODS:
                assert "500" in operation["responses"], (path, method)


def json_error_body(ctx, response, case):
    """Errors are always the JSON error body; nothing is ever HTML."""
    content_type = response.headers.get("Content-Type", [""])
    content_type = content_type[0] if isinstance(content_type, list) else content_type
    assert "html" not in content_type.lower()
    if response.status_code >= 400:
        body = response.json()
        assert {"code", "title", "message", "hints", "supportCode"} <= set(body), body
        assert "Traceback" not in response.text


CHECKS = [
    schemathesis.checks.not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    json_error_body,
]


def test_api_fuzz(app, admin_app):
    """Fuzz every documented operation; report every operation that breaks a promise.

    (One test over all operations rather than schemathesis' pytest plugin, whose lazy
    fixtures do not run under this pytest version.)
    """
    api = schemathesis.openapi.from_wsgi("/api/openapi.json", app)
    cookies = {"cmsshop_session": admin_app.cookies["cmsshop_session"]}
    failures = []
    operations = 0
    for result in api.get_all_operations():
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy())
        @settings(
            max_examples=12,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def exercise(case):
            headers = dict(case.headers or {})
            headers.setdefault("X-CSRF-Token", admin_app.csrf_token)
            case.call_and_validate(headers=headers, cookies=dict(cookies), checks=CHECKS)

        try:
            exercise()
        except Exception as exc:  # noqa: BLE001 - collect them all, then fail once
            failures.append(f"{operation.label}: {str(exc)[:1500]}")
    assert operations > 0
    assert not failures, "\n\n".join(failures)
