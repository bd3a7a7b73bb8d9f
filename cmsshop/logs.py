"""Log lines and stored error records that cannot be forged and do not leak secrets.

Request paths, headers and exception messages carry client input: a ``%0a`` in a path
would start a forged log line, and a download token copied from a log downloads the file.
Every record's message has its control characters escaped and its secrets redacted,
through the log record factory (installed by ``configure()``) and through
:class:`SafeFormatter` (named in the inis' logging sections, which also covers records
made before the app is configured).
"""

from __future__ import annotations

import logging
import re
import time

REDACTED = "[redacted]"
# Path segments that are bearer secrets.
SECRET_PATHS = re.compile(r"(/api/downloads/)[^\s/?#\"']+")
# Query or form parameters that are secrets.
SECRET_PARAMS = re.compile(
    r"((?:^|[?&;\s])(?:token|key|licen[cs]e_?key|signature|sig|secret|password|"
    r"api_?key|access_token|client_secret|smtp_password)=)[^&;\s#\"']*",
    re.IGNORECASE,
)
# API tokens (services/apitokens: "cms_" and 43 URL-safe characters), wherever they
# appear: a header echoed in a message, a token pasted into a query string by mistake.
API_TOKENS = re.compile(r"cms_[A-Za-z0-9_-]{20,}")
# The value of an Authorization header (a Bearer token, Basic credentials) written out
# as "Authorization: ..." or as a dict item "'Authorization': '...'" / "HTTP_AUTHORIZATION".
AUTHORIZATION = re.compile(
    r"((?:HTTP_)?authorization['\"]?\s*[:=]\s*['\"]?)(?:(?:bearer|basic|token)\s+)?[^\s'\",;}]+",
    re.IGNORECASE,
)
# C0 and C1 controls, DEL, the Unicode line/paragraph separators, and lone surrogates.
UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


# Literal secret values from the settings (the SMTP password): whatever prints them --
# an exception message, a debug line -- they never reach a log or an error record.
_SECRET_VALUES: set[str] = set()


def register_secret(value: str) -> None:
    """Redact ``value`` wherever it appears from now on (values under 4 characters are
    ignored: redacting them would mangle ordinary text)."""
    if value and len(value) >= 4:
        _SECRET_VALUES.add(value)


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_control(text: str) -> str:
    """``text`` on one line: control characters and lone surrogates become escapes."""
    return UNSAFE.sub(_escape, text)


def redact(text: str) -> str:
    """``text`` with download tokens, API tokens, Authorization values and
    secret-looking parameters replaced."""
    text = SECRET_PATHS.sub(lambda m: m.group(1) + REDACTED, text)
    text = API_TOKENS.sub(REDACTED, text)
    text = AUTHORIZATION.sub(lambda m: m.group(1) + REDACTED, text)
    for value in _SECRET_VALUES:
        text = text.replace(value, REDACTED)
    return SECRET_PARAMS.sub(lambda m: m.group(1) + REDACTED, text)


# Every pattern above needs one of these to match (a superset: case-insensitive, any
# "="): a text without one is left as it is, in one scan instead of six. Nearly every log
# line (the request log's "<id> GET /path 200 0.4ms") takes this way; the six scans were
# a fifth of what a request line cost.
_MAY_CHANGE = re.compile(
    r"/api/downloads/|cms_|authorization|=|[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]",
    re.IGNORECASE,
)


def safe_text(text: str) -> str:
    """What may be written to a log or an error record: redacted, then escaped."""
    if _MAY_CHANGE.search(text) is None and not any(v in text for v in _SECRET_VALUES):
        return text
    return escape_control(redact(text))


class SafeLogRecord(logging.LogRecord):
    """A record whose message is safe to write, whatever its arguments contain."""

    def getMessage(self) -> str:  # noqa: N802 - logging's name
        return safe_text(super().getMessage())


