"""Log lines cannot be forged and do not carry secrets."""

from __future__ import annotations

import configparser
import logging
import os

import pytest
from helpers.app import ROOT

from cmsshop.logs import SafeFormatter, redact, safe_text


def messages(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records]


def test_a_newline_in_the_path_does_not_forge_a_log_line(testapp, caplog):
    caplog.set_level(logging.INFO, logger="cmsshop")
    forged = "/api/nope%0a2026-01-01 INFO [cmsshop.request] admin logged in"
    testapp.get(forged, expect_errors=True)
    lines = [m for m in messages(caplog) if "nope" in m]
    assert lines, messages(caplog)
    for line in lines:
        assert "\n" not in line and "\r" not in line


@pytest.mark.parametrize("char", ["\n", "\r", "\x1b", "\x00", "\u2028", "\x85"])
def test_control_characters_in_any_log_argument_are_escaped(caplog, char):
    caplog.set_level(logging.INFO)
    logging.getLogger("somewhere.else").warning("user said %s", f"hi{char}FAKE LINE")
    (message,) = [m for m in messages(caplog) if "user said" in m]
    assert char not in message and "FAKE LINE" in message


def test_download_tokens_are_redacted_in_request_logs(testapp, caplog):
    caplog.set_level(logging.INFO, logger="cmsshop")
    token = "tok_SECRET_0123456789abcdef"
    testapp.get(f"/api/downloads/{token}", expect_errors=True)
    logged = "\n".join(messages(caplog))
    assert "/api/downloads/[redacted]" in logged
    assert token not in logged


@pytest.mark.parametrize(
    "param", ["token", "key", "licenseKey", "license_key", "signature", "secret", "password"]
)
def test_secret_query_parameters_are_redacted(caplog, param):
    caplog.set_level(logging.INFO)
    logging.getLogger("cmsshop.test").info("GET /api/x?a=1&%s=S3CR3T&b=2", param)
    (message,) = [m for m in messages(caplog) if "/api/x" in m]
    assert "S3CR3T" not in message and f"{param}=[redacted]" in message and "b=2" in message


def test_redaction_keeps_ordinary_paths():
    assert redact("/api/store/products/widget?page=2") == "/api/store/products/widget?page=2"
    assert safe_text("GET /api/downloads/abc def") == "GET /api/downloads/[redacted] def"


def test_the_inis_use_the_safe_formatter_on_every_handler():
    for name in ("development.ini", "production.ini"):
        parser = configparser.ConfigParser(interpolation=None)
        parser.read(os.path.join(ROOT, name))
        handlers = parser["handlers"]["keys"].split(",")
        for handler in handlers:
            formatter = parser[f"handler_{handler.strip()}"]["formatter"]
            assert parser[f"formatter_{formatter}"]["class"] == "cmsshop.logs.SafeFormatter"


def test_the_formatter_escapes_records_from_any_factory():
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "a %s", ("b\nc",), None)
    formatted = SafeFormatter("%(message)s").format(record)
    assert formatted == "a b\\x0ac"


def test_the_quick_way_past_clean_text_changes_nothing_the_full_rules_would():
    """safe_text leaves a text alone after one scan when no rule could match it: for
    texts built from every rule's pieces (any case, any order), it answers as redacting
    and escaping would."""
    import random

    from cmsshop import logs

    pieces = [
        "/api/downloads/", "/API/Downloads/", "cms_", "CMS_", "cms_" + "A" * 43,
        "Authorization: Bearer abc", "HTTP_AUTHORIZATION", "authorization", "token=",
        "TOKEN=", "?", "&", "=", "x", "/api/store/products/widget", " ", "GET", "200",
        "0.4ms", "\n", "\x1b", "\x85", "\u2028", "\ud800", "é", "hunter22",
    ]  # fmt: skip
    rng = random.Random(11)
    logs.register_secret("hunter22")
    try:
        for _ in range(5000):
            text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 8)))
            assert safe_text(text) == logs.escape_control(redact(text)), text
    finally:
        logs._SECRET_VALUES.discard("hunter22")
    line = "8d881ff527509c73 GET /api/store/products/widget 200 0.4ms"
    assert safe_text(line) is line  # the request log's line: nothing to do


@pytest.mark.parametrize("datefmt", [None, "%H:%M:%S"])
def test_the_formatter_writes_the_time_as_logging_does(datefmt):
    """asctime (worked out once a second) reads as logging.Formatter writes it, across
    seconds and milliseconds."""
    ours = SafeFormatter("%(asctime)s %(message)s", datefmt=datefmt)
    theirs = logging.Formatter("%(asctime)s %(message)s", datefmt=datefmt)
    for created in (1_700_000_000.0, 1_700_000_000.999, 1_700_000_001.5, 1_700_000_000.25):
        record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
        record.created, record.msecs = created, (created - int(created)) * 1000
        assert ours.format(record) == theirs.format(record)
