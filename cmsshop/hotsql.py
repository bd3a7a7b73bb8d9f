"""Plain SQL on the DBAPI cursor, for the few statements every hot request runs.

Measured (docs/licensing.md, Performance): building the execution context of a Core
statement costs about five times the database work of a small write, and the licensing
validate call and the rate limiter must stay within a few times the cost of a bare route.
So those writes are plain SQL written once for both dialects (``:name`` parameters;
psycopg gets ``%(name)s``), run inside the SQLAlchemy transaction of the connection they
are given, or in a :func:`raw_transaction` of their own. Everything else uses the ORM
or Core.
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import datetime as dt
import hashlib
import os
import re
import threading
import weakref
from typing import Any

import orjson
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from cmsshop import pgexchange, sqlitestep

# The dialects every hot statement is written for (the SQL of a shape, per dialect).
DIALECTS = ("sqlite", "postgresql")
_NAMED = re.compile(r":(\w+)")


class SqliteText:
    """A statement's SQLite text with ``?N`` for each ``:name`` (one number a name) and
    the names in number order: Python's sqlite3 binds a tuple by position, while for a
    dict it asks SQLite each parameter's name, releasing the GIL for every call (3.11;
    see HotBatch._sqlite_one for what a release costs)."""

    def __init__(self, sql: str):
        self.source = sql  # with its names
        numbers: dict[str, str] = {}

        def number(match: re.Match) -> str:
            return numbers.setdefault(match[1], f"?{len(numbers) + 1}")

        self.text = _NAMED.sub(number, sql)
        self.names = tuple(numbers)

    def call(self, params: dict[str, Any]) -> tuple[str, tuple]:
        """``execute``'s arguments for ``params`` (a statement's missing name: KeyError)."""
        return self.text, tuple(params[name] for name in self.names)


class HotStatement:
    """One SQL statement for both dialects, run on the DBAPI cursor of ``conn``.

    ``json_rows`` (a SELECT; SQLite only, see :meth:`sqlite_rows`): in a :class:`HotBatch`
    its rows come back as one JSON array, so they cost one step of the SQLite engine,
    not one a row. Python's sqlite3 releases the GIL around every step; with a server's
    eight threads on two cores each release hands the GIL to another thread, and a
    20-product page's ~80 steps doubled the CPU the page cost (bench/uncached.py).
    The rows are lists (orjson's), in the statement's order: only a statement whose
    ORDER BY comes with a LIMIT keeps its order through the aggregate (SQLite drops an
    ORDER BY from a FROM subquery without one), so the callers order others themselves.
    """

    def __init__(
        self,
        sql: str,
        *,
        json_rows: bool = False,
        json_text: bool = False,
        scalar: bool = False,
        utf8: bool = False,
    ):
        self.sql = {"sqlite": sql, "postgresql": _NAMED.sub(r"%(\1)s", sql)}
        self.json_rows = json_rows
        # The statement builds its rows itself, as one JSON array in one text column of
        # one row (NULL: none, as PostgreSQL's json_agg of nothing): a batch gives the
        # parsed list.
        self.json_text = json_text
        # Its text is sent as it is (an API body the database wrote): a batch gives it
        # as UTF-8 bytes, on PostgreSQL the bytes libpq received (HotBatch._pg_autocommit).
        # Decoding a page of 20 products (20 KB with a euro sign in it) and encoding it
        # again cost 27 µs, a tenth of the request.
        self.utf8 = utf8
        # Its text is read as bytes where the reader can (json_text too: orjson reads
        # bytes as well).
        self.as_bytes = utf8 or json_text
        # At most one row of one column (a count, a version, a JSON text): on SQLite a
        # batch of such statements runs as one (HotBatch).
        self.scalar = scalar or json_text or utf8
        self.sqlite = SqliteText(sql)  # what runs on SQLite (the named text is for people)
        self._sqlite_wrapped: SqliteText | None = None  # the wrapped SQL, once columns are known

    def sqlite_rows(self, dbapi, params: dict[str, Any], steps=None) -> list:
        """The statement's rows on SQLite: once its columns are known (the first run
        reads them), as ``json_group_array(json_array(columns))`` over it, parsed by
        orjson. Columns with the same name, a BLOB or a REAL (JSON keeps 15 digits of
        it) in the first run's rows: read row by row. ``steps``: a thread's reads
        (cmsshop.sqlitestep) run the wrapped statement."""
        wrapped = self._sqlite_wrapped
        if wrapped is not None:
            if steps is not None:
                ((text,),) = steps.rows(*wrapped.call(params), one=True)
                return orjson.loads(text)
            cursor = dbapi.execute(*wrapped.call(params))
            (text,) = cursor.fetchone()
            cursor.close()
            return orjson.loads(text)
        cursor = dbapi.execute(*self.sqlite.call(params))
        rows = cursor.fetchall()
        names = [column[0] for column in cursor.description or ()]
        cursor.close()
        if (
            names
            and len(set(names)) == len(names)
            and not any(isinstance(value, bytes | float) for row in rows for value in row)
        ):
            columns = ", ".join('"' + name.replace('"', '""') + '"' for name in names)
            self._sqlite_wrapped = SqliteText(
                f"SELECT json_group_array(json_array({columns})) FROM ({self.sql['sqlite']})"  # noqa: S608 - our own constant SQL
            )
        return rows

    def run(self, conn: Connection | RawTransaction, params: dict[str, Any]):
        name, dbapi = driver(conn)
        announce(conn, self.sql[name], params)
        cursor = dbapi.cursor()
        try:
            if name == "sqlite":
                cursor.execute(*self.sqlite.call(params))
            else:
                cursor.execute(self.sql[name], params)
        except Exception as exc:
            _forget_on(conn, exc)
            raise
        return cursor


_TRANSACTION_CONTROL = {"BEGIN", "COMMIT", "ROLLBACK"}
_PLACEHOLDER = re.compile(r"%\((\w+)\)s")
# The batch statements PREPAREd on each PostgreSQL connection (by the DBAPI connection;
# prepared statements live as long as the server session and survive a rollback).
_PREPARED: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
# Each PostgreSQL connection's plan_cache_mode as the batches last set it (HotBatch
# ``generic_plans``); absent: not known (new, or a message that set it failed, which
# rolled the SET back with the rest).
_PLAN_MODE: weakref.WeakKeyDictionary[Any, bytes] = weakref.WeakKeyDictionary()
_GENERIC, _AUTO = b"force_generic_plan", b"auto"
_FIRST = (0,)  # the first column


class HotBatch:
    """Statements sent together: on PostgreSQL as one simple-protocol query (psycopg's
    ClientCursor binds the parameters, escaped, on the client), so the batch costs one
    network round trip whatever its length; on SQLite (in-process) one by one. The
    statements share one parameter dict. ``run`` gives each statement's rows (None for
    a statement that returns none).

    On PostgreSQL each statement is ``PREPARE``d on a connection the first time a batch
    runs there (one extra round trip, once per connection), and the batch sends
    ``EXECUTE name(args)``: PostgreSQL then plans it once per connection, not on every
    call (planning the validate lookup cost PostgreSQL three times executing it). The
    batch is still one message, so the server never waits for the rest of it.
    ``BEGIN``/``COMMIT`` are sent as they are.

    A ``json_text`` statement's result is the list its JSON text holds, a ``utf8`` one's
    value is bytes (see :class:`HotStatement`).

    ``generic_plans`` (on a :class:`RawReads` connection, see :meth:`_pg_autocommit`): the
    batch's EXECUTEs always take the prepared statements' generic plans
    (``plan_cache_mode``, set on the connection in the batch's own message when the
    connection's last batch wanted the other). PostgreSQL otherwise plans a statement
    with a ``LIMIT :limit`` afresh on every call: priced for a tenth of the table's rows,
    the generic plan never looks cheaper than a custom one, and planning the list page
    cost PostgreSQL more than half of running it (0.29 of 0.47 ms). A search's pattern
    must then be one the plan does not depend on (services.store.listing.search_sql).
    """

    def __init__(self, *statements: HotStatement | str, generic_plans: bool = False):
        self.plan_mode = _GENERIC if generic_plans else _AUTO
        self.statements = [HotStatement(s) if isinstance(s, str) else s for s in statements]
        self._one: SqliteText | None = None  # see _sqlite_one
        # Only a batch of two or more one-value statements (json_rows ones once wrapped)
        # can run as one: the others never look again.
        self._may_be_one = len(self.statements) > 1 and all(
            s.scalar or s.json_rows for s in self.statements
        )
        self.prepare: list[tuple[str, str]] = []  # (name, PREPARE ...)
        parts = []
        for statement in self.statements:
            sql = statement.sql["postgresql"]
            if sql.strip().upper() in _TRANSACTION_CONTROL:
                parts.append(sql)
                continue
            names = list(dict.fromkeys(_PLACEHOLDER.findall(sql)))
            numbers = {n: f"${i}" for i, n in enumerate(names, 1)}
            numbered = _PLACEHOLDER.sub(lambda m, numbers=numbers: numbers[m.group(1)], sql)
            name = "cmsshop_" + hashlib.sha256(numbered.encode()).hexdigest()[:20]
            if all(name != known for known, _ in self.prepare):
                # Once per batch: a second PREPARE of the name in the message would fail.
                self.prepare.append((name, f"PREPARE {name} AS {numbered}"))
            args = ", ".join(f"%({n})s" for n in names)
            parts.append(f"EXECUTE {name}({args})" if names else f"EXECUTE {name}")
        self.pg_sql = "; ".join(parts)
        # For _pg_autocommit: the same text with each parameter a bytes %-placeholder (the
        # only % in it: the statements themselves are in the PREPAREs).
        self._pg_names = [(n, n.encode()) for n in dict.fromkeys(_PLACEHOLDER.findall(self.pg_sql))]
        self._pg_bytes = self.pg_sql.encode()
        # The statements whose text is wanted as bytes, by position.
        self._as_bytes = frozenset(i for i, s in enumerate(self.statements) if s.as_bytes)

    def run(self, conn: Connection | RawTransaction, params: dict[str, Any]) -> list:
        try:
            return self._run(conn, params)
        except Exception as exc:
            _forget_on(conn, exc)
            raise

    def _run(self, conn: Connection | RawTransaction, params: dict[str, Any]) -> list:
        name, dbapi = driver(conn)
        for statement in self.statements:
            announce(conn, statement.sql[name], params)
        results = []
        reads = isinstance(conn, RawReads)
        if name == "postgresql" and (reads or dbapi.autocommit):
            exchange = conn.exchange if reads else None
            return self._parsed(self._pg_autocommit(dbapi, params, reads, exchange))
        if name == "postgresql":
            import psycopg  # noqa: PLC0415 - PostgreSQL installs only

            prepared = _PREPARED.get(dbapi)
            if prepared is None:
                prepared = _PREPARED[dbapi] = set()
            for statement_name, sql in self.prepare:
                if statement_name not in prepared:
                    with dbapi.cursor() as cursor:
                        cursor.execute(sql)  # no parameters: sent as it is
                    prepared.add(statement_name)
            rows_ok = psycopg.pq.ExecStatus.TUPLES_OK
            with psycopg.ClientCursor(dbapi) as cursor:
                try:
                    cursor.execute(self.pg_sql, params)
                except psycopg.errors.InvalidSqlStatementName as exc:
                    # Someone dropped the session's prepared statements (DEALLOCATE ALL,
                    # DISCARD ALL, a pooler handing over another session): the batch
                    # failed whole (one implicit transaction, or the caller's, which
                    # rolls back). Prepare afresh when the request runs again.
                    _PREPARED.pop(dbapi, None)
                    exc.cmsshop_connection_lost = True  # retryable (cmsshop.db)
                    raise
                while True:
                    # The result's status, not cursor.description (which builds a Column
                    # object per column on every call: a tenth of a validate).
                    returned = cursor.pgresult is not None and cursor.pgresult.status == rows_ok
                    results.append(cursor.fetchall() if returned else None)
                    if not cursor.nextset():
                        break
            return self._parsed(results)
        steps = conn.steps if reads else None
        one = self._sqlite_one()
        if one is not None:
            return self._parsed(self._sqlite_scalars(dbapi, steps, one, params))
        for statement in self.statements:
            if statement.json_rows:
                results.append(statement.sqlite_rows(dbapi, params, steps))
                continue
            if steps is not None:  # reads: SELECTs, whose rows are a list (maybe empty)
                raw = _FIRST if statement.as_bytes else ()
                results.append(
                    steps.rows(*statement.sqlite.call(params), one=statement.scalar, raw=raw)
                )
                continue
            cursor = dbapi.cursor()
            cursor.execute(*statement.sqlite.call(params))
            results.append(cursor.fetchall() if cursor.description else None)
            cursor.close()
        return self._parsed(results)

    def _sqlite_one(self) -> SqliteText | None:
        """The batch as one SQLite statement, ``SELECT (s1), (s2), ...``, when it has two
        or more statements and each gives at most one row of one column (``scalar``, or
        ``json_rows`` once wrapped): Python's sqlite3 releases the GIL about ten times a
        statement (binding, each step, each column's type, the last row id, the reset),
        and with the server's threads waiting for it each release is a hand-over (the
        article search cost a tenth more CPU as two statements; bench/uncached.py)."""
        if self._one is not None or not self._may_be_one:
            return self._one
        parts = []
        for statement in self.statements:
            if not statement.json_rows:
                parts.append(statement.sql["sqlite"])
            elif statement._sqlite_wrapped is not None:
                parts.append(statement._sqlite_wrapped.source)
            else:
                return None  # its columns are not known yet
        self._one = SqliteText("SELECT " + ", ".join(f"({part})" for part in parts))
        return self._one

    def _sqlite_scalars(self, dbapi, steps, one: SqliteText, params: dict[str, Any]) -> list:
        """Each statement's rows from the one statement's row, as they would come alone
        (a scalar statement with no row gives NULL there: ``[(None,)]``, which every
        caller reads as no row)."""
        if steps is not None:  # the statements' texts wanted as bytes, by column
            (values,) = steps.rows(*one.call(params), one=True, raw=self._as_bytes)
        else:
            cursor = dbapi.execute(*one.call(params))
            values = cursor.fetchone()
            cursor.close()
        return [
            (orjson.loads(value) if value else []) if statement.json_rows else [(value,)]
            for statement, value in zip(self.statements, values, strict=True)
        ]

    def _pg_autocommit(self, dbapi, params: dict[str, Any], reads: bool, exchange=None) -> list:
        """The batch outside any transaction of psycopg's -- on a :class:`RawReads`
        connection, or one in autocommit (:func:`raw_autocommit`: its batches carry
        their own BEGIN and COMMIT) -- through libpq itself: the parameters written as
        literals here, the statements not yet PREPAREd on the connection sent in the same
        message, the rows read by psycopg's Transformer. psycopg's cursor would do the same
        work with about a third more CPU (its query parser, dumpers and prepare
        bookkeeping; bench/uncached.py). No BEGIN is added: the message is one implicit
        transaction, as in autocommit.

        A multi-statement message stops at its first error; a PREPARE before it stays
        (PostgreSQL's prepared statements are not transactional). ``reads``: on a
        thread's read connection, the only ones whose ``plan_cache_mode`` a batch sets
        (a pooled connection keeps PostgreSQL's choice for the ORM's statements).
        ``exchange``: a thread's read connection's (cmsshop.pgexchange) sends the message
        and reads the answers, letting go of the GIL only while it waits for them."""
        import psycopg  # noqa: PLC0415 - PostgreSQL installs only
        from psycopg import generators  # noqa: PLC0415

        tools = _libpq_tools(dbapi)
        prepared = _PREPARED.get(dbapi)
        if prepared is None:
            prepared = _PREPARED[dbapi] = set()
        missing = [(name, sql) for name, sql in self.prepare if name not in prepared]
        literals = {key: _pg_literal(tools, params[name]) for name, key in self._pg_names}
        query = self._pg_bytes % literals
        if missing:
            query = b"; ".join([*(sql.encode() for _, sql in missing), query])
        mode = self.plan_mode
        set_mode = reads and _PLAN_MODE.get(dbapi) != mode
        if set_mode:  # answered first: one more result to skip
            query = b"SET plan_cache_mode = " + mode + b"; " + query
            _PLAN_MODE.pop(dbapi, None)  # known again once the message succeeded
        with dbapi.lock:
            if exchange is not None:
                # The answers to read as bytes: libpq's own, when they are UTF-8 (after
                # the SET's and the PREPAREs' answers, if the message has any).
                raw = self._as_bytes if tools.utf8 else ()
                first = (1 if set_mode else 0) + len(missing)
                if raw and first:
                    raw = {first + i for i in raw}
                answers = exchange.run(query, tools.transformer, raw)
            else:
                # psycopg's own pieces, as its cursor uses them (psycopg >= 3.0): libpq's
                # send, the connection's wait (with cmsshop.db's answer bound) on the
                # generator that flushes the message and collects every result.
                dbapi.pgconn.send_query(query)
                answers = _answers(dbapi.wait(generators.execute(dbapi.pgconn)), tools)
        skip = 1 if set_mode else 0  # the SET's answer
        for (name, _), (status, _) in zip(missing, answers[skip:], strict=False):
            if status == pgexchange.COMMAND_OK:
                prepared.add(name)
        for status, exc in answers:  # the first error ends the message
            if status not in (pgexchange.COMMAND_OK, pgexchange.TUPLES_OK):
                if isinstance(exc, psycopg.errors.InvalidSqlStatementName):
                    _PREPARED.pop(dbapi, None)  # see run()
                    exc.cmsshop_connection_lost = True
                raise exc
        answers = answers[skip + len(missing) :]
        if len(answers) < len(self.statements):
            raise psycopg.OperationalError("the server answered fewer statements than sent")
        if set_mode:
            _PLAN_MODE[dbapi] = mode
        return [rows for _, rows in answers]

    def _parsed(self, results: list) -> list:
        for i, statement in enumerate(self.statements):
            if statement.json_text:
                rows = results[i]
                results[i] = orjson.loads(rows[0][0]) if rows and rows[0][0] else []
            elif statement.utf8:
                rows = results[i]
                if rows and isinstance(rows[0][0], str):  # SQLite's, psycopg's
                    results[i] = [(rows[0][0].encode(), *rows[0][1:])]
        return results


def _answers(results: list, tools: _LibpqTools) -> list[tuple[int, Any]]:
    """psycopg's results as pgexchange.Exchange.run gives its answers: ``(status, rows)``
    (None: no rows), ``(status, exception)`` for a statement that failed."""
    import psycopg  # noqa: PLC0415 - PostgreSQL installs only

    transformer, answers = tools.transformer, []
    for result in results:
        status = result.status
        if status == pgexchange.TUPLES_OK:
            transformer.set_pgresult(result)
            answers.append((status, transformer.load_rows(0, result.ntuples, tuple)))
        elif status == pgexchange.COMMAND_OK:
            answers.append((status, None))
        else:
            error = psycopg.errors.error_from_result(result, encoding=tools.encoding)
            answers.append((status, error))
    return answers


@dataclasses.dataclass(frozen=True)
class _LibpqTools:
    """What :meth:`HotBatch._pg_autocommit` needs of a connection, made once: libpq's
    escaping, the Python name of the client encoding, psycopg's row loader (one per
    connection: a connection serves one thread at a time)."""

    escaping: Any
    encoding: str
    transformer: Any
    utf8: bool  # the client encoding is UTF-8: text as libpq received it is UTF-8


def _libpq_tools(dbapi) -> _LibpqTools:
    # Kept on the connection itself: the Transformer refers to its connection, so in a
    # dictionary keyed weakly by the connection it would keep every connection alive.
    tools = getattr(dbapi, "_cmsshop_libpq_tools", None)
    if tools is None:
        import psycopg  # noqa: PLC0415 - PostgreSQL installs only
        from psycopg.adapt import Transformer  # noqa: PLC0415

        encoding = dbapi.info.encoding
        tools = _LibpqTools(
            psycopg.pq.Escaping(dbapi.pgconn),
            encoding,
            Transformer(dbapi),
            codecs.lookup(encoding).name == "utf-8",
        )
        dbapi._cmsshop_libpq_tools = tools
    return tools


def _pg_literal(tools: _LibpqTools, value: Any) -> bytes:
    """``value`` as a PostgreSQL literal, for an ``EXECUTE name(...)`` argument (the
    prepared statement's parameter types apply to it). The types hot statements pass;
    any other is a programming error."""
    if value is None:
        return b"NULL"
    if value is True or value is False:
        return b"true" if value else b"false"
    if isinstance(value, int):
        return b"%d" % value
    if isinstance(value, str):
        if "\x00" in value:
            import psycopg  # noqa: PLC0415 - PostgreSQL installs only

            # As psycopg's own dumper says it (cmsshop.db.is_nul_refused).
            raise psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
        return tools.escaping.escape_literal(value.encode(tools.encoding))
    if isinstance(value, dt.datetime | dt.date):
        return tools.escaping.escape_literal(value.isoformat().encode())
    raise TypeError(f"a hot read's parameter cannot be a {type(value).__name__}")


@dataclasses.dataclass(frozen=True)
class RawTransaction:
    """A pooled DBAPI connection inside a transaction (see :func:`raw_transaction`)."""

    dialect_name: str
    dbapi: Any


@dataclasses.dataclass(frozen=True)
class RawReads(RawTransaction):
    """The thread's own DBAPI connection in autocommit, for reads (see :func:`raw_reads`);
    on SQLite ``steps`` runs its statements (cmsshop.sqlitestep; None: the sqlite3
    module does), on PostgreSQL ``exchange`` (cmsshop.pgexchange; None: psycopg does)."""

    engine: Any = None
    steps: Any = None
    exchange: Any = None


class _Announced:
    """What a before_cursor_execute listener gets as the connection of a raw read."""

    def __init__(self):
        self.info: dict = {}


def announce(conn: Connection | RawTransaction, sql: str, params: dict[str, Any]) -> None:
    """Tell the engine's ``before_cursor_execute`` listeners about a statement of a
    :class:`RawReads` connection (one per statement of a batch), so that whoever counts
    the statements of a request counts these too. The other connections' statements
    are their own business (the licensing hot path is measured on its own)."""
    engine = conn.engine if isinstance(conn, RawReads) else None
    if engine is not None and engine.dispatch.before_cursor_execute:
        engine.dispatch.before_cursor_execute(_Announced(), None, sql, params, None, False)


def driver(conn: Connection | RawTransaction) -> tuple[str, Any]:
    """The dialect name and the DBAPI connection behind ``conn``."""
    if isinstance(conn, RawTransaction):
        return conn.dialect_name, conn.dbapi
    return conn.dialect.name, conn.connection.driver_connection


def forget_if_dropped(engine: Engine, pooled, exc: BaseException) -> bool:
    """Whether the server dropped the pooled connection ``pooled`` (psycopg's ``broken``),
    on an error SQLAlchemy did not see (a statement sent on the DBAPI connection). Then
    this does what SQLAlchemy does on a disconnect it sees: the connection leaves the
    pool, and so does every other pooled connection as old as it (a server restart
    dropped them all: each would otherwise fail one more request), and ``exc`` is marked
    so the request may run again on a fresh one (cmsshop.db.is_retryable_db_error)."""
    if not getattr(pooled.driver_connection, "broken", False):
        return False
    engine.pool._invalidate(pooled, exc)  # SQLAlchemy's own step for a disconnect
    exc.cmsshop_connection_lost = True
    return True


def _forget_on(conn: Connection | RawTransaction, exc: BaseException) -> None:
    """A statement sent on the DBAPI connection of ``conn`` failed: on a SQLAlchemy
    Connection, one the server dropped is forgotten here (SQLAlchemy never saw the
    error); the raw connections' blocks forget theirs themselves (:func:`raw_transaction`)."""
    if isinstance(conn, Connection) and not conn.invalidated:
        forget_if_dropped(conn.engine, conn.connection, exc)


@contextlib.contextmanager
def raw_autocommit(engine: Engine):
    """A pooled connection whose every statement commits on its own (no BEGIN, no
    COMMIT: one round trip a statement). SQLite's connections always are (see the
    pysqlite recipe in cmsshop.db); a PostgreSQL one is switched for the block."""
    pooled = engine.raw_connection()
    conn = RawTransaction(engine.dialect.name, pooled.driver_connection)
    postgresql = conn.dialect_name == "postgresql"
    try:
        if postgresql:
            conn.dbapi.autocommit = True
        yield conn
    except BaseException as exc:
        if not forget_if_dropped(engine, pooled, exc):
            conn.dbapi.rollback()  # a BEGIN the block sent itself (nothing otherwise)
        raise
    finally:
        if postgresql:
            with contextlib.suppress(Exception):  # a broken one is invalidated anyway
                conn.dbapi.autocommit = False
        pooled.close()


class _Held:
    """One thread's connection of a :class:`ThreadConnections`, closed when the thread
    ends (the thread's locals let go of it) or when the engine's pool is disposed."""

    __slots__ = ("dbapi", "exchange", "generation", "pid", "steps", "__weakref__")

    def __init__(self, dbapi, generation: int, steps=None, exchange=None):
        self.dbapi, self.generation, self.pid = dbapi, generation, os.getpid()
        self.steps = steps  # SQLite: its hot reads' statements (cmsshop.sqlitestep)
        self.exchange = exchange  # PostgreSQL: its hot reads' messages (cmsshop.pgexchange)

    def close(self) -> None:
        if self.pid != os.getpid():
            # Opened before a fork: the parent's. Closing it here would end the parent's
            # session (libpq's goodbye on the shared socket), so it is only let go of --
            # and kept, since dropping it would close it all the same.
            _INHERITED.append(self)
            return
        if self.steps is not None:
            self.steps.finalize()  # before the connection they belong to closes
        with contextlib.suppress(Exception):  # one the server dropped closes all the same
            self.dbapi.close()

    def __del__(self):
        self.close()


_INHERITED: list[_Held] = []  # see _Held.close


class ThreadConnections:
    """Each thread's own connection to ``engine``'s database, for reads outside any
    transaction (:func:`raw_reads`, the health probe): taken from the engine once, with
    its connect listeners and timeouts, then detached from the pool (autocommit on
    PostgreSQL; SQLite's connections always are, see cmsshop.db). A read then costs its
    statements only, not the pool's checkout, return and reset (a tenth of a product by
    slug in-process; bench/uncached.py).

    A thread's connection is closed when the thread ends, and by the thread itself at its
    next read once the connections are retired: when one of them turns out dropped by
    the server (a restart drops them all; see :meth:`failed`). Disposing of the engine's
    pool closes every one at once (a test dropping its database, a process shutting
    down), whatever its thread is doing, as SQLAlchemy closes the pool's idle ones.
    A connection opened before a fork is never closed in the child (:class:`_Held`)."""

    def __init__(self, engine: Engine):
        # Weakly: the engine's entry in _THREAD_CONNECTIONS must not keep it alive.
        self.engine = weakref.ref(engine)
        self.postgresql = engine.dialect.name == "postgresql"
        self.local = threading.local()
        self.generation = 0  # bumped when every thread's connection is retired
        self.opened: weakref.WeakSet[_Held] = weakref.WeakSet()  # for dispose
        self.lock = threading.Lock()
        event.listen(engine, "engine_disposed", lambda engine: self.close())

    def get(self):
        """This thread's DBAPI connection, opened if it has none (or a retired one)."""
        return self.held().dbapi

    def held(self) -> _Held:
        """This thread's connection with its SQLite statements (:class:`_Held`)."""
        held = getattr(self.local, "held", None)
        if held is not None and held.generation == self.generation and held.pid == os.getpid():
            return held
        return self._open(held)

    def _open(self, old: _Held | None):
        if old is not None:
            self.local.held = None
            old.close()
        generation = self.generation  # before connecting: a retirement meanwhile counts
        pooled = self.engine().raw_connection()
        dbapi = pooled.driver_connection
        pooled.detach()
        steps = exchange = None
        if self.postgresql:
            dbapi.rollback()
            dbapi.autocommit = True
            # Neither parallel workers nor JIT compilation for a request's reads: the
            # generic plans (HotBatch) are priced for a tenth of the rows a LIMIT :limit
            # could take, so at 100,000 products a page's plan looked costly enough for
            # both -- a parallel sort of the whole catalogue, and about 20 ms of JIT
            # compiling on every call -- where walking ix_products_listing takes 1 ms
            # (bench/uncached.py). Either costs more than a page's read.
            dbapi.execute("SET max_parallel_workers_per_gather = 0")
            dbapi.execute("SET jit = off")
            exchange = pgexchange.for_connection(dbapi)
        else:
            steps = sqlitestep.for_connection(dbapi)
        held = self.local.held = _Held(dbapi, generation, steps, exchange)
        with self.lock:
            self.opened.add(held)
        return held

    def failed(self, exc: BaseException) -> None:
        """A read on this thread's connection raised ``exc``. A connection the server
        dropped (psycopg's ``broken``) is closed, and so is every thread's at its next
        read, and the engine's pool replaces its connections as old (a restart dropped
        them all: each would otherwise fail one more request); ``exc`` is marked so the
        request may run again on a fresh one (cmsshop.db.is_retryable_db_error). Any other
        error leaves the connection as it is: nothing is open on it (autocommit; a
        HotBatch is its own implicit transaction)."""
        held = getattr(self.local, "held", None)
        if held is None or not getattr(held.dbapi, "broken", False):
            return
        exc.cmsshop_connection_lost = True
        with self.lock:
            self.generation += 1
        self.local.held = None
        held.close()
        engine = self.engine()
        if engine is not None:
            # SQLAlchemy's own step for a disconnect (see forget_if_dropped): the pool's
            # connections older than now are replaced at their next checkout.
            engine.pool._invalidate(None, exc)

    def close(self) -> None:
        """Close every thread's connection (the engine's pool was disposed)."""
        with self.lock:
            self.generation += 1
            held, self.opened = list(self.opened), weakref.WeakSet()
        for one in held:
            one.close()


_THREAD_CONNECTIONS: weakref.WeakKeyDictionary[Engine, ThreadConnections] = (
    weakref.WeakKeyDictionary()
)
_THREAD_CONNECTIONS_LOCK = threading.Lock()


def thread_connections(engine: Engine) -> ThreadConnections:
    """The :class:`ThreadConnections` of ``engine`` (one per engine)."""
    found = _THREAD_CONNECTIONS.get(engine)
    if found is None:
        with _THREAD_CONNECTIONS_LOCK:
            found = _THREAD_CONNECTIONS.get(engine)
            if found is None:
                found = _THREAD_CONNECTIONS[engine] = ThreadConnections(engine)
    return found


@contextlib.contextmanager
def raw_reads(engine: Engine):
    """Reads outside any transaction of the request's, on the thread's own connection
    (:class:`ThreadConnections`; a HotBatch is one implicit transaction on PostgreSQL)."""
    connections = thread_connections(engine)
    try:
        held = connections.held()
        yield RawReads(engine.dialect.name, held.dbapi, engine, held.steps, held.exchange)
    except BaseException as exc:
        connections.failed(exc)
        raise


@contextlib.contextmanager
def raw_transaction(engine: Engine):
    """A connection from the engine's pool in a transaction of its own: committed when
    the block ends, rolled back if it raises. Skips SQLAlchemy's Connection and
    Transaction objects, which cost as much as the hot path's statements themselves.
    On SQLite it issues the BEGIN that cmsshop.db's recipe would (pysqlite's own
    transaction handling is off)."""
    pooled = engine.raw_connection()
    conn = RawTransaction(engine.dialect.name, pooled.driver_connection)
    try:
        if conn.dialect_name == "sqlite":
            conn.dbapi.execute("BEGIN")
        yield conn
        pooled.commit()
    except BaseException as exc:
        if not forget_if_dropped(engine, pooled, exc):
            pooled.rollback()
        raise
    finally:
        pooled.close()  # back to the pool (or, invalidated, closed)


def from_db_time(value: Any) -> dt.datetime | None:
    """A time as UTCDateTime would return it (aware UTC) from a raw row."""
    if value is None:
        return None
    if isinstance(value, str):  # SQLite's naive UTC text, or a time in JSON text
        if value[-6:-5] in ("+", "-") or value.endswith("Z"):
            value = dt.datetime.fromisoformat(value)
        else:  # naive: parsed as UTC at once (a fifth of parsing it, then replace())
            return dt.datetime.fromisoformat(value + "+00:00")
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def db_time(conn: Connection | RawTransaction, value: dt.datetime) -> Any:
    """What UTCDateTime binds: naive UTC text on SQLite, the aware value on PostgreSQL."""
    if driver(conn)[0] == "sqlite":
        return value.astimezone(dt.UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
    return value
