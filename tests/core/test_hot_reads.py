"""Hot batches outside psycopg's transactions: on PostgreSQL a batch on a raw_reads
connection, or on a raw_autocommit one (its batches carry their own BEGIN and COMMIT),
goes through libpq with the parameters written as literals here
(HotBatch._pg_autocommit), so the literal writer is tested against psycopg's own binding
(a raw_transaction's batch) with values built to break quoting, and the failure paths
keep the connection usable."""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import gc
import os
import sqlite3
import threading
import weakref

import pytest
import sqlalchemy as sa

from cmsshop.db import is_nul_refused, is_retryable_db_error, make_engine
from cmsshop.hotsql import (
    _PREPARED,
    HotBatch,
    HotStatement,
    RawReads,
    SqliteText,
    raw_autocommit,
    raw_reads,
    raw_transaction,
    thread_connections,
)

ECHO = HotBatch(
    "SELECT CAST(:text AS TEXT), CAST(:number AS BIGINT), CAST(:flag AS BOOLEAN), "
    "CAST(:nothing AS TEXT)",
    "SELECT CAST(:text AS TEXT) = :same",
)

PARAMS = {"text": "a", "number": 1, "flag": True, "nothing": None, "same": "a"}

HOSTILE_TEXTS = [
    "plain",
    "it's",
    "''; DROP TABLE products; --",
    "back\\slash \\' \\\\",
    "%(text)s %s %% 100%",
    "$1 $$dollar$$ :name",
    "é ü 中文 \U0001f600 \u202e",
    "line\nbreak\ttab\r",
    "",
]


@pytest.mark.parametrize("text", HOSTILE_TEXTS)
@pytest.mark.parametrize("number", [0, -1, 2**62, -(2**63)])
def test_parameters_reach_the_database_as_they_were_given(engine, text, number):
    params = {"text": text, "number": number, "flag": number > 0, "nothing": None, "same": text}
    with raw_transaction(engine) as conn:  # psycopg's own binding (the reference)
        expected = ECHO.run(conn, params)
    with raw_reads(engine) as conn:
        found = ECHO.run(conn, params)
    assert [list(map(list, rows)) for rows in found] == [list(map(list, r)) for r in expected]
    first, compared = found
    assert list(first[0]) == [text, number, number > 0, None]
    assert bool(compared[0][0]) is True


def test_a_batch_may_run_the_same_statement_twice(engine):
    """Its statement is prepared once in the message (a second PREPARE of the same name
    would fail the whole batch), on both paths, and on a connection that has it already."""
    twice = HotBatch("SELECT CAST(:a AS BIGINT) + 1", "SELECT CAST(:a AS BIGINT) + 1")
    for _ in range(2):
        with raw_reads(engine) as conn:
            assert [rows[0][0] for rows in twice.run(conn, {"a": 41})] == [42, 42]
        with raw_transaction(engine) as conn:
            assert [rows[0][0] for rows in twice.run(conn, {"a": 1})] == [2, 2]


def test_enumerations_are_passed_as_their_values(engine):
    class Kind(enum.StrEnum):
        QUOTED = "it's"

    class Size(enum.IntEnum):
        BIG = 2**40

    params = {**PARAMS, "text": Kind.QUOTED, "same": "it's", "number": Size.BIG}
    with raw_reads(engine) as conn:
        (first, compared) = ECHO.run(conn, params)
    assert list(first[0])[:2] == ["it's", 2**40]
    assert bool(compared[0][0]) is True


