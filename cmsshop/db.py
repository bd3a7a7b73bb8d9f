"""Engine, the request-scoped session joined to pyramid_tm, and retryable errors."""

from __future__ import annotations

import contextlib
import sqlite3
import time
import weakref
from collections.abc import Iterator

from pyramid.interfaces import IRoutesMapper
from pyramid_retry import mark_error_retryable
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.orm import Session, sessionmaker
from transaction._transaction import Status as ZopeStatus  # as zope.sqlalchemy imports it
from zope.sqlalchemy.datamanager import STATUS_ACTIVE, join_transaction, mark_changed

from cmsshop.hotsql import thread_connections

# IntegrityError is retryable on purpose (as in PyPI's warehouse). The services check
# first and insert second ("is this event already fulfilled? no -> insert the fulfilment
# row"). Two requests racing through that gap both see "no"; the unique constraint lets
# exactly one insert commit and the other fails with IntegrityError. Retrying the loser
# runs its check again, which now sees the winner's committed row and answers
# "duplicate" -- the correct answer -- instead of a 500. A genuine constraint bug fails
# the same way on every attempt and still surfaces as a 500 with a support code.
mark_error_retryable(IntegrityError)


def is_retryable_db_error(exc: BaseException) -> bool:
    """SQLite's "database is locked" / snapshot conflicts settle when the request runs
    again, and so does a statement on a connection the server had dropped.

    (PostgreSQL serialization failures and deadlocks are already tagged retryable by
    zope.sqlalchemy through pyramid_tm.) A lock waited on for the whole busy timeout is
    not a race but a stalled database: running the request again would only multiply the
    wait, so it answers 503 at once. So does a server that sent no answer in time
    (:class:`AnswerTimeout`), though its connection is closed and invalidated.
    """
    if isinstance(exc, AnswerTimeout) or isinstance(getattr(exc, "orig", None), AnswerTimeout):
        return False
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True  # a dropped connection (server restart, idle timeout): a fresh one works
    if getattr(exc, "cmsshop_connection_lost", False):
        return True  # the same, on a raw DBAPI connection (cmsshop.hotsql)
    if isinstance(exc, OperationalError) and isinstance(exc.orig, sqlite3.OperationalError):
        if getattr(exc, "waited_out", False):
            return False
        text = str(exc.orig).lower()
        return "locked" in text or "busy" in text
    return False


try:
    import psycopg

    RAW_OPERATIONAL_ERRORS: tuple[type[Exception], ...] = (
        sqlite3.OperationalError,
        psycopg.OperationalError,
    )
    RAW_DATA_ERRORS: tuple[type[Exception], ...] = (psycopg.DataError,)

    class AnswerTimeout(psycopg.OperationalError):
        """PostgreSQL sent no answer within the connection's bound; the connection is
        closed (it was in the middle of an exchange)."""

    class BoundedConnection(psycopg.Connection):
        """A psycopg connection that waits at most ``answer_timeout`` seconds for each
        answer of the server's.

        The server's statement timeout bounds the statements of a server that runs; a
        server that is frozen (SIGSTOP, swapped out, a hung storage), or a peer that is
        gone without a word, sends nothing at all -- and on a live host the kernel still
        accepts the connection and acknowledges every byte, so TCP keepalives and
        ``tcp_user_timeout`` see nothing wrong either. psycopg waits for an answer in
        :meth:`wait` (every query, fetch, COMMIT and ROLLBACK goes through it); a bound
        there is the one that holds whatever the cause.
        """

        answer_timeout: float | None = None
        silence: Silence | None = None

        def wait(self, gen, interval=0.1, timeout=None):  # noqa: ANN001 - psycopg's own
            bound = self.answer_timeout if timeout is None else timeout
            try:
                answer = super().wait(gen, interval=interval, timeout=bound)
            except psycopg.errors._WaitTimeout:
                if timeout is not None:
                    raise  # psycopg's own bounded wait (a cancellation): its own answer
                raise self.give_up(bound) from None
            if self.silence is not None and self.silence.since:
                self.silence.since = 0.0  # it answers again
            return answer

        def give_up(self, bound: float) -> AnswerTimeout:
            """No answer came within ``bound`` seconds (here, or in a thread's reads:
            cmsshop.pgexchange): the error to raise, the connection closed."""
            if self.silence is not None:
                self.silence.began()
            # The exchange is cut in the middle: the connection cannot be used again.
            # Closing the socket leaves it ``broken``, so the pool invalidates it.
            self.pgconn.finish()
            return AnswerTimeout(f"the database sent no answer within {bound:g} s")

