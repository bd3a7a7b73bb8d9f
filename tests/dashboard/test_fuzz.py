"""Schemathesis on the dashboard, download and admin ticket routes, logged in (customer and
admin, with a valid CSRF token) and anonymous: every input gets a documented answer that
matches its schema, errors are the JSON error body, and nothing is a 5xx."""

from __future__ import annotations

import pytest
import schemathesis
from helpers.clients import new_client
from helpers.fuzzing import run_strategy
from helpers.purchases import make_purchase
from schemathesis.generation.modes import GenerationMode

OUR_PATHS = "^/api/(dashboard/|downloads/|admin/tickets)"
NOTHING_TO_NEGATE = {
    "/api/downloads/{token}",  # any string is a token (see test_downloads.py)
    "/api/dashboard/subscriptions",  # no parameter, no body
}


def session_headers(client) -> dict[str, str]:
    cookie = client.cookies["cmsshop_session"]
    return {"Cookie": f"cmsshop_session={cookie}", "X-CSRF-Token": client.csrf_token}


@pytest.fixture
def operations(app):
    schema = schemathesis.openapi.from_wsgi("/api/openapi.json", app)
    schema = schema.include(path_regex=OUR_PATHS)
    return [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("who", ["customer", "admin", "anonymous"])
def test_dashboard_fuzz(app, operations, dbsession, customer, admin, storage_dir, who):
    make_purchase(dbsession, customer, storage_dir)
    headers: dict[str, str] = {}
    modes = [GenerationMode.POSITIVE]
    if who != "anonymous":  # anonymous: 401 before any input is looked at
        client = new_client(app)
        client.login((customer if who == "customer" else admin).email)
        headers = session_headers(client)
        modes.append(GenerationMode.NEGATIVE)
    assert len(operations) == 23  # offline activation and subscriptions included
    for mode in modes:
        for operation in operations:
            if mode == GenerationMode.NEGATIVE and operation.path in NOTHING_TO_NEGATE:
                continue
            fuzz(operation, mode, headers)


def fuzz(operation, mode, headers):
    run_strategy(operation.as_strategy(mode), lambda case: {"headers": headers})
