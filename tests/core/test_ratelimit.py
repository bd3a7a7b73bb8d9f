"""The rate limiter on its own: named policies, fixed windows, one statement for several
policies, refunds, and counts shared by every limiter on the same database."""

from __future__ import annotations

import pytest

from cmsshop.services.ratelimit import RateLimiter, UnknownPolicy

NOW = 1_700_000_000  # 20 s into a minute: windows are fixed, not sliding


@pytest.fixture
def limiter(engine):
    limiter = RateLimiter(engine)
    limiter.add_policy("test.ip", 3, 60)
    limiter.add_policy("test.user", 2, 3600)
    return limiter


def test_a_policy_allows_its_limit_then_refuses_until_the_window_ends(limiter):
    for _ in range(3):
        assert limiter.count([("test.ip", "10.0.0.1")], now=NOW) is None
    refusal = limiter.count([("test.ip", "10.0.0.1")], now=NOW)
    assert refusal is not None and not refusal.allowed
    assert (refusal.count, refusal.limit) == (4, 3)
    assert refusal.retry_after == 60 - NOW % 60
    assert limiter.count([("test.ip", "10.0.0.2")], now=NOW) is None  # another subject
    next_window = NOW - NOW % 60 + 60
    assert limiter.count([("test.ip", "10.0.0.1")], now=next_window) is None


def test_several_policies_count_together_and_the_first_refusal_wins(limiter):
    checks = [("test.ip", "10.0.0.3"), ("test.user", "7")]
    assert limiter.count(checks, now=NOW) is None
    assert limiter.count(checks, now=NOW) is None
    refusal = limiter.count(checks, now=NOW)  # user: 3 > 2; ip: 3 <= 3
    assert refusal is not None and refusal.limit == 2


def test_a_refund_takes_an_event_back(limiter):
    checks = [("test.user", "8")]
    limiter.count(checks, now=NOW)
    limiter.count(checks, now=NOW)
    limiter.refund(checks, now=NOW)
    assert limiter.count(checks, now=NOW) is None
    assert limiter.count(checks, now=NOW) is not None


def test_limiters_on_one_database_share_their_counts(limiter, engine):
    other = RateLimiter(engine)  # another process, as far as the database can tell
    other.add_policy("test.ip", 3, 60)
    for _ in range(3):
        assert limiter.count([("test.ip", "10.0.0.9")], now=NOW) is None
    assert other.count([("test.ip", "10.0.0.9")], now=NOW) is not None


def test_unknown_policies_and_bad_numbers_are_refused(limiter):
    with pytest.raises(UnknownPolicy):
        limiter.count([("nope", "x")])
    with pytest.raises(ValueError):
        limiter.add_policy("bad", 0, 60)