except ImportError:  # pragma: no cover - SQLite-only installs
    RAW_OPERATIONAL_ERRORS = (sqlite3.OperationalError,)
    RAW_DATA_ERRORS = ()

    class AnswerTimeout(Exception):  # type: ignore[no-redef]
        """Never raised without psycopg."""

    BoundedConnection = None  # type: ignore[assignment,misc]


def is_database_unavailable(exc: BaseException) -> bool:
    """The database did not answer in time or at all (connect, statement, lock or pool
    timeout; connection lost): the request answers 503 database_unavailable."""
    if isinstance(exc, (PoolTimeoutError, *RAW_OPERATIONAL_ERRORS)):
        # Raw DBAPI errors come from cmsshop.hotsql's plain statements; on SQLite theirs
        # is a write in a fresh transaction, which only fails after the busy timeout.
        return True
    return isinstance(exc, OperationalError | InterfaceError) and not is_retryable_db_error(exc)


def is_nul_refused(exc: BaseException) -> bool:
    """psycopg refused a NUL character in a text parameter (PostgreSQL cannot store it)."""
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    return isinstance(orig, RAW_DATA_ERRORS) and "NUL (0x00)" in str(orig)


def make_engine(
    url: str,
    *,
    connect_timeout: int = 5,
    statement_timeout_ms: int = 5000,
    pool_timeout: int = 5,
    busy_timeout_ms: int = 5000,
    answer_timeout: float = 6.0,
    **kwargs,
) -> Engine:
    """Create the engine with timeouts, so a stalled database answers 503 within seconds
    instead of holding every worker; on SQLite, apply the pysqlite transaction recipe.

    On PostgreSQL every wait is bounded: the connection handshake (``connect_timeout``),
    a pooled connection (``pool_timeout``), a statement, a lock wait included, at the
    server (``statement_timeout``), each answer at the client (``answer_timeout``, see
    :class:`BoundedConnection`: more than the statement timeout, so the server's own
    cancellation comes first when it runs), and a peer gone from the network (TCP
    keepalives for idle pooled connections, ``tcp_user_timeout`` for unacknowledged
    bytes)."""
    kwargs.setdefault("pool_timeout", pool_timeout)
    # As many pooled connections as a server has threads (waitress: 8), and a few more
    # for the worker's threads: a connection beyond the pool is opened for one request
    # and closed after it -- on SQLite a new file handle, its pragmas and a cold page
    # cache each time (the catalogue list cost a third more CPU on 8 threads than on one).
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 10)
    if url.startswith("sqlite"):
        kwargs.setdefault("connect_args", {}).update(
            {"timeout": busy_timeout_ms / 1000, "check_same_thread": False}
        )
        engine = create_engine(url, **kwargs)
        _fix_pysqlite_transactions(engine, busy_timeout_ms)
        return engine
    # No pre-ping: it costs a round trip on every checkout, on every request. A connection
    # the server dropped fails its first statement instead; SQLAlchemy invalidates it (and
    # the pool's other connections of that age) and the request is retried on a fresh one
    # (is_retryable_db_error). Recycling connections before an hour passes keeps them under
    # the idle limits of proxies and firewalls.
    kwargs.setdefault("pool_recycle", 3600)
    connect_args = kwargs.setdefault("connect_args", {})
    connect_args.setdefault("connect_timeout", connect_timeout)
    # libpq's TCP settings: a peer that vanished (host down, network cut, a failover
    # that moved the address) is noticed within about 20 s on an idle connection and
    # within 10 s of bytes sent unacknowledged, instead of the kernel's two hours and
    # fifteen minutes. A frozen server on a live host is the answer bound's.
    for name, value in TCP_SETTINGS.items():
        connect_args.setdefault(name, value)
    # psycopg prepares a query it saw five times on a connection, and sends DEALLOCATE
    # ALL after any rollback once it has: with the pool rolling back on return, its own
    # statements rarely lived long, and it would drop the ones cmsshop.hotsql PREPAREs
    # for the hot paths. The hot paths prepare explicitly; psycopg does not.
    connect_args.setdefault("prepare_threshold", None)
    if statement_timeout_ms:
        # Also bounds waits for row and table locks: a statement stuck behind a lock is
        # cancelled (QueryCanceled, an OperationalError) rather than waiting forever.
        connect_args.setdefault("options", f"-c statement_timeout={int(statement_timeout_ms)}")
    engine = create_engine(url, **kwargs)
    if BoundedConnection is not None and engine.dialect.driver == "psycopg":
        _bound_answers(engine, answer_timeout or None)
    return engine


