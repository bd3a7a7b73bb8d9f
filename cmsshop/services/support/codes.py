"""Support codes and the records kept for server errors."""

from __future__ import annotations

import logging

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.db import own_transaction
from cmsshop.models import ErrorRecord
from cmsshop.util import readable_token

log = logging.getLogger(__name__)


def new_support_code() -> str:
    """A short code a customer can read out: ``CS-7KQ2-M9XD`` (40 bits of randomness)."""
    return readable_token(2, 4, prefix="CS")


def record_server_error(registry, **fields) -> None:
    """Keep a 5xx record in its own transaction so it survives the request's rollback.

    Never raises: when the database itself is the failure, the log line is the record.
    """
    try:
        with own_transaction(registry) as session:
            session.add(ErrorRecord(**fields))
    except Exception:  # noqa: BLE001 - the error path must not fail
        log.warning("could not store error record %s", fields.get("support_code"), exc_info=True)


def find_error_record(session: Session, support_code: str) -> ErrorRecord | None:
    return session.scalar(
        select(ErrorRecord).where(ErrorRecord.support_code == support_code.strip().upper())
    )


def error_record_body(record: ErrorRecord) -> dict:
    from cmsshop.util import isoformat_z

    return {
        "supportCode": record.support_code,
        "createdAt": isoformat_z(record.created_at),
        "requestId": record.request_id,
        "method": record.method,
        "path": record.path,
        "status": record.status,
        "code": record.error_code,
        "exceptionType": record.exception_type,
        "traceback": record.traceback,
    }
