"""Page benchmark: is the HTML product list as cheap as the JSON list it is built on?

    .venv/bin/python bench/pages.py          # a fresh SQLite file in a temp dir
    .venv/bin/python bench/pages.py --reset \
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench

It creates and migrates a fresh database, loads 200 published products (two prices and a
release each), serves the real app (the real ``configure()``) with waitress in a separate
process on a free loopback port, and drives it with concurrent keep-alive clients (see
bench/catalogue.py, whose client loop it reuses). In the same run it measures
``GET /products`` (the Jinja2 page) and ``GET /api/store/products`` (the JSON list), both
on random pages of the same size, and prints requests/s, p50/p99 latency and the ratio.
It exits 1 when the page's throughput is under half the JSON route's. Not part of the
test suite; a run takes about half a minute.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from benchlib import ROOT, load_products, migrate_fresh, serve_app  # noqa: E402 - bench/benchlib.py, beside this script
from catalogue import drive  # noqa: E402 - the keep-alive client loop of bench/catalogue.py

PRODUCTS = 200
PER_PAGE = 20
MIN_RATIO = 0.5  # the page may cost at most twice the JSON route


def load(url: str) -> None:
    from sqlalchemy.orm import Session

    from cmsshop.db import make_engine

    engine = make_engine(url)
    with Session(engine) as session:
        load_products(session, PRODUCTS, random.Random(42))
        session.commit()
    engine.dispose()


def serve(url: str, storage: str, threads: int) -> None:
    """Child process: the real app on a free loopback port; prints the port."""
    serve_app(url, storage, threads, modules="store")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database-url", help="default: a fresh SQLite file in a temp dir")
    parser.add_argument("--reset", action="store_true", help="PostgreSQL: drop the schema first")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--threads", type=int, default=8, help="waitress threads")
    parser.add_argument("--seconds", type=float, default=8.0, help="per route")
    parser.add_argument("--serve", nargs=2, metavar=("URL", "STORAGE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], args.serve[1], args.threads)
        return 0

    workdir = tempfile.mkdtemp(prefix="cmsshop-pages-bench-")
    url = args.database_url or f"sqlite:///{workdir}/bench.sqlite"
    began = time.perf_counter()
    migrate_fresh(url, args.reset).dispose()
    load(url)
    server = subprocess.Popen(
        [sys.executable, __file__, "--threads", str(args.threads), "--serve", url, workdir],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        port = int(server.stdout.readline())
        rng = random.Random(7)
        pages = PRODUCTS // PER_PAGE

        def query() -> str:
            return f"?page={rng.randrange(1, pages + 1)}&perPage={PER_PAGE}"

        routes = [
            ("GET /api/store/products (JSON)", lambda: "/api/store/products" + query()),
            ("GET /products (HTML page)", lambda: "/products" + query()),
        ]
        print(
            f"database: {url.split('@')[-1]} -- {PRODUCTS} products, {PER_PAGE} a page\n"
            f"waitress: {args.threads} threads, {args.clients} keep-alive clients, "
            f"{args.seconds:.0f}s per route after 1s warm-up, {os.cpu_count()} CPUs\n"
        )
        print(f"{'route':32} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
        results = []
        for name, paths in routes:
            result = drive(port, paths, args.clients, args.seconds, warmup=1.0)
            results.append(result)
            print(
                f"{name:32} {result['rps']:8.0f} {result['p50']:8.1f} {result['p99']:8.1f} "
                f"{result['errors']:7d}"
            )
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)
    json_result, page_result = results
    ratio = page_result["rps"] / json_result["rps"]
    print(
        f"\npage / JSON throughput: {ratio:.2f} (at least {MIN_RATIO:.2f} required); "
        f"total run {time.perf_counter() - began:.0f}s"
    )
    if json_result["errors"] or page_result["errors"]:
        print("FAIL: some requests did not answer 200")
        return 1
    if ratio < MIN_RATIO:
        print("FAIL: the HTML page is more than twice as slow as the JSON route")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
