"""Schemathesis on the licensing routes alone (JSON and form bodies): every odd input is
a documented 4xx with the JSON error body, never a 5xx."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)


def json_error_body(ctx, response, case):
    if response.status_code >= 400:
        body = response.json()
        assert {"code", "title", "message", "hints", "supportCode"} <= set(body), body


@pytest.fixture
def licensing_operations(make_app, tmp_path):
    app = make_app(**{"cmsshop.license_key_dir": str(tmp_path / "keys")})
    schema = schemathesis.openapi.from_wsgi("/api/openapi.json", app)
    schema = schema.include(path_regex="^/api/license/")
    return [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
@pytest.mark.parametrize("media_type", ["application/json", "application/x-www-form-urlencoded"])
def test_licensing_fuzz(licensing_operations, mode, media_type):
    assert len(licensing_operations) == 4
    for operation in licensing_operations:
        kwargs = {}
        if operation.method.upper() == "POST":
            kwargs["media_type"] = media_type
        elif mode == GenerationMode.NEGATIVE:
            continue  # GET jwks.json has no input to break

        @given(case=operation.as_strategy(mode, **kwargs))
        @settings(
            max_examples=10,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        def run(case):
            case.call_and_validate(
                checks=[
                    schemathesis.checks.not_a_server_error,
                    status_code_conformance,
                    content_type_conformance,
                    response_schema_conformance,
                    json_error_body,
                ]
            )

        run()
