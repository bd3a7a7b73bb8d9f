"""A thread's PostgreSQL reads through libpq's C API (cmsshop.pgexchange): the same rows
and the same exceptions as psycopg's own path gives (a raw_autocommit batch, which stays
on psycopg), the answer bound kept, and the GIL let go while the server works. The
other behaviours of the thread's connections (prepare again, a dropped connection, the
plan mode) are tested through it in tests/core/test_hot_reads.py."""

from __future__ import annotations

import threading
import time

import pytest

from cmsshop import hotsql, pgexchange
from cmsshop.db import AnswerTimeout, is_database_unavailable
from cmsshop.hotsql import HotBatch, raw_autocommit, raw_reads, thread_connections


@pytest.fixture
def pg(engine):
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's libpq")
    return engine


def both_ways(engine, batch: HotBatch, params: dict) -> tuple[list, list]:
    """The batch's results through the exchange (a thread's reads) and through psycopg
    (an autocommit connection of the pool)."""
    with raw_reads(engine) as conn:
        assert conn.exchange is not None  # else this file tests nothing
        through_exchange = batch.run(conn, params)
    with raw_autocommit(engine) as conn:
        through_psycopg = batch.run(conn, params)
    return through_exchange, through_psycopg


def test_the_threads_reads_use_the_exchange_on_this_machine(pg):
    """Linux with psycopg's binary wheel (one libpq loaded): the exchange is on, so the
    reads of every PostgreSQL test in the suite go through it."""
    held = thread_connections(pg).held()
    assert isinstance(held.exchange, pgexchange.Exchange)
    assert held.exchange.dbapi is held.dbapi


TYPES = HotBatch(
    "SELECT CAST(:small AS SMALLINT), CAST(:int AS INTEGER), CAST(:big AS BIGINT), "
    "CAST(:text AS TEXT), CAST(:text AS VARCHAR(500)), CAST(:flag AS BOOLEAN), "
    "CAST(:none AS TEXT), CAST('' AS TEXT), CAST(:at AS TIMESTAMP WITH TIME ZONE), "
    "CAST(:at AS DATE), CAST('12.50' AS NUMERIC(10, 2)), CAST(0.1 AS DOUBLE PRECISION), "
    "CAST('{\"a\": [1, null]}' AS JSON), CAST('{\"a\": 1}' AS JSONB), "
    "CAST('\\x00ff' AS BYTEA), ARRAY[1, 2, NULL], "
    "CAST('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' AS UUID)",
    "SELECT n, CAST(n AS TEXT), CASE WHEN n % 3 = 0 THEN NULL ELSE n END "
    "FROM generate_series(1, CAST(:rows AS INTEGER)) AS n",
    "SELECT 1 WHERE FALSE",
)


@pytest.mark.parametrize("text", ["plain", "it's é 中文 \U0001f600", "", "line\nbreak"])
def test_rows_are_what_psycopg_gives(pg, text):
    params = {
        "small": -7, "int": 2**31 - 1, "big": -(2**63), "text": text, "flag": False,
        "none": None, "at": "2026-03-04T05:08:09.123456Z", "rows": 2000,
    }  # fmt: skip
    through_exchange, through_psycopg = both_ways(pg, TYPES, params)
    assert through_exchange == through_psycopg
    values, series, nothing = through_exchange
    assert values[0][:8] == (-7, 2**31 - 1, -(2**63), text, text, False, None, "")
    assert len(series) == 2000 and series[2] == (3, "3", None)
    assert nothing == []


