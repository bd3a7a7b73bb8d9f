"""Small helpers shared by every layer: time, identifiers, JSON-friendly formatting."""

from __future__ import annotations

import datetime as dt
import secrets

# Crockford's base32 without I, L, O, U: readable aloud and over the phone.
READABLE_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def utcnow() -> dt.datetime:
    """Aware UTC now; every timestamp in the database is aware UTC."""
    return dt.datetime.now(dt.UTC)


def isoformat_z(value: dt.datetime | None) -> str | None:
    """ISO 8601 UTC with a trailing Z, as the API promises for every time."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    value = value.astimezone(dt.UTC)
    return value.isoformat(timespec="seconds").replace("+00:00", "Z")


def readable_token(groups: int, size: int, prefix: str = "") -> str:
    """Random groups of readable characters, e.g. ``CS-7KQ2-M9XD``."""
    parts = ["".join(secrets.choice(READABLE_ALPHABET) for _ in range(size)) for _ in range(groups)]
    return "-".join(([prefix] if prefix else []) + parts)
