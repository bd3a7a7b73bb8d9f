"""PostgreSQL reads that let go of the GIL once an answer, not at every libpq call.

psycopg (3.3, its C implementation) releases the GIL around each call into libpq that
may wait: sending the query, flushing it, consuming the input, asking whether the
connection is busy, taking each result. Served on eight threads, each release is a
hand-over: another thread takes the GIL and the reader waits to take it back. A product
by slug made 33 context switches a request on PostgreSQL against 16 on SQLite and 12 for
the bare route (docs/performance.md, "Catalogue reads"), as SQLite's reads did before
cmsshop.sqlitestep.

:class:`Exchange` sends a thread's hot reads (:meth:`cmsshop.hotsql.HotBatch._pg_autocommit`
on its own connection, hotsql.ThreadConnections) through libpq's C API with ctypes,
holding the GIL, and lets go of it only while it waits for the server's answer
(``poll``), bounded by the connection's answer timeout as psycopg's own waits are
(cmsshop.db.BoundedConnection). The values are read by psycopg's own loaders, so rows
come back as psycopg gives them; a failed statement raises psycopg's exception class for
its SQLSTATE, with the server's message.

The library is the libpq psycopg itself uses (the one loaded in the process: psycopg's
binary wheel brings its own) and the connection psycopg's ``PGconn``; both are used only
once libpq, asked through them, names the same server process and socket as psycopg
does. Anywhere else (not Linux, two copies of libpq loaded, psycopg's pure-Python
implementation on a library that cannot be told apart) the reads stay on psycopg.
"""

from __future__ import annotations

import ctypes
import select
import sys
import threading
import time
from typing import Any

# libpq's ExecStatusType values (stable since PostgreSQL 7.4).
COMMAND_OK, TUPLES_OK = 1, 2
_DIAG_SQLSTATE = ord("C")
_TEXT = 0  # psycopg.pq.Format.TEXT


class _Api:
    """libpq's functions, bound once, all holding the GIL (ctypes.PyDLL): none of them
    waits (the connections are non-blocking, as psycopg opens them); the waiting is a
    ``poll``, which lets go of it."""

    def __init__(self, path: str):
        hold = ctypes.PyDLL(path)
        p, i, s = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p

        def bind(name, restype, *argtypes):
            function = getattr(hold, name)
            function.restype, function.argtypes = restype, list(argtypes)
            return function

        self.send_query = bind("PQsendQuery", i, p, s)
        self.flush = bind("PQflush", i, p)
        self.consume_input = bind("PQconsumeInput", i, p)
        self.is_busy = bind("PQisBusy", i, p)
        self.get_result = bind("PQgetResult", p, p)
        self.result_status = bind("PQresultStatus", i, p)
        self.ntuples = bind("PQntuples", i, p)
        self.nfields = bind("PQnfields", i, p)
        self.ftype = bind("PQftype", ctypes.c_uint, p, i)
        self.get_value = bind("PQgetvalue", p, p, i, i)
        self.get_length = bind("PQgetlength", i, p, i, i)
        self.get_is_null = bind("PQgetisnull", i, p, i, i)
        self.clear = bind("PQclear", None, p)
        self.error_field = bind("PQresultErrorField", s, p, i)
        self.result_error = bind("PQresultErrorMessage", s, p)
        self.error_message = bind("PQerrorMessage", s, p)
        self.socket = bind("PQsocket", i, p)
        self.backend_pid = bind("PQbackendPID", i, p)


_api: _Api | None = None
_api_lock = threading.Lock()


def _libpq_paths() -> set[str]:
    """The files of every libpq mapped into this process (Linux's /proc)."""
    try:
        with open("/proc/self/maps") as maps:
            return {
                line.split(None, 5)[5].strip()
                for line in maps
                if "/libpq" in line and ".so" in line and len(line.split(None, 5)) == 6
            }
    except OSError:
        return set()


def _the_api() -> _Api | None:
    """The libpq psycopg uses (the only one loaded), or None."""
    global _api
    if _api is None:
        with _api_lock:
            if _api is None:
                paths = _libpq_paths()
                if len(paths) != 1:
                    return None  # none, or two copies: which one psycopg uses is unknown
                (path,) = paths
                try:
                    _api = _Api(path)
                except (OSError, AttributeError):
                    return None
    return _api


def for_connection(dbapi) -> Exchange | None:
    """An :class:`Exchange` on the psycopg connection ``dbapi`` (non-blocking, as psycopg
    opens them), or None where libpq cannot be reached through it (see the module's
    text)."""
    if not sys.platform.startswith("linux"):
        return None
    pgconn = getattr(dbapi, "pgconn", None)
    pointer = getattr(pgconn, "pgconn_ptr", None)
    if not pointer or not pgconn.nonblocking:
        return None
    api = _the_api()
    if api is None:
        return None
    # The same connection seen through this library as through psycopg's.
    if api.backend_pid(pointer) != pgconn.backend_pid or api.socket(pointer) != pgconn.socket:
        return None
    return Exchange(api, dbapi)


