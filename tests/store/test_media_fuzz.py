"""Schemathesis on the admin image routes, as an admin with a valid CSRF token: any
input (multipart uploads included) gets a documented answer matching its schema, errors
are the JSON error body, and nothing is a 5xx."""

from __future__ import annotations

import pytest
import schemathesis
from helpers.clients import new_client
from helpers.fuzzing import run_strategy
from helpers.store import add_currencies, add_product
from schemathesis.generation.modes import GenerationMode

OUR_PATHS = "^/api/admin/products/\\{slug\\}/images"


@pytest.fixture
def operations(app):
    schema = schemathesis.openapi.from_wsgi("/api/openapi.json", app)
    schema = schema.include(path_regex=OUR_PATHS)
    return [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_image_routes_fuzz(app, operations, dbsession, admin, mode):
    add_currencies(dbsession)
    add_product(dbsession, "site-guard")
    client = new_client(app)
    client.login(admin.email)
    cookie = client.cookies["cmsshop_session"]
    headers = {"Cookie": f"cmsshop_session={cookie}", "X-CSRF-Token": client.csrf_token}
    assert len(operations) == 4
    for operation in operations:
        if mode == GenerationMode.NEGATIVE and operation.method.upper() == "GET":
            continue  # its one input is the slug, and any string is a slug to look up
        run_strategy(operation.as_strategy(mode), lambda case: {"headers": headers})
