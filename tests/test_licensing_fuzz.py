"""Schemathesis on the licensing routes alone (JSON and form bodies): every odd input is
a documented 4xx with the JSON error body, never a 5xx."""

from __future__ import annotations

import pytest
import schemathesis
from fuzzing import run_strategy
from schemathesis.generation.modes import GenerationMode


@pytest.fixture
def licensing_operations(make_app, tmp_path):
    app = make_app(**{"cmsshop.license_key_dir": str(tmp_path / "keys")})
    schema = schemathesis.openapi.from_wsgi("/api/openapi.json", app)
    schema = schema.include(path_regex="^/api/license/")
    return [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
@pytest.mark.parametrize("media_type", ["application/json", "application/x-www-form-urlencoded"])
def test_licensing_fuzz(licensing_operations, mode, media_type):
    assert len(licensing_operations) == 5  # activate, validate, deactivate, update-check, jwks
    for operation in licensing_operations:
        kwargs = {}
        if operation.method.upper() == "POST":
            kwargs["media_type"] = media_type
        elif mode == GenerationMode.NEGATIVE:
            continue  # GET jwks.json has no input to break

        run_strategy(operation.as_strategy(mode, **kwargs))