@pytest.mark.parametrize("text", ["plain", "€49.00 it's é 中文 \U0001f600", ""])
def test_a_utf8_statement_gives_the_bytes_received(pg, text):
    """A ``utf8`` statement's text comes as UTF-8 bytes, read as received through the
    exchange (no decoding), encoded on psycopg's path: the same bytes either way, as do
    a ``json_text`` statement's parsed list and the other statements' values around
    them."""
    from cmsshop.hotsql import HotStatement

    batch = HotBatch(
        "SELECT CAST(:text AS TEXT)",
        HotStatement("SELECT CAST(:text AS TEXT) || '|' || CAST(:number AS TEXT)", utf8=True),
        HotStatement("SELECT CAST(json_build_array(CAST(:text AS TEXT)) AS TEXT)", json_text=True),
        HotStatement("SELECT CAST(NULL AS TEXT)", utf8=True),
    )
    params = {"text": text, "number": 7}
    through_exchange, through_psycopg = both_ways(pg, batch, params)
    assert through_exchange == through_psycopg
    plain, raw, parsed, nothing = through_exchange
    assert plain == [(text,)]
    assert raw == [(f"{text}|7".encode(),)] and isinstance(raw[0][0], bytes)
    assert parsed == [text]
    assert nothing == [(None,)]


def test_raw_answers_are_the_bytes_libpq_received(pg):
    """Exchange.run reads the answers numbered in ``raw`` without any loader (every value
    as the text format's bytes); the others through psycopg's."""
    with raw_reads(pg) as conn:
        dbapi = conn.dbapi
        transformer = hotsql._libpq_tools(dbapi).transformer
        with dbapi.lock:
            answers = conn.exchange.run(
                "SELECT CAST('€1' AS TEXT), 7; SELECT CAST('€1' AS TEXT), 7".encode(),
                transformer,
                {1},
            )
    assert answers == [
        (pgexchange.TUPLES_OK, [("€1", 7)]),
        (pgexchange.TUPLES_OK, [("€1".encode(), b"7")]),
    ]


def test_a_message_larger_than_the_socket_takes_at_once_is_sent_whole(pg):
    """A query of a few megabytes: libpq's flush leaves some of it for later, and the
    exchange waits for the socket to take it."""
    big = HotBatch("SELECT length(CAST(:text AS TEXT)), md5(CAST(:text AS TEXT))")
    text = "x'y" * 2_000_000
    through_exchange, through_psycopg = both_ways(pg, big, {"text": text})
    assert through_exchange == through_psycopg
    assert through_exchange[0][0][0] == len(text)


FAILING = HotBatch("SELECT 1 / CAST(:zero AS INTEGER)")


def test_a_failed_statement_raises_psycopgs_exception(pg):
    import psycopg

    raised = []
    for way in (raw_reads, raw_autocommit):
        with way(pg) as conn, pytest.raises(psycopg.Error) as caught:
            FAILING.run(conn, {"zero": 0})
        raised.append(caught.value)
    through_exchange, through_psycopg = raised
    assert type(through_exchange) is type(through_psycopg) is psycopg.errors.DivisionByZero
    assert str(through_exchange) == str(through_psycopg) == "division by zero"
    assert through_exchange.sqlstate == "22012"
    # The connection is idle and reads on.
    with raw_reads(pg) as conn:
        assert conn.dbapi.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert FAILING.run(conn, {"zero": 4}) == [[(0,)]]


def test_an_sqlstate_psycopg_does_not_know_gets_its_class_base(pg):
    """A function's own error code (class P0, PL/pgSQL): the class psycopg would pick."""
    import psycopg

    with raw_reads(pg) as conn:
        # pg_temp: the function lives in this session (the thread's connection) only.
        conn.dbapi.execute(
            "CREATE OR REPLACE FUNCTION pg_temp.refuse(reason TEXT) RETURNS INTEGER "
            "LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'P0999', "
            "MESSAGE = reason; END $$"
        )
        with pytest.raises(psycopg.Error) as caught:
            HotBatch("SELECT pg_temp.refuse(:reason)").run(conn, {"reason": "nope: it's odd"})
    assert type(caught.value) is psycopg.errors.get_base_exception("P0999")
    assert str(caught.value).startswith("nope: it's odd\nCONTEXT:")  # as psycopg says it


