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

REDACTED = "[redacted]"
# Path segments that are bearer secrets.
SECRET_PATHS = re.compile(r"(/api/downloads/)[^\s/?#\"']+")
# Query or form parameters that are secrets.
SECRET_PARAMS = re.compile(
    r"((?:^|[?&;\s])(?:token|key|licen[cs]e_?key|signature|sig|secret|password|"
    r"api_?key|access_token|client_secret|smtp_password)=)[^&;\s#\"']*",
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
    """``text`` with download tokens and secret-looking parameters replaced."""
    text = SECRET_PATHS.sub(lambda m: m.group(1) + REDACTED, text)
    for value in _SECRET_VALUES:
        text = text.replace(value, REDACTED)
    return SECRET_PARAMS.sub(lambda m: m.group(1) + REDACTED, text)


def safe_text(text: str) -> str:
    """What may be written to a log or an error record: redacted, then escaped."""
    return escape_control(redact(text))


class SafeLogRecord(logging.LogRecord):
    """A record whose message is safe to write, whatever its arguments contain."""

    def getMessage(self) -> str:  # noqa: N802 - logging's name
        return safe_text(super().getMessage())


class SafeFormatter(logging.Formatter):
    """For the inis' handlers: makes records from any factory safe too."""

    def format(self, record: logging.LogRecord) -> str:
        if not isinstance(record, SafeLogRecord):
            record = logging.makeLogRecord(record.__dict__)
            record.msg, record.args = safe_text(logging.LogRecord.getMessage(record)), None
        return super().format(record)


def install() -> None:
    """Make every log record of this process a :class:`SafeLogRecord` (idempotent; a
    record factory someone else installed is left alone, the formatter still applies)."""
    if logging.getLogRecordFactory() is logging.LogRecord:
        logging.setLogRecordFactory(SafeLogRecord)
