"""SQLite's hot reads through its C API (cmsshop.sqlitestep): the same rows and errors as
the sqlite3 module, the GIL released while SQLite steps, statements freed before their
connection closes. SQLite only: PostgreSQL's reads go through libpq (test_hot_reads)."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from cmsshop import sqlitestep
from cmsshop.hotsql import HotBatch, HotStatement, raw_reads, thread_connections


@pytest.fixture
def conn(tmp_path):
    """A sqlite3 connection to a file, as the engine opens them, and its Statements."""
    dbapi = sqlite3.connect(tmp_path / "steps.sqlite", isolation_level=None)
    dbapi.execute("CREATE TABLE t (i INTEGER, r REAL, s TEXT, b BLOB)")
    dbapi.executemany(
        "INSERT INTO t VALUES (?, ?, ?, ?)",
        [
            (1, 0.1, "plain", b"\x00\xff"),
            (-(2**63), -1e308, "é 中文 \U0001f600 \u202e", b""),
            (2**63 - 1, 1 / 3, "nul\x00inside", None),
            (None, None, "", b"x" * 10_000),
        ],
    )
    steps = sqlitestep.for_connection(dbapi)
    assert steps is not None  # CPython's sqlite3 on a file: the handle is reachable
    yield dbapi, steps
    steps.finalize()
    dbapi.close()


def module_rows(dbapi, sql, args=()):
    return dbapi.execute(sql, args).fetchall()


@pytest.mark.parametrize(
    ("sql", "args"),
    [
        ("SELECT i, r, s, b FROM t ORDER BY rowid", ()),
        ("SELECT i, r, s, b FROM t WHERE s = ?1", ("é 中文 \U0001f600 \u202e",)),
        ("SELECT ?1, ?2, ?3, ?4, ?5, ?6", (None, 2**63 - 1, -(2**63), 1.5, "a\x00b", b"\x01")),
        ("SELECT ?1 + 1, typeof(?1)", (True,)),
        ("SELECT count(*) FROM t WHERE s LIKE ?1 ESCAPE '/'", ("%n%",)),
        ("SELECT i FROM t WHERE i > ?1", (2**62,)),
        ("SELECT i FROM t WHERE 0", ()),
        ("SELECT json_group_array(s) FROM t", ()),
    ],
)
def test_rows_are_the_sqlite3_modules(conn, sql, args):
    dbapi, steps = conn
    for _ in range(2):  # prepared once, then reused: the bindings of the last run cleared
        assert steps.rows(sql, args) == module_rows(dbapi, sql, args)
    assert len(steps.prepared) == 1


def test_one_reads_only_the_first_row(conn):
    dbapi, steps = conn
    sql = "SELECT s FROM t ORDER BY rowid"
    assert steps.rows(sql, (), one=True) == module_rows(dbapi, sql)[:1]
    assert steps.rows(sql, ()) == module_rows(dbapi, sql)  # reset: from the start again


@pytest.mark.parametrize(
    ("sql", "args"),
    [
        ("SELECT abs(?1)", (-(2**63),)),  # fails at the step: integer overflow
        ("SELECT nothing FROM t", ()),  # fails at the prepare: no such column
        ("SELEKT 1", ()),  # syntax
        ("SELECT CAST(x'ff' AS TEXT)", ()),  # not UTF-8
        ("SELECT json(?1)", ("{not json",)),
    ],
)
def test_errors_are_the_sqlite3_modules_and_leave_the_connection_usable(conn, sql, args):
    dbapi, steps = conn
    with pytest.raises(sqlite3.Error) as expected:
        module_rows(dbapi, sql, args)
    with pytest.raises(sqlite3.Error) as found:
        steps.rows(sql, args)
    assert type(found.value) is type(expected.value)
    assert str(found.value).split(" with text")[0] == str(expected.value).split(" with text")[0]
    if hasattr(expected.value, "sqlite_errorcode"):
        assert found.value.sqlite_errorcode == expected.value.sqlite_errorcode
        assert found.value.sqlite_errorname == expected.value.sqlite_errorname
    assert steps.rows("SELECT count(*) FROM t", ()) == [(4,)]


@pytest.mark.parametrize(
    ("value", "error"),
    [(2**63, OverflowError), (-(2**63) - 1, OverflowError), ([1], TypeError), ({}, TypeError)],
)
def test_a_parameter_sqlite_cannot_hold_is_refused(conn, value, error):
    _, steps = conn
    with pytest.raises(error):
        steps.rows("SELECT ?1", (value,))
    assert steps.rows("SELECT ?1", (7,)) == [(7,)]  # the refused binding left nothing behind


LONG = (
    "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 3000000) "
    "SELECT count(*) FROM n"
)


def test_sqlite_steps_without_the_gil(conn):
    """Another thread's Python runs while SQLite works through a long statement (about
    half a second): it ticks in the middle of the step. With the GIL held through the
    call (ctypes.PyDLL) it could only run before and after it."""
    _, steps = conn
    ticks: list[float] = []
    stop = threading.Event()

    def count():
        n = 0
        while not stop.is_set():
            n += 1
            if n % 1000 == 0:
                ticks.append(time.perf_counter())

    counter = threading.Thread(target=count)
    counter.start()
    try:
        began = time.perf_counter()
        assert steps.rows(LONG, ()) == [(3_000_000,)]
        ended = time.perf_counter()
    finally:
        stop.set()
        counter.join()
    margin = (ended - began) / 5
    assert any(began + margin < tick < ended - margin for tick in ticks)


def test_finalized_statements_refuse_reads(conn):
    dbapi, steps = conn
    steps.rows("SELECT 1", ())
    steps.finalize()
    assert steps.prepared == {}
    with pytest.raises(sqlite3.ProgrammingError):
        steps.rows("SELECT 1", ())
    assert module_rows(dbapi, "SELECT 1") == [(1,)]  # the connection itself is untouched


def test_only_a_file_database_of_the_sqlite3_module_gets_statements(tmp_path):
    memory = sqlite3.connect(":memory:")
    try:
        assert sqlitestep.for_connection(memory) is None  # no file to check the handle by
    finally:
        memory.close()
    assert sqlitestep.for_connection(object()) is None


def test_raw_columns_give_the_texts_utf8_bytes(conn):
    """A column numbered in ``raw`` reads its text as the UTF-8 bytes SQLite holds (the
    others, and the other types in it, as before)."""
    dbapi, steps = conn
    sql = "SELECT s, s, i, b FROM t ORDER BY rowid"
    expected = module_rows(dbapi, sql)
    found = steps.rows(sql, (), raw=(1, 2, 3))
    assert [(a, c, d) for a, _, c, d in found] == [(a, c, d) for a, _, c, d in expected]
    assert [row[1] for row in found] == [row[1].encode() for row in expected]


def test_a_batchs_utf8_and_json_text_statements_on_the_threads_reads(engine):
    """Through the thread's statements (one statement, and a batch run as one SELECT):
    a ``utf8`` statement gives bytes, a ``json_text`` one the parsed list, the rest as
    they were -- the same as on a connection of the pool."""
    from cmsshop.hotsql import raw_autocommit

    if engine.dialect.name != "sqlite":
        pytest.skip("SQLite's reads (PostgreSQL's: test_pg_exchange)")
    text = "€49.00 é 中文 \U0001f600"
    alone = HotBatch(HotStatement("SELECT CAST(:t AS TEXT) || '!'", utf8=True))
    together = HotBatch(
        HotStatement("SELECT CAST(:t AS TEXT)", scalar=True),
        HotStatement("SELECT CAST(:t AS TEXT) || '!'", utf8=True),
        HotStatement("SELECT json_array(CAST(:t AS TEXT))", json_text=True),
    )
    for _ in range(2):  # the second run: the batch as one statement, prepared
        with raw_reads(engine) as reads:
            assert reads.steps is not None
            assert alone.run(reads, {"t": text}) == [[(f"{text}!".encode(),)]]
            assert together.run(reads, {"t": text}) == [[(text,)], [(f"{text}!".encode(),)], [text]]
        with raw_autocommit(engine) as pooled:
            assert together.run(pooled, {"t": text}) == [
                [(text,)],
                [(f"{text}!".encode(),)],
                [text],
            ]


def test_the_threads_reads_use_it_and_disposing_frees_it(engine):
    if engine.dialect.name != "sqlite":
        pytest.skip("SQLite's reads")
    batch = HotBatch(HotStatement("SELECT CAST(:a AS INTEGER) + 1", scalar=True))
    with raw_reads(engine) as reads:
        assert reads.steps is not None
        assert batch.run(reads, {"a": 41}) == [[(42,)]]
        steps = reads.steps
    assert thread_connections(engine).held().steps is steps
    engine.dispose()
    assert steps.closed and steps.prepared == {}
    with raw_reads(engine) as reads:  # a new connection, with statements of its own
        assert reads.steps is not steps
        assert batch.run(reads, {"a": 1}) == [[(2,)]]
