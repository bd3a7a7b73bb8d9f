"""SQLite reads that let go of the GIL once a step, not about ten times a statement.

Python's sqlite3 (3.11, and newer versions alike) releases the GIL around every call
into SQLite that takes the connection's mutex: binding, each step, the column count,
each column's type, the last row id, the reset. Served on eight threads, each release
is a hand-over: another thread takes the GIL, and the reader waits to take it back. A
product by slug made 29 context switches a request against the bare route's 12, and
re-taking the GIL after sqlite3's calls was a fifth of its CPU (docs/performance.md,
"Catalogue reads").

:class:`Statements` runs the hot reads (:mod:`cmsshop.hotsql`) of one server thread's
own connection through SQLite's C API (ctypes, the sqlite3 module's own library): the
step, where SQLite does its work, releases the GIL; binding, reading the columns and the
reset hold it (each a few hundred nanoseconds). Holding it through the step as well was
tried and is worse: the statements then no longer run beside the other threads' Python.

The statements are prepared once a connection (``SQLITE_PREPARE_PERSISTENT``) and give
what the sqlite3 module gives (tuples of int, float, str, bytes or None; its exception
classes, with ``sqlite_errorcode`` and ``sqlite_errorname``). The connection is the
sqlite3 module's: :func:`for_connection` reads its ``sqlite3 *`` from the object (the
first field after the object header since pysqlite 2, CPython 3.11 to 3.14) and uses it
only once SQLite confirms it names the same database file; anywhere else (another
Python, an in-memory database) the reads stay on the sqlite3 module. A thread's reads
have the connection to themselves (hotsql.ThreadConnections): nothing else runs
statements on it meanwhile.
"""

from __future__ import annotations

import ctypes
import sqlite3
import sys
import threading

_SQLITE_ROW, _SQLITE_DONE = 100, 101
_INTEGER, _FLOAT, _TEXT, _BLOB, _NULL = 1, 2, 3, 4, 5
_PREPARE_PERSISTENT = 0x01
_TRANSIENT = ctypes.c_void_p(-1)  # SQLite copies a bound value
_INT64 = (-(2**63), 2**63 - 1)

# Python 3.11's classes for SQLite's primary result codes (Modules/_sqlite/util.c).
_ERRORS = {
    1: sqlite3.OperationalError,  # ERROR
    2: sqlite3.InternalError,  # INTERNAL
    3: sqlite3.OperationalError,  # PERM
    4: sqlite3.OperationalError,  # ABORT
    5: sqlite3.OperationalError,  # BUSY
    6: sqlite3.OperationalError,  # LOCKED
    8: sqlite3.OperationalError,  # READONLY
    9: sqlite3.OperationalError,  # INTERRUPT
    10: sqlite3.OperationalError,  # IOERR
    11: sqlite3.DatabaseError,  # CORRUPT
    12: sqlite3.InternalError,  # NOTFOUND
    13: sqlite3.OperationalError,  # FULL
    14: sqlite3.OperationalError,  # CANTOPEN
    15: sqlite3.OperationalError,  # PROTOCOL
    16: sqlite3.OperationalError,  # EMPTY
    17: sqlite3.OperationalError,  # SCHEMA
    18: sqlite3.DataError,  # TOOBIG
    19: sqlite3.IntegrityError,  # CONSTRAINT
    20: sqlite3.IntegrityError,  # MISMATCH
    21: sqlite3.InterfaceError,  # MISUSE
    25: sqlite3.InterfaceError,  # RANGE
}


