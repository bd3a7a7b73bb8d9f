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

import contextlib
import dataclasses
import datetime as dt
import re
from typing import Any

from sqlalchemy.engine import Connection, Engine


class HotStatement:
    """One SQL statement for both dialects, run on the DBAPI cursor of ``conn``."""

    def __init__(self, sql: str):
        self.sql = {"sqlite": sql, "postgresql": re.sub(r":(\w+)", r"%(\1)s", sql)}

    def run(self, conn: Connection | RawTransaction, params: dict[str, Any]):
        name, dbapi = driver(conn)
        cursor = dbapi.cursor()
        cursor.execute(self.sql[name], params)
        return cursor


class HotBatch:
    """Statements sent together: on PostgreSQL as one simple-protocol query (psycopg's
    ClientCursor binds the parameters, escaped, on the client), so the batch costs one
    network round trip whatever its length; on SQLite (in-process) one by one. The
    statements share one parameter dict. ``run`` gives each statement's rows (None for
    a statement that returns none)."""

    def __init__(self, *statements: HotStatement | str):
        self.statements = [HotStatement(s) if isinstance(s, str) else s for s in statements]
        self.pg_sql = "; ".join(s.sql["postgresql"] for s in self.statements)

    def run(self, conn: Connection | RawTransaction, params: dict[str, Any]) -> list:
        name, dbapi = driver(conn)
        results = []
        if name == "postgresql":
            import psycopg  # noqa: PLC0415 - PostgreSQL installs only

            rows_ok = psycopg.pq.ExecStatus.TUPLES_OK
            with psycopg.ClientCursor(dbapi) as cursor:
                cursor.execute(self.pg_sql, params)
                while True:
                    # The result's status, not cursor.description (which builds a Column
                    # object per column on every call: a tenth of a validate).
                    returned = cursor.pgresult is not None and cursor.pgresult.status == rows_ok
                    results.append(cursor.fetchall() if returned else None)
                    if not cursor.nextset():
                        break
            return results
        for statement in self.statements:
            cursor = dbapi.cursor()
            cursor.execute(statement.sql["sqlite"], params)
            results.append(cursor.fetchall() if cursor.description else None)
            cursor.close()
        return results


@dataclasses.dataclass(frozen=True)
class RawTransaction:
    """A pooled DBAPI connection inside a transaction (see :func:`raw_transaction`)."""

    dialect_name: str
    dbapi: Any


def driver(conn: Connection | RawTransaction) -> tuple[str, Any]:
    """The dialect name and the DBAPI connection behind ``conn``."""
    if isinstance(conn, RawTransaction):
        return conn.dialect_name, conn.dbapi
    return conn.dialect.name, conn.connection.driver_connection


def _dropped(pooled, conn: RawTransaction, exc: BaseException) -> bool:
    """Whether the server dropped the connection (psycopg's ``broken``): then it leaves
    the pool and ``exc`` is marked so the request may run again on a fresh one
    (cmsshop.db.is_retryable_db_error)."""
    if not getattr(conn.dbapi, "broken", False):
        return False
    pooled.invalidate()
    exc.cmsshop_connection_lost = True
    return True


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
        if not _dropped(pooled, conn, exc):
            conn.dbapi.rollback()  # a BEGIN the block sent itself (nothing otherwise)
        raise
    finally:
        if postgresql:
            with contextlib.suppress(Exception):  # a broken one is invalidated anyway
                conn.dbapi.autocommit = False
        pooled.close()


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
        if not _dropped(pooled, conn, exc):
            pooled.rollback()
        raise
    finally:
        pooled.close()  # back to the pool (or, invalidated, closed)


def from_db_time(value: Any) -> dt.datetime | None:
    """A time as UTCDateTime would return it (aware UTC) from a raw row."""
    if value is None:
        return None
    if isinstance(value, str):  # SQLite keeps text
        value = dt.datetime.fromisoformat(value)
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def db_time(conn: Connection | RawTransaction, value: dt.datetime) -> Any:
    """What UTCDateTime binds: naive UTC text on SQLite, the aware value on PostgreSQL."""
    if driver(conn)[0] == "sqlite":
        return value.astimezone(dt.UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
    return value
