"""One catalogue of error codes (cmsshop.errors.ERROR_CODES), in step with the code that
raises them and with the "Error codes" table of docs/errors.md."""

from __future__ import annotations

import importlib
import os
import pkgutil
import re

from helpers.app import ROOT

import cmsshop
from cmsshop.errors import ERROR_CODES, ApiError

CODE_PATTERNS = (
    re.compile(r"\bcode\s*=\s*\"([a-z][a-z0-9_]*)\""),  # code="x" and code = "x"
    re.compile(r"\bcode(?:, title)? = (?:\d+, )?\"([a-z][a-z0-9_]*)\""),
    re.compile(r"_license_state_error\(\s*\"([a-z][a-z0-9_]*)\""),
)


def source_files():
    for folder, _dirs, files in os.walk(os.path.join(ROOT, "cmsshop")):
        for name in files:
            if name.endswith(".py"):
                yield os.path.join(folder, name)


def raised_codes() -> dict[str, str]:
    """Every literal error code in cmsshop/, with the first file naming it."""
    found: dict[str, str] = {}
    for path in source_files():
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        for pattern in CODE_PATTERNS:
            for code in pattern.findall(text):
                found.setdefault(code, os.path.relpath(path, ROOT))
    return found


def all_api_error_classes() -> list[type[ApiError]]:
    for module in pkgutil.walk_packages(cmsshop.__path__, "cmsshop."):
        importlib.import_module(module.name)
    result, pending = [], [ApiError]
    while pending:
        cls = pending.pop()
        result.append(cls)
        pending.extend(cls.__subclasses__())
    return result


def test_the_scan_finds_codes():
    codes = raised_codes()
    assert {"internal_error", "database_unavailable", "malformed_request"} <= set(codes)
    assert len(codes) > 30


def test_every_code_raised_is_in_the_catalogue():
    missing = {code: path for code, path in raised_codes().items() if code not in ERROR_CODES}
    assert not missing, f"add these to cmsshop.errors.ERROR_CODES: {missing}"


def test_error_classes_agree_with_the_catalogue():
    for cls in all_api_error_classes():
        entry = ERROR_CODES.get(cls.code)
        assert entry is not None, f"{cls.__qualname__}.code {cls.code!r} is not catalogued"
        assert (cls.status, cls.title) == (entry.status, entry.title), cls.__qualname__


def test_catalogue_entries_are_well_formed():
    for code, entry in ERROR_CODES.items():
        assert re.fullmatch(r"[a-z][a-z0-9_]*", code)
        assert 400 <= entry.status <= 599, code
        assert entry.title and entry.meaning.endswith("."), code


def documented_error_table() -> dict[str, int] | None:
    """{code: status} from the "Error codes" section of docs/errors.md, or None without one."""
    with open(os.path.join(ROOT, "docs", "errors.md"), encoding="utf-8") as handle:
        text = handle.read()
    match = re.search(r"^#+ Error codes\s*$(.*?)(?=^#+ |\Z)", text, re.MULTILINE | re.DOTALL)
    if match is None:
        return None
    rows = re.findall(r"^\|\s*`([a-z0-9_]+)`\s*\|\s*(\d{3})\s*\|", match.group(1), re.MULTILINE)
    return {code: int(status) for code, status in rows}


def test_every_catalogued_code_is_documented():
    table = documented_error_table()
    assert table is not None, 'docs/errors.md has no "Error codes" section'
    missing = sorted(set(ERROR_CODES) - set(table))
    assert not missing, f"docs/errors.md Error codes table lacks: {missing}"
    wrong = {c: s for c, s in table.items() if c in ERROR_CODES and ERROR_CODES[c].status != s}
    assert not wrong, f"docs/errors.md statuses differ from ERROR_CODES: {wrong}"
    unknown = sorted(set(table) - set(ERROR_CODES))
    assert not unknown, f"docs/errors.md documents codes that do not exist: {unknown}"


def test_a_raise_naming_a_catalogued_code_gets_its_status_and_title():
    from cmsshop.errors import ApiError

    error = ApiError("gone", code="download_revoked")
    assert (error.status, error.title) == (410, ERROR_CODES["download_revoked"].title)
    explicit = ApiError("x", code="download_revoked", status=404, title="Custom")
    assert (explicit.status, explicit.title) == (404, "Custom")
