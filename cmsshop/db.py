"""Engine, the request-scoped session joined to pyramid_tm, and retryable errors."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

import zope.sqlalchemy
from pyramid_retry import mark_error_retryable
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

# IntegrityError is retryable on purpose (as in PyPI's warehouse). The services check
# first and insert second ("is this event already fulfilled? no -> insert the fulfilment
# row"). Two requests racing through that gap both see "no"; the unique constraint lets
# exactly one insert commit and the other fails with IntegrityError. Retrying the loser
# runs its check again, which now sees the winner's committed row and answers
# "duplicate" -- the correct answer -- instead of a 500. A genuine constraint bug fails
# the same way on every attempt and still surfaces as a 500 with a support code.
mark_error_retryable(IntegrityError)


def is_retryable_db_error(exc: BaseException) -> bool:
    """SQLite's "database is locked" / snapshot conflicts settle when the request runs again.

    (PostgreSQL serialization failures and deadlocks are already tagged retryable by
    zope.sqlalchemy through pyramid_tm.)
    """
    if isinstance(exc, OperationalError) and isinstance(exc.orig, sqlite3.OperationalError):
        text = str(exc.orig).lower()
        return "locked" in text or "busy" in text
    return False


def make_engine(url: str, **kwargs) -> Engine:
    """Create the engine; on SQLite, apply the pysqlite transaction recipe."""
    if url.startswith("sqlite"):
        kwargs.setdefault("connect_args", {}).update({"timeout": 30, "check_same_thread": False})
        engine = create_engine(url, **kwargs)
        _fix_pysqlite_transactions(engine)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 10)
    return create_engine(url, **kwargs)


def _fix_pysqlite_transactions(engine: Engine) -> None:
    """SQLAlchemy's documented recipe: pysqlite's own BEGIN handling defers BEGIN until the
    first write, so reads before it see a moving database and SAVEPOINTs misbehave. We turn
    it off and emit BEGIN ourselves; WAL lets readers run alongside the one writer."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, connection_record):
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        conn.exec_driver_sql("BEGIN")


def make_session_factory(engine: Engine) -> sessionmaker:
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextlib.contextmanager
def own_transaction(registry) -> Iterator[Session]:
    """A short transaction of its own, committed whatever the request does afterwards.

    For records that must survive the request's rollback (the payment event log, 5xx
    records, rate-limit counters). Never hold it open across a request-session write on
    SQLite: the two would wait on each other's lock.
    """
    session: Session = registry["cmsshop.session_factory"]()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def take_write_lock(session: Session) -> None:
    """On SQLite, swap the request's read snapshot for the database write lock, now.

    The request transaction began with a plain (deferred) BEGIN and has already read
    (the login session at least). SQLite cannot upgrade such a snapshot to a writer
    while another connection writes or has written since: it fails at once with
    "database is locked", without waiting, and a few parallel writers (a download
    manager's parallel range requests, two license clicks, activations racing for a
    seat) can exhaust every retry.
    Ending the read-only transaction and starting a ``BEGIN IMMEDIATE`` one makes
    writers queue on the busy timeout instead, and what is read next is current.
    Call it before the request's first write; nothing is lost, as nothing was written.
    PostgreSQL needs none of this (row locks and unique constraints do the work).
    """
    if session.get_bind().dialect.name != "sqlite" or session.info.get("write_lock"):
        return  # once per transaction: a second COMMIT would commit this one's writes
    connection = session.connection()
    connection.exec_driver_sql("COMMIT")
    connection.exec_driver_sql("BEGIN IMMEDIATE")
    session.info["write_lock"] = True


def request_db(request) -> Session:
    """``request.db``: one session per request, committed or aborted by pyramid_tm."""
    session = request.registry["cmsshop.session_factory"]()
    zope.sqlalchemy.register(session, transaction_manager=request.tm)
    return session


def includeme(config) -> None:
    settings = config.get_settings()
    engine = make_engine(settings["cmsshop.database_url"])
    config.registry["cmsshop.engine"] = engine
    config.registry["cmsshop.session_factory"] = make_session_factory(engine)
    config.add_request_method(request_db, "db", reify=True)


def ping(engine: Engine) -> None:
    """Raise if the database cannot answer a trivial query (used by /api/health)."""
    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1")


__all__ = [
    "DBAPIError",
    "includeme",
    "is_retryable_db_error",
    "make_engine",
    "own_transaction",
    "take_write_lock",
    "ping",
]