class Silence:
    """When the engine's database last failed to answer in time (0: it answers), so that
    work that can wait -- a 5xx record, the answer cache's version check -- does not
    wait for it again. Cleared by the next answer of any connection's; forgotten after
    ``memory`` seconds in any case."""

    def __init__(self, memory: float = 30.0):
        self.since, self.memory = 0.0, memory

    def began(self) -> None:
        self.since = time.monotonic()

    def __bool__(self) -> bool:
        return bool(self.since) and time.monotonic() - self.since < self.memory


def database_silent(engine: Engine) -> bool:
    """Whether ``engine``'s database sent no answer in time lately (PostgreSQL only)."""
    silence = _SILENCES.get(engine)
    return bool(silence)


_SILENCES: weakref.WeakKeyDictionary[Engine, Silence] = weakref.WeakKeyDictionary()


TCP_SETTINGS = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 2,
    "tcp_user_timeout": 10000,  # milliseconds
}

ANSWER_TIMEOUT = "cmsshop.answer_timeout"


def _bound_answers(engine: Engine, answer_timeout: float | None) -> None:
    silence = _SILENCES[engine] = Silence()

    @event.listens_for(engine, "do_connect")
    def _connect(dialect, connection_record, cargs, cparams):
        try:
            connection = BoundedConnection.connect(*cargs, **cparams)
        except psycopg.errors.ConnectionTimeout:
            silence.began()
            raise
        connection.answer_timeout, connection.silence = answer_timeout, silence
        return connection

    @event.listens_for(engine, "checkin")
    def _on_checkin(dbapi_connection, connection_record):
        # A shorter bound set for one transaction (limit_lock_wait) ends with it.
        if connection_record.info.pop(ANSWER_TIMEOUT, False) and dbapi_connection:
            dbapi_connection.answer_timeout = answer_timeout


def _fix_pysqlite_transactions(engine: Engine, busy_timeout_ms: int) -> None:
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
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        # Read the file through a shared memory map rather than a read() per page into
        # each pooled connection's own small cache: with a pool of them, each cold on
        # most pages, a read of a page was a system call and a copy.
        cursor.execute("PRAGMA mmap_size=268435456")
        cursor.close()

    @event.listens_for(engine, "checkin")
    def _on_checkin(dbapi_connection, connection_record):
        # A short wait set for one transaction (error records) ends with it.
        if connection_record.info.pop(SHORT_BUSY_TIMEOUT, False) and dbapi_connection:
            dbapi_connection.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        conn.exec_driver_sql("BEGIN")

    # "database is locked" comes both at once (a read snapshot that cannot become a
    # writer: a race, worth a retry) and after waiting the whole busy timeout (a stalled
    # writer: not worth one). Only the clock tells them apart.
    @event.listens_for(engine, "before_cursor_execute")
    def _start_clock(conn, cursor, statement, parameters, context, executemany):
        conn.info["cmsshop.statement_started"] = time.monotonic()

    @event.listens_for(engine, "handle_error")
    def _tag_waited_out(context):
        connection = context.connection
        started = connection.info.get("cmsshop.statement_started") if connection else None
        if started is not None and time.monotonic() - started >= busy_timeout_ms / 1000 * 0.9:
            context.sqlalchemy_exception.waited_out = True


SHORT_BUSY_TIMEOUT = "cmsshop.short_busy_timeout"


def limit_lock_wait(session: Session, milliseconds: int) -> None:
    """Wait at most ``milliseconds`` for locks in this transaction of ``session`` (and on
    PostgreSQL, half a second more for any answer of the server's: see
    :class:`BoundedConnection`)."""
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        driver_connection = connection.connection.driver_connection
        if isinstance(driver_connection, BoundedConnection or ()):
            driver_connection.answer_timeout = milliseconds / 1000 + 0.5
            connection.connection._connection_record.info[ANSWER_TIMEOUT] = True
        connection.exec_driver_sql(f"SET LOCAL statement_timeout = {int(milliseconds)}")
    else:
        connection.exec_driver_sql(f"PRAGMA busy_timeout = {int(milliseconds)}")
        connection.info[SHORT_BUSY_TIMEOUT] = True


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


def one_snapshot(session: Session) -> Session:
    """Make every statement of ``session``'s next transaction read the same snapshot;
    call it before the first one. PostgreSQL's READ COMMITTED takes a new snapshot per
    statement, so a plan that reads a row and then counts its siblings can see another
    transaction's commit in between (a license with no such installation, yet full); a
    read-only REPEATABLE READ transaction sees one moment and never fails to serialize.
    A SQLite read transaction already is one snapshot."""
    if session.get_bind().dialect.name == "postgresql":
        session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
    return session


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


