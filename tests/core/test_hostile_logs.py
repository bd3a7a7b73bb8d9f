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