class Exchange:
    """One connection's messages through libpq with the GIL held but while waiting (see
    the module's text). The caller holds the connection's lock (psycopg's ``lock``):
    nothing else talks on it meanwhile."""

    def __init__(self, api: _Api, dbapi):
        self.api, self.dbapi = api, dbapi
        self.loaders: dict[int, Any] = {}  # type OID: psycopg's text loader

    def run(self, query: bytes, transformer, raw=()) -> list[tuple[int, Any]]:
        """Send ``query`` (one or more statements, the simple protocol) and read every
        answer: ``(status, rows)`` for a statement that succeeded (rows: a list of tuples
        for one that returns rows, else None), ``(status, exception)`` for one that failed
        (psycopg's class for its SQLSTATE). ``transformer``: the connection's psycopg
        Transformer, whose loaders read the values; the answers numbered in ``raw`` (from
        0) keep every value as the bytes received (the text format's). A connection that
        failed (or no answer within the bound) raises here."""
        api, pointer = self.api, self.dbapi.pgconn.pgconn_ptr
        if not pointer:
            raise _operational("the connection is closed")
        deadline = self._deadline()
        if not api.send_query(pointer, query):
            raise _operational(self._message(pointer))
        while True:
            flushed = api.flush(pointer)
            if flushed == 0:
                break
            if flushed < 0:
                raise _operational(self._message(pointer))
            # Not all sent: wait until the socket takes more (or the server speaks, whose
            # input must then be read for the sending to go on).
            self._wait(pointer, deadline, select.POLLIN | select.POLLOUT)
            if not api.consume_input(pointer):
                raise _operational(self._message(pointer))
        answers: list[tuple[int, Any]] = []
        failed: Exception | None = None
        while True:
            while api.is_busy(pointer):
                self._wait(pointer, deadline, select.POLLIN)
                if not api.consume_input(pointer):
                    raise _operational(self._message(pointer))
            result = api.get_result(pointer)
            if not result:
                break
            try:
                if failed is None:
                    answers.append(self._answer(result, transformer, len(answers) in raw))
            except Exception as exc:  # noqa: BLE001 - raised once the answers are all read
                failed = exc  # a value no loader could read: the connection stays usable
            finally:
                api.clear(result)
        if failed is not None:
            raise failed
        silence = getattr(self.dbapi, "silence", None)
        if silence is not None and silence.since:
            silence.since = 0.0  # it answers again (as BoundedConnection.wait notes)
        return answers

    def _answer(self, result: int, transformer, raw: bool = False) -> tuple[int, Any]:
        api = self.api
        status = api.result_status(result)
        if status == COMMAND_OK:
            return status, None
        if status != TUPLES_OK:
            return status, self._error(result)
        width = api.nfields(result)
        if raw:
            loaders = [bytes] * width  # the bytes as they are (string_at's)
        else:
            loaders = [
                self._loader(api.ftype(result, column), transformer) for column in range(width)
            ]
        get_value, get_length, string_at = api.get_value, api.get_length, ctypes.string_at
        rows = []
        for row in range(api.ntuples(result)):
            values = []
            for column, load in enumerate(loaders):
                length = get_length(result, row, column)
                if not length and api.get_is_null(result, row, column):
                    values.append(None)
                else:
                    values.append(load(string_at(get_value(result, row, column), length)))
            rows.append(tuple(values))
        return status, rows

    def _loader(self, oid: int, transformer):
        load = self.loaders.get(oid)
        if load is None:
            load = self.loaders[oid] = transformer.get_loader(oid, _TEXT).load
        return load

    def _error(self, result: int) -> Exception:
        """psycopg's exception for a failed statement's result, as
        psycopg.errors.error_from_result makes it (the class of its SQLSTATE, else of
        the SQLSTATE's class; the message without its severity)."""
        import psycopg  # noqa: PLC0415 - PostgreSQL installs only
        from psycopg.pq.misc import strip_severity  # noqa: PLC0415

        api = self.api
        state = (api.error_field(result, _DIAG_SQLSTATE) or b"").decode("utf-8", "replace")
        try:
            cls = psycopg.errors.lookup(state)
        except KeyError:
            cls = psycopg.errors.get_base_exception(state)
        text = (api.result_error(result) or b"").decode(self.dbapi.info.encoding, "replace")
        return cls(strip_severity(text) if text else "no error details available")

    def _deadline(self) -> float | None:
        bound = getattr(self.dbapi, "answer_timeout", None)
        return time.monotonic() + bound if bound else None

    def _wait(self, pointer: int, deadline: float | None, events: int) -> None:
        """Wait (the GIL let go) until the socket is ready for ``events``; past the
        deadline, the connection gives up as psycopg's bounded wait does."""
        poller = select.poll()
        poller.register(self.api.socket(pointer), events | select.POLLERR | select.POLLHUP)
        while True:
            if deadline is None:
                ready = poller.poll()
            else:
                left = deadline - time.monotonic()
                ready = poller.poll(max(0, int(left * 1000) + 1)) if left > 0 else []
            if ready:
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise self.dbapi.give_up(self.dbapi.answer_timeout)

    def _message(self, pointer: int) -> str:
        """The connection's last error, as psycopg words it."""
        from psycopg.pq.misc import strip_severity  # noqa: PLC0415 - PostgreSQL installs only

        text = (self.api.error_message(pointer) or b"").decode(self.dbapi.info.encoding, "replace")
        return strip_severity(text) if text else "no error details available"


def _operational(message: str) -> Exception:
    import psycopg  # noqa: PLC0415 - PostgreSQL installs only

    return psycopg.OperationalError(message)
