"""The rate limiter: named policies over one table of fixed-window counters.

Counts live in the database, so every app process sees the same numbers (a per-process
counter would multiply each limit by the number of processes). A *policy* is a name, a
limit and a window, declared once where its feature is wired (``config.add_rate_policy``)
from that feature's settings; callers name the policy and the subject (an IP address, a
user id, a hashed key), never numbers. The limiter is a service
(``request.find_service(RateLimiter)``).

Counting is one ``INSERT .. ON CONFLICT DO UPDATE .. RETURNING`` for every policy a
request checks (one round trip), written as plain SQL because the licensing hot path
runs it on every call (see cmsshop.hotsql).
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Connection, Engine

from cmsshop.hotsql import HotStatement, RawTransaction

PURGE_PROBABILITY = 0.01  # now and then, drop windows older than a day
MAX_KEY = 255


@dataclasses.dataclass(frozen=True)
class Policy:
    """At most ``limit`` events per ``window`` seconds for each subject."""

    name: str
    limit: int
    window: int

    def key(self, subject: str) -> str:
        return f"{self.name}:{subject}"[:MAX_KEY]

    def window_of(self, now: int) -> tuple[int, int]:
        """The current window's start and the seconds until it ends."""
        start = now - now % self.window
        return start, start + self.window - now


@dataclasses.dataclass(frozen=True)
class RateDecision:
    allowed: bool
    count: int
    limit: int
    retry_after: int


Check = tuple[str, str]  # (policy name, subject)

_UPSERTS: dict[int, HotStatement] = {}


def _upsert(keys: int) -> HotStatement:
    """Count ``keys`` counters in one statement."""
    if keys not in _UPSERTS:
        rows = ", ".join(f"(:key{i}, :start{i}, :step{i})" for i in range(keys))
        _UPSERTS[keys] = HotStatement(
            "INSERT INTO rate_counters (key, window_start, count) VALUES "  # noqa: S608 - no user input in the SQL
            + rows
            + " ON CONFLICT (key, window_start) DO UPDATE SET count = rate_counters.count"
            " + excluded.count RETURNING key, count"
        )
    return _UPSERTS[keys]


_PURGE = HotStatement("DELETE FROM rate_counters WHERE window_start < :before")


class UnknownPolicy(KeyError):
    pass


class Counting:
    """One upsert of every check's counter (``run``) and the decision its rows give."""

    def __init__(self, limiter: RateLimiter, checks: Sequence[Check], now: int, step: int):
        self.now = now
        self.params: dict[str, Any] = {}
        self.planned = []
        for i, (name, subject) in enumerate(checks):
            policy = limiter.policy(name)
            key = policy.key(subject)
            start, retry_after = policy.window_of(now)
            self.params.update({f"key{i}": key, f"start{i}": start, f"step{i}": step})
            self.planned.append((key, policy, retry_after))
        self.statement = _upsert(len(checks))

    def run(self, conn: Connection | RawTransaction):
        return self.statement.run(conn, self.params)

    def decide(self, rows) -> RateDecision | None:
        """The first refusal among the counted rows (key, count), or None."""
        counts = dict(rows)
        for key, policy, retry_after in self.planned:
            if counts[key] > policy.limit:
                return RateDecision(False, counts[key], policy.limit, retry_after)
        return None


class RateLimiter:
    """Named policies over the ``rate_counters`` table of one engine."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.policies: dict[str, Policy] = {}

    def add_policy(self, name: str, limit: int, window: int) -> Policy:
        if limit < 1 or window < 1:
            raise ValueError(f"rate policy {name}: limit and window must be at least 1")
        self.policies[name] = Policy(name, limit, window)
        return self.policies[name]

    def policy(self, name: str) -> Policy:
        try:
            return self.policies[name]
        except KeyError:
            raise UnknownPolicy(name) from None

    # --- counting ------------------------------------------------------------------------

    def count_on(
        self,
        conn: Connection | RawTransaction,
        checks: Sequence[Check],
        now: float | None = None,
        step: int = 1,
    ) -> RateDecision | None:
        """Count one event for every check on ``conn`` (in its transaction); the first
        refusal, or None. Subjects of one call must give different keys."""
        counting = self.counting(checks, now, step)
        cursor = counting.run(conn)
        refusal = counting.decide(cursor.fetchall())
        cursor.close()
        self.maybe_purge(conn, counting.now)
        return refusal

    def maybe_purge(self, conn: Connection | RawTransaction, now: int) -> None:
        """Now and then (one call in a hundred), drop windows older than a day."""
        if random.random() < PURGE_PROBABILITY:
            _PURGE.run(conn, {"before": now - 86400}).close()

    def counting(self, checks: Sequence[Check], now: float | None = None, step: int = 1):
        """The statement that counts ``checks`` and the rule that reads its rows, for a
        caller that sends it alongside its own statements (licensing validate)."""
        return Counting(self, checks, int(now if now is not None else time.time()), step)

    def count(
        self, checks: Sequence[Check], now: float | None = None, step: int = 1
    ) -> RateDecision | None:
        """:meth:`count_on`, committed at once whatever the request does next.

        Call it before the request's session writes anything: on SQLite the two
        transactions would otherwise wait on each other's lock. On PostgreSQL the
        statement runs in autocommit mode: it is atomic on its own, and that spares a
        BEGIN/COMMIT round trip (and its WAL flush).
        """
        if self.engine.dialect.name == "postgresql":
            with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                return self.count_on(conn, checks, now, step)
        with self.engine.begin() as conn:
            return self.count_on(conn, checks, now, step)

    def refund(self, checks: Sequence[Check], now: float | None = None) -> None:
        """Take back an event counted by :meth:`count` (e.g. a login attempt reserved
        before the password check, once the password proved right)."""
        self.count(checks, now, step=-1)


def includeme(config) -> None:
    limiter = RateLimiter(config.registry["cmsshop.engine"])
    config.register_service(limiter, RateLimiter)

    def add_rate_policy(config, name: str, limit: int, window: int) -> None:
        """Declare a named policy (at include time, from the feature's settings)."""
        limiter.add_policy(name, limit, window)

    config.add_directive("add_rate_policy", add_rate_policy)
