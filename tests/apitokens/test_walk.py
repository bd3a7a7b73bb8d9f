"""Token scopes on every admin route: walk the OpenAPI document, call each /api/admin
operation with tokens of every scope, and check who is let through.

The scope each route needs is written out here again, by hand, instead of being asked of
services/apitokens/scopes: the point is to catch that table saying something else."""

from __future__ import annotations

import re

import pytest
from helpers.apitokens import bearer, make_token
from helpers.clients import new_client

from cmsshop.models import API_TOKEN_SCOPES
from cmsshop.services.apitokens import scopes as token_scopes

# /api/admin/<group>/...: the scope a token needs there ("session": no token may call it).
EXPECTED = {
    "api-tokens": "session",
    "articles": "catalogue",
    "audit": "settings",
    "coupons": "catalogue",
    "currencies": "catalogue",
    "errors": "orders",
    "legal": "settings",
    "licenses": "licenses",
    "mail": "orders",
    "orders": "orders",
    "payment-events": "orders",
    "subscriptions": "orders",
    "products": "catalogue",
    "settings": "settings",
    "tickets": "orders",
    "webhooks": "settings",
}
PREFIX = "/api/admin/"
METHODS = ("get", "post", "put", "patch", "delete")
# Dummy values for the path parameters: the routes answer 404 or 422 with them, never
# before the scope check.
DUMMIES = {"id": "999999", "image_id": "999999", "action": "suspend"}


def admin_operations(document) -> list[tuple[str, str, dict]]:
    return [
        (path, method, operation)
        for path, operations in document["paths"].items()
        if path.startswith(PREFIX)
        for method, operation in operations.items()
        if method in METHODS
    ]


def concrete(path: str) -> str:
    return re.sub(r"\{([^}]+)\}", lambda m: DUMMIES.get(m.group(1), "no-such-thing"), path)


def group(path: str) -> str:
    return path[len(PREFIX) :].split("/", 1)[0]


def call(client, method: str, url: str, value: str):
    headers = bearer(value)
    if method in ("post", "put", "patch"):
        return getattr(client, f"{method}_json")(url, {}, headers=headers, expect_errors=True)
    return getattr(client, method)(url, headers=headers, expect_errors=True)


@pytest.fixture
def document(testapp):
    return testapp.get("/api/openapi.json").json


def test_every_admin_group_has_a_scope(document):
    groups = {group(path) for path, _, _ in admin_operations(document)}
    assert groups, "the document lists no admin route"
    assert groups <= set(EXPECTED), f"scope unknown to this test: {groups - set(EXPECTED)}"
    covered = set(token_scopes.GROUP_SCOPES) | set(token_scopes.SESSION_ONLY_GROUPS)
    assert groups <= covered, f"missing from GROUP_SCOPES: {groups - covered}"
    for name, scope in EXPECTED.items():
        if scope == "session":
            assert name in token_scopes.SESSION_ONLY_GROUPS
        else:
            assert token_scopes.GROUP_SCOPES[name] == scope, name


def test_the_document_says_who_may_call_each_admin_operation(document):
    schemes = document["components"]["securitySchemes"]
    assert schemes["apiToken"] == {**schemes["apiToken"], "type": "http", "scheme": "bearer"}
    assert "session" in schemes
    for path, method, operation in admin_operations(document):
        expected = EXPECTED[group(path)]
        assert operation["x-required-scope"] == expected, (method, path)
        if expected == "session":
            assert operation["security"] == [{"session": []}], (method, path)
        else:
            assert operation["security"] == [{"session": []}, {"apiToken": []}], (method, path)
        assert {"401", "403"} <= set(operation["responses"]), (method, path)
    for path, operations in document["paths"].items():
        if not path.startswith(PREFIX):
            for operation in operations.values():
                assert "x-required-scope" not in operation, path


def test_every_admin_operation_takes_exactly_the_tokens_its_scope_allows(
    document, app, admin, dbsession
):
    values = {
        scope: make_token(dbsession, admin, [scope], name=scope)[1] for scope in API_TOKEN_SCOPES
    }
    client = new_client(app)
    operations = admin_operations(document)
    assert len(operations) >= 30
    for path, method, _ in operations:
        needed = EXPECTED[group(path)]
        url = concrete(path)
        if needed == "session":
            allowed = set()
        else:
            allowed = {needed, "all"} | ({"read"} if method == "get" else set())
        for scope in API_TOKEN_SCOPES:
            response = call(client, method, url, values[scope])
            where = f"{method.upper()} {url} with a {scope!r} token"
            if scope in allowed:
                assert response.status_int not in (401, 403), (where, response.text)
            else:
                assert response.status_int == 403, (where, response.text)
                assert response.json["code"] == "insufficient_scope", where
                assert response.json["scope"] == needed, where
