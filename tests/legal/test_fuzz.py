"""Schemathesis on the legal pages' admin routes, as an admin with a valid CSRF token:
any input gets a documented answer matching its schema, errors are the JSON error body,
and nothing is a 5xx."""

from __future__ import annotations

import pytest
import schemathesis
from helpers.clients import new_client
from helpers.fuzzing import run_strategy
from helpers.legal import publish_legal
from schemathesis.generation.modes import GenerationMode

OUR_PATHS = "^/api/admin/legal"


@pytest.fixture
def operations(app):
    schema = schemathesis.openapi.from_wsgi("/api/openapi.json", app)
    schema = schema.include(path_regex=OUR_PATHS)
    return [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_legal_admin_routes_fuzz(app, operations, dbsession, admin, mode):
    publish_legal(dbsession)
    client = new_client(app)
    client.login(admin.email)
    cookie = client.cookies["cmsshop_session"]
    headers = {"Cookie": f"cmsshop_session={cookie}", "X-CSRF-Token": client.csrf_token}
    assert len(operations) == 3
    for operation in operations:
        if mode == GenerationMode.NEGATIVE and operation.method.upper() == "GET":
            continue  # no input but the kind, and any string is a kind to look up
        run_strategy(operation.as_strategy(mode), lambda case: {"headers": headers})
