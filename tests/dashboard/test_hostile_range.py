"""Hostile Range and If-Range headers on the download route: never a 500.

A byte position longer than 18 digits is beyond any file this shop can hold, so it is
read as "past the end" without converting the digits (Python refuses to convert more
than 4300 digits, and converting fewer still costs time that grows with the length):
a first position past the end is 416, a last position past the end means "to the end",
a suffix longer than the file means "the whole file" (RFC 9110 section 14.1.2).
"""

from __future__ import annotations

import pytest
from helpers.clients import new_client
from helpers.downloads import CONTENT, logs, signed_path
from helpers.purchases import make_purchase

from cmsshop.services.dashboard.downloads import (
    ByteRange,
    RangeNotSatisfiable,
    if_range_matches,
    parse_range,
)

SIZE = len(CONTENT)
HUGE = "9" * 5000  # beyond Python's int() digit limit
LONG = "1" + "0" * 18  # 19 digits: just past the longest position read as a number


@pytest.fixture
def download(app, customer_app, dbsession, customer, storage_dir):
    purchase = make_purchase(dbsession, customer, storage_dir, content=CONTENT)
    return new_client(app), signed_path(customer_app, purchase)


@pytest.mark.parametrize("header", [f"bytes={HUGE}-", f"bytes={LONG}-", f"bytes={HUGE}-{HUGE}"])
def test_a_first_position_with_thousands_of_digits_is_416(download, dbsession, header):
    client, path = download
    response = client.get(path, headers={"Range": header}, status=416)
    assert response.content_type == "application/json"
    assert response.json["code"] == "range_not_satisfiable"
    assert response.headers["Content-Range"] == f"bytes */{SIZE}"
    assert logs(dbsession) == []


@pytest.mark.parametrize(
    ("header", "start"),
    [
        (f"bytes=0-{HUGE}", 0),
        (f"bytes=10-{LONG}", 10),
        (f"bytes=-{HUGE}", 0),
        (f"bytes=-{LONG}", 0),
    ],
)
def test_a_last_position_or_suffix_with_thousands_of_digits_runs_to_the_end(
    download, dbsession, header, start
):
    client, path = download
    response = client.get(path, headers={"Range": header}, status=206)
    assert response.headers["Content-Range"] == f"bytes {start}-{SIZE - 1}/{SIZE}"
    assert response.body == CONTENT[start:]
    [entry] = logs(dbsession)
    assert (entry.range_start, entry.range_end) == (start, SIZE - 1)


@pytest.mark.parametrize(
    "header",
    [
        "bytes=5-3",
        f"bytes={HUGE}-3",
        "bytes=0-1," * 2000 + "0-1",
        "bytes=" + "-" * 5000,
        "bytes=0" + " " * 5000 + "-1x",
        "bytes=\xb2-",  # a superscript two: a digit to str.isdigit, not to RFC 9110
        "bytes=\xb9\xb2\xb3-",
        "bytes=0x10-",
        "bytes=+5-",
        "bytes=--5",
        "bytes=1e3-",
        "=" * 5000,
        "bytes=" + "1-" * 3000,
    ],
)
def test_malformed_or_multiple_ranges_send_the_whole_file(download, header):
    client, path = download
    response = client.get(path, headers={"Range": header}, status=200)
    assert response.body == CONTENT


@pytest.mark.parametrize(
    ("header", "start", "end"),
    [("\tbytes=1-2\t", 1, 2), ("bytes =  3 -4", 3, 4), ("Bytes=\t5\t-\t", 5, SIZE - 1)],
)
def test_whitespace_around_the_parts_is_tolerated(download, header, start, end):
    client, path = download
    response = client.get(path, headers={"Range": header}, status=206)
    assert response.body == CONTENT[start : end + 1]


@pytest.mark.parametrize(
    "if_range",
    [
        "Mon, 01 Jan 2001 00:00:00 " + "9" * 5000,
        "Mon, 01 Jan 99999 00:00:00 GMT",
        "Mon, 32 Jan 2001 00:00:00 GMT",
        "Mon, 01 Jan 2001 25:61:61 GMT",
        "Mon, 01 Jan 2001 00:00:00 +9999",
        "Mon, 01 Jan 2001 00:00:00 +" + "9" * 5000,
        "9" * 5000,
        '"' + "a" * 10000,
        "W/",
        '"',
        "\xff\xfe",
    ],
)
def test_junk_if_range_sends_the_whole_file(download, if_range):
    client, path = download
    response = client.get(path, headers={"Range": "bytes=0-9", "If-Range": if_range}, status=200)
    assert response.body == CONTENT


@pytest.mark.parametrize(
    "headers",
    [
        {"Range": "bytes=0-\x00"},
        {"Range": "bytes\x00=0-1"},
        {"Range": "bytes=0-9", "If-Range": "\x00"},
    ],
)
def test_control_characters_in_range_headers_are_refused_at_the_edge(download, headers):
    """Like every header: 400 JSON from the edge check, before the download route."""
    client, path = download
    response = client.get(path, headers=headers, status=400)
    assert response.json["code"] == "malformed_request"


def test_parse_range_reads_long_positions_without_converting_them():
    assert parse_range(f"bytes=0-{HUGE}", 100) == ByteRange(0, 99)
    assert parse_range(f"bytes=-{HUGE}", 100) == ByteRange(0, 99)
    assert parse_range("bytes=0-" + "9" * 18, 100) == ByteRange(0, 99)
    assert parse_range("bytes=0-" + "0" * 30 + "5", 100) == ByteRange(0, 5)
    assert parse_range("bytes=-" + "0" * 30 + "5", 100) == ByteRange(95, 99)
    assert parse_range(f"bytes={HUGE}-1", 100) is None  # last < first: ignored
    assert parse_range("bytes=\u0663-", 100) is None  # an Arabic-Indic three
    assert parse_range("bytes=\uff11-", 100) is None  # a full-width one
    assert parse_range("bytes=1-2\u3000", 100) == ByteRange(1, 2)
    for header in (f"bytes={HUGE}-", f"bytes={LONG}-", "bytes=-" + "0" * 5000):
        with pytest.raises(RangeNotSatisfiable):
            parse_range(header, 100)


def test_if_range_never_raises_on_junk():
    import datetime as dt

    modified = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    for junk in ("Mon, 01 Jan 2001 00:00:00 +" + "9" * 5000, "9" * 5000, "\ud800", "\x00"):
        assert if_range_matches(junk, '"a"', modified) is False