def test_times_are_passed_as_the_instant_they_are(engine):
    batch = HotBatch(
        "SELECT CAST(:at AS TIMESTAMP WITH TIME ZONE) = CAST(:utc AS TIMESTAMP WITH TIME ZONE)"
    )
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's literal writer")
    at = dt.datetime(2026, 3, 4, 7, 8, 9, 123456, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    with raw_reads(engine) as conn:
        (((same,),),) = batch.run(conn, {"at": at, "utc": "2026-03-04T05:08:09.123456Z"})
    assert same is True


def test_a_nul_is_refused_as_psycopg_refuses_it(engine):
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's text cannot hold NUL")
    with pytest.raises(Exception) as caught, raw_reads(engine) as conn:
        ECHO.run(conn, {**PARAMS, "text": "a\x00b"})
    assert is_nul_refused(caught.value)


def test_a_value_of_another_type_is_a_programming_error(engine):
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's literal writer")
    with pytest.raises(TypeError, match="float"), raw_reads(engine) as conn:
        ECHO.run(conn, {**PARAMS, "number": 1.5})


def test_an_error_leaves_the_connection_idle_and_the_reads_outside_a_transaction(engine):
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's transaction status")
    import psycopg

    failing = HotBatch("SELECT 1 / CAST(:zero AS INTEGER)")
    with raw_reads(engine) as conn:
        assert ECHO.run(conn, PARAMS)
        # No BEGIN was sent: nothing is left open between two reads.
        assert conn.dbapi.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
        with pytest.raises(psycopg.errors.DivisionByZero):
            failing.run(conn, {"zero": 0})
        assert conn.dbapi.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
        # Its PREPARE went through before the error: it is not sent again.
        assert {name for name, _ in failing.prepare} <= _PREPARED[conn.dbapi]
        assert failing.run(conn, {"zero": 2}) == [[(0,)]]


def test_a_failed_autocommit_batch_leaves_nothing_written_and_the_connection_idle(engine):
    """A raw_autocommit batch carrying its own BEGIN and COMMIT, as licence validate's
    do, with a statement failing between them: psycopg's own error, the failed message's
    transaction rolled back when the block ends (nothing it wrote stays), and the
    connection idle for the next batch."""
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's libpq path")
    import psycopg

    insert = "INSERT INTO rate_counters (key, window_start, count) VALUES (:key, :window, 1)"
    # The same row again: its primary key refuses it.
    duplicate = "INSERT INTO rate_counters (key, window_start, count) VALUES (:key, :window, 2)"
    write_then_fail = HotBatch("BEGIN", insert, duplicate, "COMMIT")
    write = HotBatch("BEGIN", insert, "COMMIT")
    count = HotBatch("SELECT count(*) FROM rate_counters WHERE key = :key")
    params = {"key": "hot-batch", "window": 0}
    status = psycopg.pq.TransactionStatus
    # A pool of one connection: the next block gets the connection the failure left.
    single = make_engine(
        engine.url.render_as_string(hide_password=False), pool_size=1, max_overflow=0
    )
    try:
        with pytest.raises(psycopg.errors.UniqueViolation), raw_autocommit(single) as conn:
            assert conn.dbapi.autocommit  # so the batch goes through libpq
            try:
                write_then_fail.run(conn, params)
            finally:
                left = conn.dbapi.pgconn.transaction_status
        assert left == status.INERROR  # the batch's BEGIN, open after the error
        assert conn.dbapi.pgconn.transaction_status == status.IDLE
        assert not conn.dbapi.autocommit  # as the pool keeps it, for the ORM's transactions
        with raw_autocommit(single) as next_conn:
            assert next_conn.dbapi is conn.dbapi
            assert count.run(next_conn, params) == [[(0,)]]
            assert write.run(next_conn, params) == [None, None, None]
            assert count.run(next_conn, params) == [[(1,)]]
    finally:
        single.dispose()


def test_reads_prepare_again_when_the_session_lost_its_statements(engine):
    """DEALLOCATE ALL between two reads: the next one fails whole, marked retryable
    (the request runs again), and the one after prepares afresh."""
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's prepared statements")
    params = PARAMS
    with raw_reads(engine) as conn:
        expected = ECHO.run(conn, params)
        conn.dbapi.execute("DEALLOCATE ALL")
        conn.dbapi.rollback()
        with pytest.raises(Exception) as caught:
            ECHO.run(conn, params)
        assert is_retryable_db_error(caught.value)
        assert ECHO.run(conn, params) == expected


def test_a_connection_that_served_reads_is_freed_when_dropped(engine):
    """What the libpq path keeps per connection (its escaping, its row loader, which
    refers to the connection) goes with the connection: a pool that drops connections
    (recycled, invalidated) does not keep them alive."""
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's libpq path")
    import psycopg

    url = engine.url.set(drivername="postgresql")
    dbapi = psycopg.connect(url.render_as_string(hide_password=False))
    assert ECHO.run(RawReads("postgresql", dbapi), PARAMS)[1] == [(True,)]
    freed = weakref.ref(dbapi)
    dbapi.close()
    del dbapi
    gc.collect()
    assert freed() is None


# --- scalar statements: one SQLite statement, the same answers ----------------------------

SCALARS = [
    HotStatement(
        "SELECT count(*) FROM (SELECT 1 AS one UNION ALL SELECT 2) AS t WHERE :n > 0", scalar=True
    ),
    HotStatement("SELECT CAST(:text AS TEXT) WHERE :n > 1", scalar=True),  # no row: n <= 1
    HotStatement("SELECT '[1, \"a\", null]' WHERE :n > 2", json_text=True),
]


def scalar_of(rows: list):
    """How callers read a scalar statement's rows: its value, or None for no row."""
    return rows[0][0] if rows else None


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_scalar_statements_in_one_batch_answer_as_they_do_alone(engine, n):
    params = {"n": n, "text": "it's :n ?1 ?2"}
    together = HotBatch(*SCALARS)
    for _ in range(2):  # the first run and the next (nothing is learnt between them)
        with raw_reads(engine) as conn:
            found = together.run(conn, params)
            alone = [HotBatch(statement).run(conn, params)[0] for statement in SCALARS]
        count, text, parsed = found
        assert scalar_of(count) == scalar_of(alone[0]) == (2 if n > 0 else 0)
        assert scalar_of(text) == scalar_of(alone[1]) == (params["text"] if n > 1 else None)
        assert parsed == alone[2] == ([1, "a", None] if n > 2 else [])


@contextlib.contextmanager
def executed_on(conn):
    """The SQL SQLite runs on the raw connection of ``conn`` inside the block."""
    executed: list[str] = []
    conn.dbapi.set_trace_callback(executed.append)
    try:
        yield executed
    finally:
        conn.dbapi.set_trace_callback(None)


def test_on_sqlite_a_batch_of_scalars_is_one_statement_and_others_run_one_by_one(engine):
    """Python's sqlite3 releases the GIL about ten times a statement; a batch whose
    statements each give at most one value runs as ``SELECT (s1), (s2), ...``."""
    if engine.dialect.name != "sqlite":
        pytest.skip("SQLite's statements (PostgreSQL gets one message either way)")
    mixed = HotBatch(SCALARS[0], "SELECT 1 AS a UNION ALL SELECT 2 ORDER BY a")
    with raw_reads(engine) as conn, executed_on(conn) as executed:
        count, text, parsed = HotBatch(*SCALARS).run(conn, {"n": 3, "text": "x"})
        assert [count, text, parsed] == [[(2,)], [("x",)], [1, "a", None]]
        assert len(executed) == 1 and executed[0].startswith("SELECT (SELECT count(*)")
        executed.clear()
        assert mixed.run(conn, {"n": 1}) == [[(2,)], [(1,), (2,)]]
        assert len(executed) == 2


def test_sqlite_text_numbers_each_name_once_and_binds_by_position():
    text = SqliteText("SELECT :a, :b_2, :a, strftime('%H:%M', x) FROM t WHERE y = ':'")
    assert text.text == "SELECT ?1, ?2, ?1, strftime('%H:%M', x) FROM t WHERE y = ':'"
    assert text.names == ("a", "b_2")
    assert text.call({"b_2": 2, "a": 1, "unused": 3}) == (text.text, (1, 2))
    with pytest.raises(KeyError):
        text.call({"a": 1})


# --- the thread's own read connection (hotsql.ThreadConnections) -------------------------

COUNT_ONE = HotBatch("SELECT 1")


def read_on(engine):
    """A read on this thread's connection: its DBAPI connection."""
    with raw_reads(engine) as conn:
        assert COUNT_ONE.run(conn, {}) == [[(1,)]]
        return conn.dbapi


def is_closed(dbapi) -> bool:
    if hasattr(dbapi, "closed"):  # psycopg
        return bool(dbapi.closed)
    try:
        dbapi.execute("SELECT 1")
    except sqlite3.ProgrammingError:
        return True
    return False


def in_thread(function):
    found = []
    thread = threading.Thread(target=lambda: found.append(function()))
    thread.start()
    thread.join()
    return found[0]


def test_reads_run_on_the_threads_own_connection_without_the_pool(engine):
    checkouts = []
    sa.event.listen(engine, "checkout", lambda *args: checkouts.append(1))
    first = read_on(engine)
    assert read_on(engine) is first and len(checkouts) <= 1  # taken from the pool once
    other = in_thread(lambda: read_on(engine))
    assert other is not first
    # The thread ended: its connection is closed with it, not left open.
    gc.collect()
    assert is_closed(other) and not is_closed(first)


def test_an_error_of_the_request_keeps_the_connection(engine):
    first = read_on(engine)
    with pytest.raises(LookupError), raw_reads(engine) as conn:
        raise LookupError("a 404 raised inside the block")
    assert conn.dbapi is first and read_on(engine) is first


def test_disposing_the_pool_closes_every_threads_connection(engine):
    first = read_on(engine)
    engine.dispose()
    assert is_closed(first)
    assert not is_closed(read_on(engine))


def test_a_connection_the_server_dropped_is_replaced_and_the_others_retired(engine):
    """A restart (here one connection ended by the server): the read fails once, marked
    to be run again; the next read, and every other thread's, is on a new connection."""
    if engine.dialect.name != "postgresql":
        pytest.skip("a server that drops connections")
    first = read_on(engine)
    others = thread_connections(engine)
    generation = others.generation
    with engine.connect() as admin:
        admin.exec_driver_sql(f"SELECT pg_terminate_backend({first.info.backend_pid})")
    with pytest.raises(Exception) as caught:
        read_on(engine)
    assert is_retryable_db_error(caught.value)
    assert others.generation == generation + 1  # every thread's is retired
    assert read_on(engine) is not first


def test_a_dropped_read_connection_makes_the_pool_replace_its_own(engine):
    """A restart found by a read: the pool's connections, dropped with it, are replaced
    at their next checkout instead of failing one more request each."""
    if engine.dialect.name != "postgresql":
        pytest.skip("a server that drops connections")
    single = make_engine(
        engine.url.render_as_string(hide_password=False), pool_size=1, max_overflow=0
    )
    try:
        read = read_on(single)
        with single.connect() as conn:  # back in the pool afterwards
            pooled = conn.connection.driver_connection.info.backend_pid
        with engine.connect() as admin:
            admin.exec_driver_sql(
                f"SELECT pg_terminate_backend({read.info.backend_pid}), "
                f"pg_terminate_backend({pooled})"
            )
        with pytest.raises(Exception) as caught:
            read_on(single)
        assert is_retryable_db_error(caught.value)
        with single.connect() as conn:
            assert conn.exec_driver_sql("SELECT pg_backend_pid()").scalar() != pooled
    finally:
        single.dispose()


def test_a_forked_child_never_closes_its_parents_connection(engine):
    """A process forked after a read (a pre-fork server with the app loaded first): the
    child reads on a connection of its own, and letting go of the inherited one does not
    end the parent's session (libpq's goodbye would, on the shared socket)."""
    if engine.dialect.name != "postgresql":
        pytest.skip("a connection whose close reaches the server")
    first = read_on(engine)
    pid = os.fork()
    if pid == 0:  # the child: what it does is reported by its exit status only
        status = 1
        try:
            engine.dispose(close=False)  # as a forked worker must: the pool is the parent's
            status = 0 if read_on(engine) is not first else 2
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert read_on(engine) is first  # still the parent's, still answering


# --- PostgreSQL's plans: an unsearched page planned once, not on every call --------------

# PostgreSQL plans this afresh on every call by default: priced for a tenth of the rows
# under an unknown LIMIT, its generic plan never looks cheaper than a custom one.
PAGE_SQL = "SELECT g FROM generate_series(1, 100000) AS g ORDER BY g DESC LIMIT :limit"


def plans_of(dbapi, batch: HotBatch) -> tuple[int, int]:
    """(generic, custom) plans PostgreSQL made for the batch's one statement so far."""
    ((name, _),) = batch.prepare
    return dbapi.execute(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = %s",
        (name,),
    ).fetchone()


def show_plan_mode(dbapi) -> str:
    return dbapi.execute("SHOW plan_cache_mode").fetchone()[0]


def test_a_batch_asking_for_generic_plans_is_planned_once(engine):
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's plan cache")
    generic = HotBatch(PAGE_SQL, generic_plans=True)
    chosen = HotBatch(PAGE_SQL + " OFFSET 0")  # another statement: PostgreSQL's choice
    with raw_reads(engine) as conn:
        for _ in range(8):
            assert chosen.run(conn, {"limit": 2}) == [[(100000,), (99999,)]]
            assert generic.run(conn, {"limit": 2}) == [[(100000,), (99999,)]]
        assert plans_of(conn.dbapi, generic) == (8, 0)
        assert plans_of(conn.dbapi, chosen) == (0, 8)  # what the listings used to cost


def test_the_plan_mode_is_set_again_after_a_failed_message_and_never_on_the_pool(engine):
    """A message that failed rolled its SET back with it: the next batch sets it again.
    A pooled connection (raw_autocommit's, the ORM's afterwards) is never switched."""
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's plan cache")
    import psycopg

    generic = HotBatch(PAGE_SQL, generic_plans=True)
    failing = HotBatch("SELECT 1 / CAST(:zero AS INTEGER)", generic_plans=True)
    with raw_reads(engine) as conn:
        HotBatch("SELECT 1").run(conn, {})
        assert show_plan_mode(conn.dbapi) == "auto"
        with pytest.raises(psycopg.errors.DivisionByZero):
            failing.run(conn, {"zero": 0})
        assert show_plan_mode(conn.dbapi) == "auto"  # rolled back with the message
        generic.run(conn, {"limit": 1})
        assert show_plan_mode(conn.dbapi) == "force_generic_plan"
        HotBatch("SELECT 2").run(conn, {})
        assert show_plan_mode(conn.dbapi) == "auto"
    with raw_autocommit(engine) as conn:
        generic.run(conn, {"limit": 1})
        assert show_plan_mode(conn.dbapi) == "auto"


def test_a_threads_reads_plan_without_parallel_workers_or_jit_and_the_pool_keeps_its_own(engine):
    """A generic plan priced for a tenth of the rows a LIMIT could take chose a parallel
    sort of the whole catalogue and JIT compiling at 100,000 products (bench/uncached.py):
    the thread's read connection plans without either; the pool's connections keep the
    server's settings."""
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's parallel query and JIT")
    names = ["max_parallel_workers_per_gather", "jit"]

    def settings(dbapi) -> list:
        return [dbapi.execute(f"SHOW {name}").fetchone()[0] for name in names]

    with raw_reads(engine) as conn:
        assert settings(conn.dbapi) == ["0", "off"]
    with raw_autocommit(engine) as conn:
        server = [
            conn.dbapi.execute(
                "SELECT reset_val FROM pg_settings WHERE name = %s", [name]
            ).fetchone()[0]
            for name in names
        ]
        assert settings(conn.dbapi) == server
