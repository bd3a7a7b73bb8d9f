"""Support codes and the records kept for server errors."""

from __future__ import annotations

import logging
import re

from sqlalchemy import select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from cmsshop.db import database_silent, limit_lock_wait, own_transaction
from cmsshop.logs import safe_text
from cmsshop.models import ErrorRecord
from cmsshop.util import readable_token

log = logging.getLogger(__name__)


def new_support_code() -> str:
    """A short code a customer can read out: ``CS-7KQ2-M9XD`` (40 bits of randomness)."""
    return readable_token(2, 4, prefix="CS")


# Column sizes of ErrorRecord: a value that does not fit must not cost the record.
FIELD_LIMITS = {
    "request_id": 64,
    "method": 16,
    "path": 2048,
    "error_code": 64,
    "exception_type": 255,
}


def storable_fields(fields: dict) -> dict:
    """``fields`` as every database can store them: secrets redacted, NUL bytes and other
    controls escaped (PostgreSQL refuses NUL in text), lone surrogates escaped (they do not
    encode as UTF-8), and cut to the column sizes."""
    result = dict(fields)
    for name, value in fields.items():
        if isinstance(value, str):
            text = safe_text(value) if name != "traceback" else _keep_lines(value)
            limit = FIELD_LIMITS.get(name)
            result[name] = text[:limit] if limit else text
    return result


def _keep_lines(text: str) -> str:
    return "\n".join(safe_text(line) for line in text.split("\n"))


# A record is not worth holding a worker for long: when the database is the failure, the
# log line is the record.
RECORD_TIMEOUT_MS = 1000


def record_server_error(registry, **fields) -> None:
    """Keep a 5xx record in its own transaction so it survives the request's rollback.

    Never raises. If the full record cannot be stored for what it contains, a second
    attempt stores it without the free-text parts.
    """
    fields = storable_fields(fields)
    if database_silent(registry["cmsshop.engine"]):
        # It just failed to answer (frozen, gone): the attempt would hold this worker
        # for another bounded wait and fail. The log line is the record.
        log.warning(
            "error record %s not stored: the database does not answer", fields.get("support_code")
        )
        return
    attempts = (fields, {**fields, "traceback": None, "path": fields["path"][:200]})
    failure: Exception | None = None
    for attempt in attempts:
        try:
            with own_transaction(registry) as session:
                limit_lock_wait(session, RECORD_TIMEOUT_MS)
                session.add(ErrorRecord(**attempt))
            return
        except OperationalError as exc:
            failure = exc
            break  # the database does not answer: another try would wait again
        except Exception as exc:  # noqa: BLE001 - the error path must not fail
            failure = exc
    log.warning("error record %s not stored", fields.get("support_code"), exc_info=failure)


SUPPORT_CODE = re.compile(r"CS-[0-9A-Z]{4}-[0-9A-Z]{4}")


def find_error_record(session: Session, support_code: str) -> ErrorRecord | None:
    """The record of ``support_code`` (any case, spaces around), or None; a string that
    cannot be a support code is not looked up at all."""
    support_code = support_code.strip().upper()
    if not SUPPORT_CODE.fullmatch(support_code):
        return None
    return session.scalar(select(ErrorRecord).where(ErrorRecord.support_code == support_code))
