"""Times as the API writes them and as raw reads parse them (cmsshop.util.isoformat_z,
cmsshop.hotsql.from_db_time): both have fast paths for what the database returns."""

from __future__ import annotations

import datetime as dt

import pytest

from cmsshop.hotsql import HotBatch, HotStatement, from_db_time, raw_reads
from cmsshop.util import isoformat_z

UTC = dt.UTC
PLUS_TWO = dt.timezone(dt.timedelta(hours=2))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-01-02 03:04:05.123456", dt.datetime(2026, 1, 2, 3, 4, 5, 123456, UTC)),
        ("2026-01-02 03:04:05", dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2026-01-02 03:04:05.5", dt.datetime(2026, 1, 2, 3, 4, 5, 500000, UTC)),
        ("2026-01-02T03:04:05.25+00:00", dt.datetime(2026, 1, 2, 3, 4, 5, 250000, UTC)),
        ("2026-01-02T05:04:05+02:00", dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2026-01-01T22:04:05-05:00", dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2026-01-02T03:04:05Z", dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        (dt.datetime(2026, 1, 2, 3, 4, 5), dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        (None, None),
    ],
)
def test_a_stored_time_is_read_as_aware_utc(value, expected):
    found = from_db_time(value)
    assert found == expected
    if found is not None:
        assert found.tzinfo is UTC  # what isoformat_z's fast path recognises


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (dt.datetime(2026, 1, 2, 3, 4, 5, 999999, UTC), "2026-01-02T03:04:05Z"),
        (dt.datetime(999, 12, 31, 23, 59, 59, tzinfo=UTC), "0999-12-31T23:59:59Z"),
        (dt.datetime(2026, 1, 2, 5, 4, 5, tzinfo=PLUS_TWO), "2026-01-02T03:04:05Z"),
        (dt.datetime(2026, 1, 2, 3, 4, 5), "2026-01-02T03:04:05Z"),
        (None, None),
    ],
)  # fmt: skip
def test_times_are_written_as_utc_seconds_with_a_z(value, expected):
    assert isoformat_z(value) == expected


def test_rows_as_one_json_array_keep_values_types_and_the_limited_order(engine):
    """HotStatement(json_rows=True): on SQLite the rows come back through one JSON
    array (after a first run that reads the columns); values and the order of an
    ORDER BY ... LIMIT are what the rows would have given, on either database."""
    sql = (
        "SELECT v.n AS n, v.t AS t, v.z AS z FROM (SELECT 3 AS n, 'c é \"q\"' AS t, "
        "CAST(NULL AS BIGINT) AS z "
        "UNION ALL SELECT 1, 'a', NULL UNION ALL SELECT 2, 'b\\\\n', 9007199254740993) v "
        "ORDER BY v.n DESC LIMIT :limit"
    )
    plain, as_json = HotBatch(HotStatement(sql)), HotBatch(HotStatement(sql, json_rows=True))
    with raw_reads(engine) as conn:
        expected = [list(row) for row in plain.run(conn, {"limit": 3})[0]]
        for _ in range(3):  # the first run reads the columns, the others the JSON
            assert [list(row) for row in as_json.run(conn, {"limit": 3})[0]] == expected
        assert as_json.run(conn, {"limit": 0}) == [[]]
    assert expected[0] == [3, 'c é "q"', None]
    assert [row[0] for row in expected] == [3, 2, 1]