class _Api:
    """The C functions, bound once: ``hold`` keeps the GIL (ctypes.PyDLL), ``step``
    releases it (ctypes.CDLL)."""

    def __init__(self, path: str):
        hold, free = ctypes.PyDLL(path), ctypes.CDLL(path)
        p, i, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64

        def bind(library, name, restype, *argtypes):
            function = getattr(library, name)
            function.restype, function.argtypes = restype, list(argtypes)
            return function

        self.libversion = bind(hold, "sqlite3_libversion", ctypes.c_char_p)
        self.db_filename = bind(hold, "sqlite3_db_filename", ctypes.c_char_p, p, ctypes.c_char_p)
        self.prepare = bind(
            hold, "sqlite3_prepare_v3", i, p, ctypes.c_char_p, i, ctypes.c_uint,
            ctypes.POINTER(p), p,
        )  # fmt: skip
        self.bind_null = bind(hold, "sqlite3_bind_null", i, p, i)
        self.bind_int64 = bind(hold, "sqlite3_bind_int64", i, p, i, i64)
        self.bind_double = bind(hold, "sqlite3_bind_double", i, p, i, ctypes.c_double)
        self.bind_text = bind(hold, "sqlite3_bind_text", i, p, i, ctypes.c_char_p, i, p)
        self.bind_blob = bind(hold, "sqlite3_bind_blob", i, p, i, ctypes.c_char_p, i, p)
        self.step = bind(free, "sqlite3_step", i, p)
        self.column_count = bind(hold, "sqlite3_column_count", i, p)
        self.column_type = bind(hold, "sqlite3_column_type", i, p, i)
        self.column_name = bind(hold, "sqlite3_column_name", ctypes.c_char_p, p, i)
        self.column_int64 = bind(hold, "sqlite3_column_int64", i64, p, i)
        self.column_double = bind(hold, "sqlite3_column_double", ctypes.c_double, p, i)
        self.column_text = bind(hold, "sqlite3_column_text", p, p, i)
        self.column_blob = bind(hold, "sqlite3_column_blob", p, p, i)
        self.column_bytes = bind(hold, "sqlite3_column_bytes", i, p, i)
        self.reset = bind(hold, "sqlite3_reset", i, p)
        self.clear_bindings = bind(hold, "sqlite3_clear_bindings", i, p)
        self.finalize = bind(hold, "sqlite3_finalize", i, p)
        self.errmsg = bind(hold, "sqlite3_errmsg", ctypes.c_char_p, p)
        self.extended_errcode = bind(hold, "sqlite3_extended_errcode", i, p)
        self.errstr = bind(hold, "sqlite3_errstr", ctypes.c_char_p, i)


_api: _Api | None = None
_api_lock = threading.Lock()


def _the_api() -> _Api | None:
    """The sqlite3 module's own library (the one its connections live in), or None."""
    global _api
    if _api is None:
        with _api_lock:
            if _api is None:
                import _sqlite3  # noqa: PLC0415

                try:
                    api = _Api(_sqlite3.__file__)
                except (OSError, AttributeError):  # the library's symbols are hidden
                    return None
                if api.libversion().decode() != sqlite3.sqlite_version:
                    return None  # another copy of SQLite than the module's
                _api = api
    return _api


def for_connection(dbapi) -> Statements | None:
    """:class:`Statements` on the sqlite3 connection ``dbapi``, or None where its SQLite
    handle cannot be reached (another Python or sqlite3, an in-memory database)."""
    if sys.implementation.name != "cpython" or not (3, 11) <= sys.version_info[:2] <= (3, 14):
        return None
    if not isinstance(dbapi, sqlite3.Connection):
        return None
    api = _the_api()
    if api is None:
        return None
    main = next((row[2] for row in dbapi.execute("PRAGMA database_list") if row[1] == "main"), "")
    if not main:
        return None  # in memory: nothing to compare the handle's file with
    handle = ctypes.c_void_p.from_address(id(dbapi) + object.__basicsize__).value
    if not handle or api.db_filename(handle, b"main") != main.encode():
        return None
    return Statements(api, handle)