class RequestTransactionEvents:
    """zope.sqlalchemy's session events, registered once on the request sessions' factory
    instead of on every session (``zope.sqlalchemy.register(session)`` adds seven
    listeners per request, a third of a cheap request's time): each session carries its
    request's transaction manager in ``session.info["tm"]``."""

    def after_begin(self, session, transaction, connection):
        join_transaction(session, STATUS_ACTIVE, session.info["tm"])

    def after_attach(self, session, instance):
        join_transaction(session, STATUS_ACTIVE, session.info["tm"])

    def after_flush(self, session, flush_context):
        mark_changed(session, session.info["tm"])

    def after_bulk_update(self, update_context):
        mark_changed(update_context.session, update_context.session.info["tm"])

    def after_bulk_delete(self, delete_context):
        mark_changed(delete_context.session, delete_context.session.info["tm"])

    def before_commit(self, session):
        assert (
            session.in_nested_transaction()
            or session.info["tm"].get().status == ZopeStatus.COMMITTING
        ), "Transaction must be committed using the transaction manager"

    def do_orm_execute(self, state):
        if state.is_orm_statement and (state.is_update or state.is_insert or state.is_delete):
            mark_changed(state.session, state.session.info["tm"])

    def register(self, factory: sessionmaker) -> None:
        for name in (
            "after_begin",
            "after_attach",
            "after_flush",
            "after_bulk_update",
            "after_bulk_delete",
            "before_commit",
            "do_orm_execute",
        ):
            event.listen(factory, name, getattr(self, name))


def make_request_session_factory(engine: Engine) -> sessionmaker:
    """Sessions joined to a request's transaction manager (``info={"tm": ...}``)."""
    factory = make_session_factory(engine)
    RequestTransactionEvents().register(factory)
    return factory


def request_db(request) -> Session:
    """``request.db``: one session per request, committed or aborted by pyramid_tm."""
    return request.registry["cmsshop.request_session_factory"](info={"tm": request.tm})


# Routes that never touch request.db: pyramid_tm opens no transaction for them. Health
# has a connection of its own; licence validate runs its statements on raw pooled
# connections (cmsshop.services.licensing.validation) and records a failure in a
# transaction of its own (tests/test_licensing.py covers every answer of the route).
NO_TRANSACTION_PATHS = frozenset({"/api/health", "/api/license/validate"})


_SQLITE_CONFIG_MEMSTATUS = 9  # sqlite3.h
_sqlite_configured = False


def configure_sqlite_for_threads() -> bool:
    """Turn off SQLite's memory statistics (``SQLITE_CONFIG_MEMSTATUS``), as SQLite
    recommends for speed; True once done, False where it cannot be (a Python whose
    sqlite3 hides the library's symbols).

    Statistics on (the default of Debian's library and most builds), SQLite counts every
    allocation under one mutex for the whole process: the server's threads, each reading
    on its own connection, queue on it. A list page's statement on two threads cost
    twice its CPU on one and answered no more a second; without the statistics, two
    threads answered 1.9 times as many (bench/uncached.py measures the served routes).

    The setting is only accepted while SQLite is not initialised, and Python's sqlite3
    initialises it on import: so SQLite is shut down and initialised again, which is only
    safe while the process has no SQLite connection open. The paste app factory
    (``cmsshop.main``, what pserve calls first in a new process) calls it before
    anything connects; the test suite, whose process holds connections, never does."""
    global _sqlite_configured
    if _sqlite_configured:
        return True
    import _sqlite3  # noqa: PLC0415
    import ctypes  # noqa: PLC0415 - only a server process's start needs it

    try:
        library = ctypes.CDLL(_sqlite3.__file__)  # the sqlite3 module's own library
        shutdown, config, initialise = (
            library.sqlite3_shutdown, library.sqlite3_config, library.sqlite3_initialize
        )  # fmt: skip
    except (OSError, AttributeError):
        return False
    if shutdown() != 0:
        return False
    config(_SQLITE_CONFIG_MEMSTATUS, ctypes.c_int(0))
    _sqlite_configured = initialise() == 0
    return _sqlite_configured


def add_transactionless_reads(config, *route_names: str) -> None:
    """Declare routes whose GETs never touch request.db: their views read on pooled
    connections of their own (services.store.listing, "public listings on a pooled
    connection"), so pyramid_tm opens no transaction for them -- a transaction and a
    session would cost more than their statements."""
    config.registry.setdefault("cmsshop.transactionless_reads", []).extend(route_names)


