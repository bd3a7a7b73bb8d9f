"""Measure whether a password-reset request's timing tells which addresses have accounts.

    .venv/bin/python bench/reset_timing.py                      # a fresh SQLite file
    .venv/bin/python bench/reset_timing.py --reset \
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench

Migrates a fresh database with N accounts, builds the real app (cmsshop.config.configure)
and sends POST /api/auth/password-reset through WebTest: the first request for each of N
existing and N unknown addresses, interleaved in a random order, each from its own
client address (so no rate limit answers for it). Prints both medians, the difference
with a bootstrap 95 % confidence interval, and a Mann-Whitney U test (normal
approximation): a p-value far above 0.05 and an interval around zero mean the two
cannot be told apart. Never part of the test suite.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import tempfile
import time

import webtest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchlib import migrate_fresh  # noqa: E402 - bench/benchlib.py, beside this script

from cmsshop.config import configure  # noqa: E402
from cmsshop.db import make_session_factory  # noqa: E402
from cmsshop.models import User  # noqa: E402


def mann_whitney(a: list[float], b: list[float]) -> tuple[float, float]:
    """(U of ``a``, two-sided p) by the normal approximation with a tie correction."""
    ranked = sorted([(value, 0) for value in a] + [(value, 1) for value in b])
    ranks = [0.0] * len(ranked)
    ties = 0.0
    i = 0
    while i < len(ranked):
        j = i
        while j + 1 < len(ranked) and ranked[j + 1][0] == ranked[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        ties += (j - i + 1) ** 3 - (j - i + 1)
        i = j + 1
    n1, n2 = len(a), len(b)
    u = (
        sum(rank for rank, (_, group) in zip(ranks, ranked, strict=True) if group == 0)
        - n1 * (n1 + 1) / 2
    )
    n = n1 + n2
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    z = (u - n1 * n2 / 2) / sigma if sigma else 0.0
    return u, math.erfc(abs(z) / math.sqrt(2))


def bootstrap_median_difference(a, b, rounds: int, rng) -> tuple[float, float]:
    """95 % interval of median(a) - median(b)."""
    differences = sorted(
        statistics.median(rng.choices(a, k=len(a))) - statistics.median(rng.choices(b, k=len(b)))
        for _ in range(rounds)
    )
    return differences[int(rounds * 0.025)], differences[int(rounds * 0.975)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url")
    parser.add_argument("--reset", action="store_true")
    parser.add_argument("--requests", type=int, default=400, help="per group")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    workdir = tempfile.mkdtemp(prefix="cmsshop-reset-timing-")
    url = args.database_url or f"sqlite:///{os.path.join(workdir, 'bench.sqlite')}"
    engine = migrate_fresh(url, args.reset)
    with make_session_factory(engine)() as session:
        session.add_all(
            User(email=f"known{i}@example.com", name=f"Known {i}", password_hash="x")
            for i in range(args.requests)
        )
        session.commit()
    engine.dispose()
    app = configure(
        {
            "cmsshop.environment": "testing",
            "cmsshop.database_url": url,
            "cmsshop.secret": "bench-secret-" + "x" * 40,
            "cmsshop.storage_dir": os.path.join(workdir, "storage"),
            "cmsshop.license_key_dir": os.path.join(workdir, "keys"),
        }
    ).make_wsgi_app()
    warm = webtest.TestApp(app, extra_environ={"REMOTE_ADDR": "10.255.0.1"})
    for i in range(20):  # imports, templates and statement caches warm on both paths
        csrf = warm.get("/api/auth/session").json["csrfToken"]
        warm.post_json(
            "/api/auth/password-reset",
            {"email": f"warm{i}@example.com"},
            headers={"X-CSRF-Token": csrf},
        )
    order = [("known", i) for i in range(args.requests)]
    order += [("unknown", i) for i in range(args.requests)]
    rng.shuffle(order)
    timings: dict[str, list[float]] = {"known": [], "unknown": []}
    for index, (group, i) in enumerate(order):
        client = webtest.TestApp(
            app,
            extra_environ={
                "REMOTE_ADDR": f"10.{index // 62500}.{index // 250 % 250}.{index % 250 + 1}"
            },
        )
        csrf = client.get("/api/auth/session").json["csrfToken"]
        body = {"email": f"{group}{i}@example.com"}
        started = time.perf_counter()
        client.post_json(
            "/api/auth/password-reset", body, headers={"X-CSRF-Token": csrf}, status=202
        )
        timings[group].append((time.perf_counter() - started) * 1000)
    known, unknown = timings["known"], timings["unknown"]
    low, high = bootstrap_median_difference(known, unknown, 2000, rng)
    u, p = mann_whitney(known, unknown)
    print(f"{args.requests} first requests per group on {url.split(':')[0]}")
    print(f"  existing account: median {statistics.median(known):.2f} ms")
    print(f"  unknown address:  median {statistics.median(unknown):.2f} ms")
    print(
        f"  difference of medians {statistics.median(known) - statistics.median(unknown):+.2f} ms, "
        f"bootstrap 95 % interval [{low:+.2f}, {high:+.2f}] ms"
    )
    print(f"  Mann-Whitney U = {u:.0f}, two-sided p = {p:.3f}")


if __name__ == "__main__":
    main()
