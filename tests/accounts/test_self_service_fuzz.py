"""Schemathesis on the account self-service routes (/api/account/ except billing, which
the tax tests fuzz), logged in with a valid CSRF token and anonymous: every input gets a
documented answer that matches its schema, errors are the JSON error body, and nothing
is a 5xx."""

from __future__ import annotations

import pytest
import schemathesis
from helpers.clients import new_client
from helpers.fuzzing import run_strategy
from schemathesis.generation.modes import GenerationMode

OUR_PATHS = "^/api/account/(profile|email|password|export|delete)"


@pytest.fixture
def operations(app):
    schema = schemathesis.openapi.from_wsgi("/api/openapi.json", app)
    schema = schema.include(path_regex=OUR_PATHS)
    return [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("who", ["customer", "anonymous"])
def test_self_service_fuzz(app, operations, customer, who):
    headers: dict[str, str] = {}
    modes = [GenerationMode.POSITIVE]
    if who == "customer":
        client = new_client(app)
        client.login(customer.email)
        cookie = client.cookies["cmsshop_session"]
        headers = {"Cookie": f"cmsshop_session={cookie}", "X-CSRF-Token": client.csrf_token}
        modes.append(GenerationMode.NEGATIVE)
    assert len(operations) == 7
    for mode in modes:
        for operation in operations:
            if mode == GenerationMode.NEGATIVE and operation.method.upper() == "GET":
                continue  # no parameters and no body: nothing to negate
            run_strategy(operation.as_strategy(mode), lambda case: {"headers": headers})
