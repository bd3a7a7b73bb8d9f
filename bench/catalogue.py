"""Catalogue benchmark: is a catalogue page as cheap as a bare JSON route of the same app?

    .venv/bin/python bench/catalogue.py          # a fresh SQLite file in a temp dir
    .venv/bin/python bench/catalogue.py --reset \
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench

It creates and migrates a fresh database (alembic, as `cmsshop-admin initdb` does), loads
10,000 published products (two prices and a release each) and 2,000 articles, serves the
real app (the real ``configure()``) with waitress in a separate process on a free loopback
port, and drives it with concurrent keep-alive clients (stdlib http.client, one thread per
client). For each route it prints requests/s and p50/p99 latency, and the ratio to the bare
route. The bare route is ``GET /api/health``: the same app, tweens and transaction
machinery, a JSON body and one trivial ``SELECT 1`` -- nothing added to the app for the
benchmark. Not part of the test suite; a run takes about a minute.
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from urllib.parse import urlencode

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchlib import (  # noqa: E402 - bench/benchlib.py, beside this script
    WORDS,
    load_products,
    migrate_fresh,
    serve_app,
)

PRODUCTS = 10_000
ARTICLES = 2_000
CATEGORIES = ["guides", "licensing", "policies", "releases", "howto"]


# --- database ----------------------------------------------------------------------------


def migrate(url: str, reset: bool) -> None:
    migrate_fresh(url, reset).dispose()


def load(url: str) -> None:
    """Bulk inserts (Core executemany): loading must not take longer than measuring."""
    from sqlalchemy import func, insert, select
    from sqlalchemy.orm import Session

    from cmsshop.db import make_engine
    from cmsshop.models import Article, Product
    from cmsshop.services.docs.markdown import render_markdown
    from cmsshop.util import utcnow

    engine = make_engine(url)
    rng = random.Random(42)
    now = utcnow()
    with Session(engine) as session:
        if session.scalar(select(func.count()).select_from(Product)):
            sys.exit("the database already has products: use an empty one (or --reset)")
        load_products(session, PRODUCTS, rng)
        body = "## Steps\n\n1. Download\n2. Install\n\n```sh\nmake install\n```\n" * 3
        body_html = render_markdown(body)
        session.execute(
            insert(Article),
            [
                {
                    "slug": f"article-{i:04d}",
                    "title": f"How to use {rng.choice(WORDS)} ({i})",
                    "summary": f"A short guide about {rng.choice(WORDS)}",
                    "category": CATEGORIES[i % len(CATEGORIES)],
                    "body": body,
                    "body_html": body_html,
                    "published": True,
                    "published_at": now,
                }
                for i in range(ARTICLES)
            ],
        )
        session.commit()
    engine.dispose()


# --- server ------------------------------------------------------------------------------


def serve(url: str, storage: str, threads: int) -> None:
    """Child process: the real app on a free loopback port; prints the port."""
    serve_app(url, storage, threads, modules="store docs")


# --- clients -----------------------------------------------------------------------------


def drive(port: int, paths, clients: int, seconds: float, warmup: float) -> dict:
    """``clients`` threads with keep-alive connections requesting ``paths()`` for ``seconds``."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    start_at = time.perf_counter() + warmup
    stop_at = start_at + seconds

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine = []
        failed = 0
        while True:
            now = time.perf_counter()
            if now >= stop_at:
                break
            began = time.perf_counter()
            conn.request("GET", paths())
            response = conn.getresponse()
            response.read()
            took = time.perf_counter() - began
            if response.status != 200:
                failed += 1
            if began >= start_at:
                mine.append(took)
        conn.close()
        with lock:
            latencies.extend(mine)
            errors[0] += failed

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    latencies.sort()
    return {
        "requests": len(latencies),
        "rps": len(latencies) / seconds,
        "p50": statistics.median(latencies) * 1000,
        "p99": latencies[int(len(latencies) * 0.99) - 1] * 1000,
        "errors": errors[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database-url", help="default: a fresh SQLite file in a temp dir")
    parser.add_argument("--reset", action="store_true", help="PostgreSQL: drop the schema first")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--threads", type=int, default=8, help="waitress threads")
    parser.add_argument("--seconds", type=float, default=8.0, help="per route")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (SQLite file)")
    parser.add_argument("--serve", nargs=2, metavar=("URL", "STORAGE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], args.serve[1], args.threads)
        return 0

    workdir = tempfile.mkdtemp(prefix="cmsshop-catalogue-bench-")
    url = args.database_url or f"sqlite:///{workdir}/bench.sqlite"
    began = time.perf_counter()
    migrate(url, args.reset)
    load(url)
    print(
        f"database: {url.split('@')[-1]} -- {PRODUCTS} products (2 prices, 1 release each), "
        f"{ARTICLES} articles, loaded in {time.perf_counter() - began:.1f}s"
    )
    server = subprocess.Popen(
        [sys.executable, __file__, "--threads", str(args.threads), "--serve", url, workdir],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        port = int(server.stdout.readline())
        rng = random.Random(7)
        routes = [
            ("bare: GET /api/health", lambda: "/api/health"),
            ("GET /api/store/products", lambda: "/api/store/products"),
            (
                "GET /api/store/products/{slug}",
                lambda: f"/api/store/products/product-{rng.randrange(PRODUCTS):05d}",
            ),
            (
                "GET /api/docs/articles?q=...",
                lambda: "/api/docs/articles?" + urlencode({"q": rng.choice(WORDS)}),
            ),
        ]
        print(
            f"waitress: {args.threads} threads, {args.clients} keep-alive clients, "
            f"{args.seconds:.0f}s per route after 1s warm-up, {os.cpu_count()} CPUs\n"
        )
        print(f"{'route':34} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'vs bare':>8} {'errors':>7}")
        bare = None
        for name, paths in routes:
            result = drive(port, paths, args.clients, args.seconds, warmup=1.0)
            bare = bare or result["rps"]
            print(
                f"{name:34} {result['rps']:8.0f} {result['p50']:8.1f} {result['p99']:8.1f} "
                f"{result['rps'] / bare:8.2f} {result['errors']:7d}"
            )
    finally:
        server.terminate()
        server.wait(timeout=10)
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"\ntotal run: {time.perf_counter() - began:.0f}s"
        + (f"; data in {workdir}" if args.keep else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
