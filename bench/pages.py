"""Page benchmark: is the HTML product list as cheap as the JSON list it is built on?

    .venv/bin/python bench/pages.py          # a fresh SQLite file in a temp dir
    .venv/bin/python bench/pages.py --reset \
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench

It creates and migrates a fresh database, loads 200 published products (two prices and a
release each), serves the real app (the real ``configure()``) with waitress in a separate
process on a free loopback port, and drives it with concurrent keep-alive clients (see
bench/benchlib.py). In the same run it measures
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
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from benchlib import (  # noqa: E402 - bench/benchlib.py, beside this script
    BARE,
    get_route,
    load_products,
    measure,
    migrate_fresh,
    report,
    serve_wsgi,
    start_server,
    stop_server,
    with_bare_route,
)

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
    """Child process: the real app beside the bare route on a free loopback port, with
    the answer cache off: the page and the JSON list then do the same queries, and the
    ratio is the cost of rendering HTML instead of JSON."""
    import secrets

    from cmsshop.config import configure

    app = configure(
        {
            "cmsshop.environment": "benchmark",
            "cmsshop.database_url": url,
            "cmsshop.secret": secrets.token_urlsafe(48),
            "cmsshop.modules": "store",
            "cmsshop.storage_dir": storage,
            "cmsshop.answer_cache_ttl": "0",
        }
    ).make_wsgi_app()
    serve_wsgi(with_bare_route(app), threads)


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
    pages = PRODUCTS // PER_PAGE

    def query(rng) -> str:
        return f"?page={rng.randrange(1, pages + 1)}&perPage={PER_PAGE}"

    json_route = get_route(
        "GET /api/store/products (JSON)", lambda rng: "/api/store/products" + query(rng)
    )
    page_route = get_route("GET /products (HTML page)", lambda rng: "/products" + query(rng))
    server, port = start_server(__file__, ["--threads", str(args.threads), "--serve", url, workdir])
    try:
        print(
            f"database: {url.split('@')[-1]} -- {PRODUCTS} products, {PER_PAGE} a page\n"
            f"waitress: {args.threads} threads, {args.clients} keep-alive clients, "
            f"{args.seconds:.0f}s per route, {os.cpu_count()} CPUs; answer cache off\n"
        )
        results = measure(
            port, [BARE, json_route, page_route], seconds=args.seconds, rounds=4,
            clients=args.clients,
        )  # fmt: skip
        ok = report(results)
    finally:
        stop_server(server)
        shutil.rmtree(workdir, ignore_errors=True)
    _, json_result, page_result = results
    ratio = page_result["rps"] / json_result["rps"]
    print(
        f"\npage / JSON throughput: {ratio:.2f} (at least {MIN_RATIO:.2f} required); "
        f"total run {time.perf_counter() - began:.0f}s"
    )
    if ratio < MIN_RATIO:
        print("FAIL: the HTML page is more than twice as slow as the JSON route")
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