class SafeFormatter(logging.Formatter):
    """For the inis' handlers: makes records from any factory safe too. The time of day
    is written once a second (``formatTime`` without a ``datefmt``: time.strftime each
    line cost a tenth of the request log's line)."""

    _second: tuple[int, str] = (-1, "")

    def format(self, record: logging.LogRecord) -> str:
        if not isinstance(record, SafeLogRecord):
            record = logging.makeLogRecord(record.__dict__)
            record.msg, record.args = safe_text(logging.LogRecord.getMessage(record)), None
        return super().format(record)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        if datefmt:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        kept = self._second  # read once: another thread may replace it meanwhile
        if kept[0] != second:
            # The same text logging.Formatter writes: default_time_format, local time.
            kept = (second, time.strftime(self.default_time_format, self.converter(second)))
            self._second = kept
        text = kept[1]
        return self.default_msec_format % (text, record.msecs) if self.default_msec_format else text


def install() -> None:
    """Make every log record of this process a :class:`SafeLogRecord` (idempotent; a
    record factory someone else installed is left alone, the formatter still applies)."""
    if logging.getLogRecordFactory() is logging.LogRecord:
        logging.setLogRecordFactory(SafeLogRecord)


class BackgroundStreamHandler(logging.StreamHandler):
    """A StreamHandler that formats and writes in a thread of its own, in batches.

    A request thread only puts the record on a queue. Writing a line per request from
    the request threads costs more than its few microseconds: every write releases the
    interpreter lock, and getting it back behind seven busy threads is what made INFO
    request logging cost a third of a cached answer's throughput (bench/catalogue.py).
    The writer thread waits for a record, lets a batch gather for 50 ms, formats the
    records (through the formatter the ini names, SafeFormatter) and writes them with
    one write and one flush. ``flush()`` returns once everything logged before it is
    written; ``close()`` (logging.shutdown, at exit) stops the thread after the last
    record. Records are formatted a moment later than they are made: log immutable
    arguments (every cmsshop log call does).
    """

    BATCH_SECONDS = 0.05
    _STOP = object()

    def __init__(self, stream=None):
        import os
        import weakref

        super().__init__(stream)
        self._start()
        # A forked process (a pre-fork server's worker, gunicorn's with preload_app)
        # inherits the queue but not the thread: it gets a writer of its own, and leaves
        # the records queued before the fork to the parent's.
        restart = weakref.WeakMethod(self._start)
        os.register_at_fork(after_in_child=lambda: (method := restart()) and method())

    def _start(self) -> None:
        import queue
        import threading

        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name="log-writer", daemon=True)
        self.thread.start()

    def emit(self, record: logging.LogRecord) -> None:
        self.queue.put(record)

    def _run(self) -> None:
        import queue
        import threading
        import time

        while True:
            item = self.queue.get()
            # Let a batch gather: waking for every record costs the request threads more
            # (a thread switch each) than the writing itself.
            time.sleep(self.BATCH_SECONDS)
            batch = []
            while True:
                if item is self._STOP:
                    self._write(batch)
                    return
                if isinstance(item, threading.Event):  # a flush() waiting for this point
                    self._write(batch)
                    batch = []
                    item.set()
                else:
                    batch.append(item)
                if len(batch) >= 1000:
                    self._write(batch)
                    batch = []
                try:
                    item = self.queue.get_nowait()
                except queue.Empty:
                    break
            self._write(batch)

    def _write(self, batch: list) -> None:
        if not batch:
            return
        lines = []
        for record in batch:
            try:
                lines.append(self.format(record) + self.terminator)
            except Exception:  # noqa: BLE001 - as logging does: report, never raise
                self.handleError(record)
        try:
            self.stream.write("".join(lines))
            self.stream.flush()
        except Exception:  # noqa: BLE001
            self.handleError(batch[-1])

    def flush(self) -> None:
        """Return once every record logged before the call is written."""
        import threading

        if self.thread.is_alive() and threading.current_thread() is not self.thread:
            written = threading.Event()
            self.queue.put(written)
            written.wait(timeout=5)

    def close(self) -> None:
        """Stop the writer thread after the records queued so far (a daemon thread still
        writing to stderr while the interpreter finalises aborts it)."""
        if self.thread.is_alive():
            self.queue.put(self._STOP)
            self.thread.join(timeout=5)
        super().close()
