"""Catalogue benchmark: is a catalogue page as cheap as a bare JSON route of the same app?

    .venv/bin/python bench/catalogue.py          # a fresh SQLite file in a temp dir
    .venv/bin/python bench/catalogue.py --reset \
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench

It creates and migrates a fresh database (alembic, as `cmsshop-admin initdb` does), loads
10,000 published products (two prices and a release each) and 2,000 articles, serves the
real app (built by its paste factory, as pserve does) with waitress in a separate process
on a free loopback port, and drives it with concurrent keep-alive clients (stdlib
http.client, one thread per client). For each route it prints requests/s and p50/p99
latency, and the ratio to the bare route. The bare route is ``GET /api/health``: the same
app, tweens and transaction machinery, a JSON body and one trivial ``SELECT 1`` -- nothing
added to the app for the benchmark. Not part of the test suite; a run takes about a
minute.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from urllib.parse import urlencode

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchlib import (  # noqa: E402 - bench/benchlib.py, beside this script
    BARE,
    WORDS,
    Route,
    get_route,
    http_request,
    load_products,
    measure,
    migrate_fresh,
    production_logging,
    report,
    serve_wsgi,
    start_server,
    stop_server,
    with_bare_route,
    zipf_sampler,
)

PRODUCTS = 10_000
ARTICLES = 2_000
CATEGORIES = ["guides", "licensing", "policies", "releases", "howto"]


# --- database ----------------------------------------------------------------------------


def migrate(url: str, reset: bool) -> None:
    migrate_fresh(url, reset).dispose()


def load(url: str, fresh: bool = True, products: int = PRODUCTS) -> None:
    """Bulk inserts (Core executemany): loading must not take longer than measuring.
    ``fresh``: stop if the database already has products. Ends with ANALYZE, as an
    operator's bulk import should: the planner then knows the tables' sizes. ``products``:
    how many (bench/uncached.py loads 100 to 100,000)."""
    from sqlalchemy import func, insert, select, text
    from sqlalchemy.orm import Session

    from cmsshop.db import make_engine
    from cmsshop.models import Article, Product
    from cmsshop.services.docs.markdown import render_markdown
    from cmsshop.util import utcnow

    if url.startswith("postgresql"):
        # Every row's trigger bumps the content version: on a busy machine the bulk
        # inserts outlast the app's answer and statement bounds. The load gets minutes.
        engine = make_engine(
            url,
            answer_timeout=600,
            statement_timeout_ms=600_000,
            connect_args={"tcp_user_timeout": 600_000},
        )
    else:
        engine = make_engine(url)
    rng = random.Random(42)
    now = utcnow()
    with Session(engine) as session:
        if fresh and session.scalar(select(func.count()).select_from(Product)):
            sys.exit("the database already has products: use an empty one (or --reset)")
        quiet = engine.dialect.name == "postgresql" and session.scalar(
            text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        )
        if quiet:
            # No per-row triggers during the load (each row's content-version bump made
            # 100,000 products take many minutes); one bump once it is in, below.
            session.execute(text("SET LOCAL session_replication_role = replica"))
        load_products(session, products, rng)
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
        if quiet:
            session.execute(text("SET LOCAL session_replication_role = origin"))
            session.execute(
                text(
                    "INSERT INTO content_versions (name, version) VALUES ('public', 1) "
                    "ON CONFLICT (name) DO UPDATE SET version = content_versions.version + 1"
                )
            )
        session.commit()
    with engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE")
        conn.commit()
    engine.dispose()


# --- server ------------------------------------------------------------------------------


def serve(url: str, storage: str, threads: int, processes: int) -> None:
    """Child process: the real app beside the bare route on a free loopback port."""
    import secrets

    from benchlib import paste_app

    if os.environ.get("BENCH_LOG", "1") == "1":
        production_logging(os.path.join(storage, "server.log"))
    app = paste_app(
        {
            "cmsshop.environment": "benchmark",
            "cmsshop.database_url": url,
            "cmsshop.secret": secrets.token_urlsafe(48),
            "cmsshop.modules": "store docs",
            "cmsshop.storage_dir": storage,
        }
    )
    serve_wsgi(with_bare_route(app), threads, processes)


# --- routes ------------------------------------------------------------------------------

TARGET = 0.70  # of the bare route's throughput
P99_MS = 15.0


HEALTH_TARGET = 0.60


def routes() -> list[Route]:
    """The bare route, the health route, then the catalogue's public GETs: list pages,
    products by slug as a shop sees them, searches, and products by slug on a cold cache.

    Products by slug, Zipf over all 10,000 (a few popular, a long tail), are measured on
    a warm answer cache: every product is visited once before the rounds. That is the
    steady state of a shop under this load -- at a thousand or more product views a
    second, each of the 10,000 products is viewed within an answer's lifetime (300 s,
    and until a content write) -- which a run of a few seconds would not reach by
    itself. The last route is the cold case: uniform over all 10,000 with an ``Accept``
    header no visit used (a separate cache key), so it starts with every request a miss;
    the "cached" column shows each route's share of answers from the cache."""
    popular = zipf_sampler(PRODUCTS)
    every_product = [f"/api/store/products/product-{i:05d}" for i in range(PRODUCTS)]
    cold = {"Accept": "application/json"}
    return [
        BARE,
        get_route("GET /api/health", lambda rng: "/api/health", target=HEALTH_TARGET),
        get_route(
            "GET /api/store/products?page=1..5",
            lambda rng: f"/api/store/products?page={rng.randrange(1, 6)}",
            target=TARGET,
            p99_ms=P99_MS,
        ),
        get_route(
            "GET /api/store/products/{slug} (Zipf, warm)",
            lambda rng: f"/api/store/products/product-{popular(rng):05d}",
            target=TARGET,
            p99_ms=P99_MS,
            visit=every_product,
        ),
        get_route(
            "GET /api/docs/articles?q=...",
            lambda rng: "/api/docs/articles?" + urlencode({"q": rng.choice(WORDS)}),
            target=TARGET,
            p99_ms=P99_MS,
        ),
        Route(
            "GET /api/store/products/{slug} (uniform, cold)",
            lambda rng, n: [
                http_request(
                    "GET", f"/api/store/products/product-{rng.randrange(PRODUCTS):05d}", b"", cold
                )
                for _ in range(n)
            ],
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database-url", help="default: a fresh SQLite file in a temp dir")
    parser.add_argument("--reset", action="store_true", help="PostgreSQL: drop the schema first")
    parser.add_argument("--clients", type=int, default=8, help="keep-alive connections")
    parser.add_argument("--threads", type=int, default=8, help="waitress threads")
    parser.add_argument("--processes", type=int, default=1, help="server processes")
    parser.add_argument("--seconds", type=float, default=8.0, help="per route")
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (SQLite file)")
    parser.add_argument("--serve", nargs=2, metavar=("URL", "STORAGE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], args.serve[1], args.threads, args.processes)
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
    server, port = start_server(
        __file__,
        ["--threads", str(args.threads), "--processes", str(args.processes), "--serve", url,
         workdir],
    )  # fmt: skip
    try:
        print(
            f"waitress: {args.processes} process(es) x {args.threads} threads, {args.clients} "
            f"keep-alive clients, {args.seconds:.0f}s per route in {args.rounds} rounds, "
            f"{os.cpu_count()} CPUs\n"
        )
        results = measure(
            port, routes(), seconds=args.seconds, rounds=args.rounds, clients=args.clients,
            server_processes=args.processes,
        )  # fmt: skip
        ok = report(results)
    finally:
        stop_server(server)
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"\ntotal run: {time.perf_counter() - began:.0f}s"
        + (f"; data in {workdir}" if args.keep else "")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