def _transactionless_read(request, path: str) -> bool:
    """A GET or HEAD of a route declared with :func:`add_transactionless_reads` (matched
    by the route's own pattern: the activate hook runs before the router)."""
    names = request.registry.get("cmsshop.transactionless_reads")
    if not names or request.environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
        return False
    try:
        path = path.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return False  # no route matches it: the router answers
    mapper = request.registry.getUtility(IRoutesMapper)
    for name in names:
        route = mapper.get_route(name)
        if route is not None and route.match(path) is not None:
            return True
    return False


def needs_transaction(request) -> bool:
    """pyramid_tm's ``tm.activate_hook``: False for :data:`NO_TRANSACTION_PATHS` (the
    health probe has its own connection; a transaction would be pure overhead on the
    route load balancers poll) and GETs of the routes declared with
    :func:`add_transactionless_reads`."""
    path = request.environ.get("PATH_INFO", "")
    if path in NO_TRANSACTION_PATHS:
        return False
    return not _transactionless_read(request, path)


def includeme(config) -> None:
    settings = config.get_settings()
    engine = make_engine(
        settings["cmsshop.database_url"],
        connect_timeout=settings["cmsshop.db_connect_timeout"],
        statement_timeout_ms=settings["cmsshop.db_statement_timeout_ms"],
        pool_timeout=settings["cmsshop.db_pool_timeout"],
        busy_timeout_ms=settings["cmsshop.db_busy_timeout_ms"],
        answer_timeout=settings["cmsshop.db_answer_timeout"],
    )
    config.registry["cmsshop.engine"] = engine
    config.registry["cmsshop.health_probe"] = HealthProbe(engine, settings["cmsshop.health_fresh"])
    config.registry["cmsshop.session_factory"] = make_session_factory(engine)
    config.registry["cmsshop.request_session_factory"] = make_request_session_factory(engine)
    # The audit log's listeners: an admin change is recorded whichever session makes it.
    from cmsshop.services.audit import capture

    capture.register(config.registry["cmsshop.session_factory"])
    capture.register(config.registry["cmsshop.request_session_factory"])
    config.add_request_method(request_db, "db", reify=True)


PING_SQL = "SELECT 1 FROM alembic_version"


class HealthProbe:
    """Asks the database to read the schema's own table (``/api/health``): a server
    that answers ``SELECT 1`` while our tables are locked is not healthy.

    Each server thread probes on its own connection, the one its raw reads use
    (cmsshop.hotsql.ThreadConnections: detached from the pool, in autocommit): a probe is
    one statement, without the pool's checkout, BEGIN and reset-on-return ROLLBACK --
    two round trips less on every load balancer's poll. The engine's connect and
    statement timeouts apply as to any connection. A connection the server dropped is
    closed, and the probe asks once more on a new one; after the engine's pool is
    disposed every thread opens a new one.

    A probe that succeeded less than ``fresh`` seconds ago (``cmsshop.health_fresh``,
    0.25 by default) answers for the calls that follow it: a load balancer polling every
    few seconds always gets a probe of its own, while a flood of health requests (the
    route needs no login) cannot turn into a flood of database statements.
    """

    def __init__(self, engine: Engine, fresh: float = 0.0):
        self.fresh = fresh
        self.connections = thread_connections(engine)
        self.succeeded_at = float("-inf")

    def ping(self) -> None:
        if time.monotonic() - self.succeeded_at < self.fresh:
            return
        try:
            self._probe()
        except Exception as exc:
            if not getattr(exc, "cmsshop_connection_lost", False) or isinstance(exc, AnswerTimeout):
                raise  # a server that does not answer is not asked twice
            # A connection the server dropped (restart, idle timeout) fails once: the
            # second probe, on a new connection, says whether the database is there.
            self._probe()

    def _probe(self) -> None:
        connection = self.connections.get()
        try:
            cursor = connection.cursor()
            cursor.execute(PING_SQL)
            cursor.fetchall()
            cursor.close()
            self.succeeded_at = time.monotonic()
        except BaseException as exc:
            self.succeeded_at = float("-inf")
            self.connections.failed(exc)  # a dropped one: closed, exc marked
            raise


__all__ = [
    "DBAPIError",
    "includeme",
    "is_database_unavailable",
    "is_nul_refused",
    "is_retryable_db_error",
    "make_engine",
    "own_transaction",
    "take_write_lock",
    "AnswerTimeout",
    "BoundedConnection",
    "database_silent",
    "HealthProbe",
]