def test_no_answer_within_the_bound_gives_up_and_closes_the_connection(pg):
    """The server works longer than the connection's answer bound: the read raises
    within the bound (503 database_unavailable for a request), the connection is closed
    (its exchange was cut in the middle), and the next read is on a new one."""
    sleeping = HotBatch("SELECT pg_sleep(CAST(:seconds AS DOUBLE PRECISION))")
    with raw_reads(pg) as conn:
        first = conn.dbapi
        bound = first.answer_timeout
    first.answer_timeout = 0.3
    try:
        started = time.monotonic()
        with pytest.raises(AnswerTimeout) as caught, raw_reads(pg) as conn:
            sleeping.run(conn, {"seconds": 5})
        assert 0.3 <= time.monotonic() - started < 2
        assert is_database_unavailable(caught.value)
        assert first.broken or first.closed
    finally:
        first.answer_timeout = bound
    with raw_reads(pg) as conn:
        assert conn.dbapi is not first
        assert sleeping.run(conn, {"seconds": 0}) == [[("",)]]


def test_other_threads_run_while_a_read_waits_for_the_server(pg):
    """The GIL is let go while the server works: a thread counting in Python counts about
    as much during a read of a quarter of a second as during a quarter of a second of
    sleep (held, it would count only in the switch intervals around the read)."""
    sleeping = HotBatch("SELECT pg_sleep(CAST(:seconds AS DOUBLE PRECISION))")
    with raw_reads(pg) as conn:  # the connection opened and the statement prepared
        sleeping.run(conn, {"seconds": 0})

    def counted_during(wait) -> int:
        counted, stop, waiting = [0], threading.Event(), threading.Event()

        def count() -> None:
            while not stop.is_set():
                if waiting.is_set():
                    counted[0] += 1

        counter = threading.Thread(target=count)
        counter.start()
        try:
            waiting.set()
            wait()
            waiting.clear()
        finally:
            stop.set()
            counter.join()
        return counted[0]

    def read() -> None:
        with raw_reads(pg) as conn:
            sleeping.run(conn, {"seconds": "0.25"})

    asleep = counted_during(lambda: time.sleep(0.25))
    reading = counted_during(read)
    assert reading > asleep / 3, (reading, asleep)


def test_a_connection_not_reachable_through_libpq_stays_on_psycopg(pg, monkeypatch):
    """Two copies of libpq in the process (which one psycopg uses is unknown), or a
    connection psycopg opened blocking: no exchange, and the reads go on through psycopg."""
    with raw_reads(pg) as conn:
        dbapi = conn.dbapi
    monkeypatch.setattr(pgexchange, "_api", None)
    monkeypatch.setattr(pgexchange, "_libpq_paths", lambda: {"/a/libpq.so.5", "/b/libpq.so.5"})
    assert pgexchange.for_connection(dbapi) is None
    monkeypatch.undo()
    assert pgexchange.for_connection(dbapi) is not None
    dbapi.pgconn.nonblocking = 0
    try:
        assert pgexchange.for_connection(dbapi) is None
    finally:
        dbapi.pgconn.nonblocking = 1


def test_a_value_no_loader_reads_fails_the_read_and_leaves_the_connection_usable(pg):
    """Every answer of the message is read (and freed) before the error is raised, so the
    connection is not left in the middle of an exchange."""
    two = HotBatch("SELECT CAST(:text AS TEXT)", "SELECT CAST(:number AS BIGINT)")
    with raw_reads(pg) as conn:
        assert two.run(conn, {"text": "a", "number": 1}) == [[("a",)], [(1,)]]
        exchange = conn.exchange

        def refuse(data):
            raise ValueError(f"cannot read {bytes(data)!r}")

        text_oid = 25
        kept = exchange.loaders[text_oid]
        exchange.loaders[text_oid] = refuse
        try:
            with pytest.raises(ValueError, match="cannot read b'a'"):
                two.run(conn, {"text": "a", "number": 1})
        finally:
            exchange.loaders[text_oid] = kept
        assert two.run(conn, {"text": "b", "number": 2}) == [[("b",)], [(2,)]]