class Statements:
    """One connection's hot reads, prepared once and run with the GIL released around
    each step only (see the module's text). :meth:`finalize` before the connection
    closes; a read after it raises ``ProgrammingError`` as a closed sqlite3 connection
    does."""

    def __init__(self, api: _Api, handle: int):
        self.api, self.db = api, handle
        self.prepared: dict[str, ctypes.c_void_p] = {}
        # Only the connection's thread reads; finalize may come from another (the pool
        # disposed) and must not free a statement a read is stepping.
        self.lock = threading.Lock()
        self.closed = False

    def rows(self, sql: str, args: tuple, one: bool = False, raw=()) -> list[tuple]:
        """The rows of ``sql`` with ``args`` bound by position (``?1``...); ``one``: at
        most the first row is read (a statement that gives at most one); the columns
        numbered in ``raw`` (from 0) give their text as the UTF-8 bytes SQLite holds."""
        api = self.api
        with self.lock:
            if self.closed:
                raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
            statement = self.prepared.get(sql)
            if statement is None:
                statement = self._prepare(sql)
            try:
                self._bind(statement, args)
                found = []
                step, column_type = api.step, api.column_type
                width = None
                while True:
                    code = step(statement)
                    if code != _SQLITE_ROW:
                        if code != _SQLITE_DONE:
                            raise self._error(code)
                        break
                    if width is None:
                        width = api.column_count(statement)
                    row = []
                    for column in range(width):
                        kind = column_type(statement, column)
                        if kind == _TEXT and column in raw:
                            kind = _BLOB  # read as bytes (sqlite3_column_blob: the text's)
                        row.append(self._value(statement, column, kind))
                    found.append(tuple(row))
                    if one:
                        break
                return found
            finally:
                api.reset(statement)
                api.clear_bindings(statement)

    def _prepare(self, sql: str) -> ctypes.c_void_p:
        statement = ctypes.c_void_p()
        text = sql.encode()
        code = self.api.prepare(
            self.db, text, len(text), _PREPARE_PERSISTENT, ctypes.byref(statement), None
        )
        if code != 0:
            raise self._error(code)
        if not statement.value:  # only a comment or spaces: the module runs nothing either
            raise sqlite3.ProgrammingError("a hot read needs a statement")
        self.prepared[sql] = statement
        return statement

    def _bind(self, statement, args: tuple) -> None:
        api = self.api
        for number, value in enumerate(args, 1):
            if value is None:
                code = api.bind_null(statement, number)
            elif isinstance(value, int):  # bool too, as the sqlite3 module binds it
                if not _INT64[0] <= value <= _INT64[1]:
                    raise OverflowError("Python int too large to convert to SQLite INTEGER")
                code = api.bind_int64(statement, number, value)
            elif isinstance(value, float):
                code = api.bind_double(statement, number, value)
            elif isinstance(value, str):
                data = value.encode()
                code = api.bind_text(statement, number, data, len(data), _TRANSIENT)
            elif isinstance(value, bytes):
                code = api.bind_blob(statement, number, value, len(value), _TRANSIENT)
            else:
                raise TypeError(f"a hot read's parameter cannot be a {type(value).__name__}")
            if code != 0:
                raise self._error(code)

    def _value(self, statement, column: int, kind: int):
        api = self.api
        if kind == _NULL:
            return None
        if kind == _INTEGER:
            return api.column_int64(statement, column)
        if kind == _FLOAT:
            return api.column_double(statement, column)
        if kind == _TEXT:
            pointer = api.column_text(statement, column)
            data = (
                ctypes.string_at(pointer, api.column_bytes(statement, column)) if pointer else b""
            )
            try:
                return data.decode()
            except UnicodeDecodeError as exc:  # the sqlite3 module's words
                name = (api.column_name(statement, column) or b"").decode(errors="replace")
                text = data.split(b"\0", 1)[0].decode(errors="replace")
                raise sqlite3.OperationalError(
                    f"Could not decode to UTF-8 column '{name}' with text '{text}'"
                ) from exc
        pointer = api.column_blob(statement, column)
        return ctypes.string_at(pointer, api.column_bytes(statement, column)) if pointer else b""

    def _error(self, code: int) -> sqlite3.Error:
        """The sqlite3 module's exception for the connection's last error."""
        api = self.api
        extended = api.extended_errcode(self.db) or code
        message = (api.errmsg(self.db) or b"").decode(errors="replace")
        error = _ERRORS.get(extended & 0xFF, sqlite3.DatabaseError)(message)
        error.sqlite_errorcode = extended
        error.sqlite_errorname = _error_name(extended)
        return error

    def finalize(self) -> None:
        """Free the prepared statements (before the connection closes); reads after
        this raise."""
        with self.lock:
            self.closed = True
            for statement in self.prepared.values():
                self.api.finalize(statement)
            self.prepared.clear()


_PRIMARY = (
    "ERROR", "INTERNAL", "PERM", "ABORT", "BUSY", "LOCKED", "NOMEM", "READONLY", "INTERRUPT",
    "IOERR", "CORRUPT", "NOTFOUND", "FULL", "CANTOPEN", "PROTOCOL", "EMPTY", "SCHEMA", "TOOBIG",
    "CONSTRAINT", "MISMATCH", "MISUSE", "NOLFS", "AUTH", "FORMAT", "RANGE", "NOTADB", "NOTICE",
    "WARNING",
)  # fmt: skip
# Result code: its name, from the sqlite3 module's constants (3.11 has them all; the
# authorizer's constants share their numbers, so only result codes' names are read).
_NAMES = {
    getattr(sqlite3, name): name
    for name in dir(sqlite3)
    if name.startswith("SQLITE_")
    and any(name == f"SQLITE_{p}" or name.startswith(f"SQLITE_{p}_") for p in _PRIMARY)
}


def _error_name(code: int) -> str:
    """``SQLITE_BUSY``-style name of a result code, as the sqlite3 module gives it."""
    return _NAMES.get(code, "SQLITE_UNKNOWN")
