"""The OpenAPI document describes every route, and the app keeps its promises.

The schemathesis part fuzzes every documented operation (as an admin, so protected
routes are exercised beyond 401) and checks: no 5xx, only documented status codes,
JSON only, responses matching their schemas, and the error body on every error.
"""

from __future__ import annotations

import re

import schemathesis
from helpers.fuzzing import run_strategy

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


def test_a_process_writes_the_document_once_and_serves_those_bytes(app, testapp, monkeypatch):
    """It follows from the configuration alone: built at the first request, then the same
    bytes (the built document, as the app's json renderer writes it) every time."""
    from cmsshop import openapi
    from cmsshop.views.core.api import OPENAPI_BODY

    built = []

    def counted(registry):
        built.append(registry)
        return build_document(registry)

    monkeypatch.setattr(openapi, "build_document", counted)
    monkeypatch.delitem(app.registry, OPENAPI_BODY, raising=False)
    first = testapp.get("/api/openapi.json")
    second = testapp.get("/api/openapi.json")
    assert len(built) == 1
    assert first.body == second.body and first.content_type == "application/json"
    assert first.json == build_document(app.registry)


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

        def call(case):
            headers = dict(case.headers or {})
            headers.setdefault("X-CSRF-Token", admin_app.csrf_token)
            return {"headers": headers, "cookies": dict(cookies)}

        try:
            run_strategy(operation.as_strategy(), call, max_examples=12)
        except Exception as exc:  # noqa: BLE001 - collect them all, then fail once
            failures.append(f"{operation.label}: {str(exc)[:1500]}")
    assert operations > 0
    assert not failures, "\n\n".join(failures)
