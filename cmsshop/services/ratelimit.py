"""Fixed-window rate limits kept in the database, so every app process sees the same
counts (a per-process counter would multiply the limit by the number of processes)."""

from __future__ import annotations

import dataclasses
import random
import time

from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite

from cmsshop.db import own_transaction
from cmsshop.models import RateCounter


@dataclasses.dataclass(frozen=True)
class RateDecision:
    allowed: bool
    count: int
    limit: int
    retry_after: int


def _window(window: int, now: float | None) -> tuple[int, int]:
    now_i = int(now if now is not None else time.time())
    start = now_i - now_i % window
    return start, start + window - now_i


def hit(registry, key: str, limit: int, window: int, now: float | None = None) -> RateDecision:
    """Count one event for ``key`` in the current window (own transaction) and decide.

    Call it before the request session writes anything: on SQLite the two transactions
    would otherwise wait on each other's lock.
    """
    start, retry_after = _window(window, now)
    with own_transaction(registry) as session:
        dialect = session.get_bind().dialect.name
        insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
        stmt = insert(RateCounter).values(key=key[:255], window_start=start, count=1)
        stmt = stmt.on_conflict_do_update(
            index_elements=[RateCounter.key, RateCounter.window_start],
            set_={"count": RateCounter.count + 1},
        ).returning(RateCounter.count)
        count = session.execute(stmt).scalar_one()
        if random.random() < 0.01:  # purge old windows now and then
            session.execute(delete(RateCounter).where(RateCounter.window_start < start - 86400))
    return RateDecision(count <= limit, count, limit, retry_after)


def peek(session, key: str, limit: int, window: int, now: float | None = None) -> RateDecision:
    """The current window's count without counting (e.g. failed logins so far)."""
    start, retry_after = _window(window, now)
    count = (
        session.scalar(
            select(RateCounter.count).where(
                RateCounter.key == key[:255], RateCounter.window_start == start
            )
        )
        or 0
    )
    return RateDecision(count < limit, count, limit, retry_after)
