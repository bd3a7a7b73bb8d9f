"""The promises every schemathesis test checks, and one way to run a strategy."""

from __future__ import annotations

from collections.abc import Callable

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

ERROR_KEYS = {"code", "title", "message", "hints", "supportCode"}


def json_error_body(ctx, response, case):
    """Errors are always the JSON error body; nothing is ever HTML or a traceback."""
    content_type = response.headers.get("Content-Type", [""])
    content_type = content_type[0] if isinstance(content_type, list) else content_type
    assert "html" not in content_type.lower()
    if response.status_code >= 400:
        body = response.json()
        assert set(body) >= ERROR_KEYS, body
        assert "Traceback" not in response.text


CHECKS = [
    schemathesis.checks.not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    json_error_body,
]


def run_strategy(strategy, call: Callable | None = None, max_examples: int = 10) -> None:
    """Run ``max_examples`` cases of ``strategy`` (derandomised) and check every promise.

    ``call(case)`` returns the keyword arguments of ``case.call_and_validate`` (headers,
    cookies); by default none.
    """

    @given(case=strategy)
    @settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case):
        case.call_and_validate(checks=CHECKS, **(call(case) if call else {}))

    run()
