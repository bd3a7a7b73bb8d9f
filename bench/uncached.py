"""Uncached benchmark: what do catalogue answers cost when the answer cache cannot help?

    .venv/bin/python bench/uncached.py               # a fresh SQLite file in a temp dir
    .venv/bin/python bench/uncached.py --reset \
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench
    .venv/bin/python bench/uncached.py --skip-scaling   # the throughput part only
    .venv/bin/python bench/uncached.py --skip-load      # the scaling part only

The answer cache is OFF (``cmsshop.answer_cache_ttl = 0``): every request runs its view,
its statements and its JSON. Two parts:

1. Throughput against the bare route (bench/benchlib.py): 10,000 products and 2,000
   articles (bench/catalogue.py's load), the real app built by its paste factory (as
   pserve does) and served by waitress in a child process, wrk's keep-alive connections
   (``--client python``: the Python clients, whose CPU a request grows with the size of
   the answer and takes the same two cores from the server). Routes and targets (share
   of the bare route's req/s):
   the list page (20 products with prices and latest release, pages 1-5) 30 %, a
   product by slug (uniform over all) 50 %, an article search 30 %.
2. Scaling: for 100, 1,000, 10,000 and 100,000 products, a fresh database each, the real
   app called in-process (WSGI, no server): statements per request (a SQLAlchemy
   ``before_cursor_execute`` listener on the app's engine) and time per request of the
   same routes (wall time: the database's work included; the fastest of 5 batches).
   The statements must be the same at every size and the time within 1.5x of the
   smallest catalogue's.

Not part of the test suite; a run takes a few minutes (most of it loading 100,000 products).
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import shutil
import sys
import tempfile
import time
from urllib.parse import urlencode

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import catalogue  # noqa: E402 - bench/catalogue.py, beside this script
from benchlib import (  # noqa: E402 - bench/benchlib.py, beside this script
    BARE,
    WORDS,
    add_client_option,
    get_route,
    measure_with,
    migrate_fresh,
    production_logging,
    report,
    serve_wsgi,
    start_server,
    stop_server,
    with_bare_route,
)

SIZES = (100, 1_000, 10_000, 100_000)
MAX_GROWTH = 1.5  # time per request at the largest catalogue / at the smallest


def app_settings(url: str, storage: str) -> dict:
    return {
        "cmsshop.environment": "benchmark",
        "cmsshop.database_url": url,
        "cmsshop.secret": secrets.token_urlsafe(48),
        "cmsshop.modules": "store docs",
        "cmsshop.storage_dir": storage,
        "cmsshop.answer_cache_ttl": "0",
    }


def serve(url: str, storage: str, threads: int) -> None:
    """Child process: the real app (answer cache off) beside the bare route."""
    from benchlib import paste_app

    production_logging(os.path.join(storage, "server.log"))
    app = paste_app(app_settings(url, storage))
    serve_wsgi(with_bare_route(app), threads)


def paths(products: int):
    """(name, target, path(rng)) of each measured route."""
    return [
        (
            "GET /api/store/products?page=1..5",
            0.30,
            lambda rng: f"/api/store/products?page={rng.randrange(1, 6)}",
        ),
        (
            "GET /api/store/products/{slug}",
            0.50,
            lambda rng: f"/api/store/products/product-{rng.randrange(products):05d}",
        ),
        (
            "GET /api/docs/articles?q=...",
            0.30,
            lambda rng: "/api/docs/articles?" + urlencode({"q": rng.choice(WORDS)}),
        ),
    ]


# --- part 1: throughput against the bare route ------------------------------------------


def throughput(url: str, workdir: str, args) -> bool:
    server, port = start_server(__file__, ["--threads", str(args.threads), "--serve", url, workdir])
    try:
        print(
            f"waitress: 1 process x {args.threads} threads, {args.clients} keep-alive clients "
            f"({args.client}), "
            f"{args.seconds:.0f}s per route in {args.rounds} rounds, {os.cpu_count()} CPUs; "
            "answer cache off\n"
        )
        routes = [BARE, get_route("GET /api/health", lambda rng: "/api/health")]
        routes += [
            get_route(name, path, target=target) for name, target, path in paths(catalogue.PRODUCTS)
        ]
        results = measure_with(args.client)(
            port, routes, seconds=args.seconds, rounds=args.rounds, clients=args.clients,
            server_pid=server.pid,
        )  # fmt: skip
        ok = report(results)
        # Context switches of the server's threads: the GIL and waitress's task queue
        # handed over (docs/performance.md, "Catalogue reads").
        print(
            f"\n{'route':44}{'server CPU ms/request':>24}{'database CPU ms/request':>26}"
            f"{'context switches/request':>27}"
        )
        for r in results:
            print(
                f"{r['route'].name[:43]:44}{r['cpu_ms']:24.3f}{r['database_cpu_ms']:26.3f}"
                f"{r['switches']:27.1f}"
            )
        return ok
    finally:
        stop_server(server)


# --- part 2: statements and time per request, 100 to 100,000 products -------------------


BATCHES = 5  # per route and size; the fastest batch counts (others' load only adds time)


class Sized:
    """The app on a catalogue of ``products`` (in-process, answer cache off), counting
    the statements its engine runs."""

    def __init__(self, url: str, storage: str, products: int):
        from sqlalchemy import event

        from cmsshop.config import configure

        self.products = products
        self.app = configure(app_settings(url, storage)).make_wsgi_app()
        self.engine = self.app.registry["cmsshop.engine"]
        self.statements = 0
        event.listen(self.engine, "before_cursor_execute", self._count)
        self.rng = random.Random(7)
        self.found: dict[str, list] = {}  # route name: [statements, fastest batch, batches]

    def _count(self, *args) -> None:
        self.statements += 1

    def warm(self) -> None:
        for _name, _target, path in paths(self.products):
            for p in [path(self.rng) for _ in range(50)]:  # statements, pooled connections
                self._get(p)

    def _get(self, path: str) -> None:
        from webob import Request

        response = Request.blank(path).get_response(self.app)
        if response.status_code != 200:
            raise RuntimeError(f"{path}: {response.status}")

    def batch(self, requests: int) -> None:
        """One batch of ``requests`` requests of each route: its statements and time."""
        for name, _target, path in paths(self.products):
            batch = [path(self.rng) for _ in range(requests)]
            self.statements = 0
            began = time.perf_counter()
            for p in batch:
                self._get(p)
            took = time.perf_counter() - began
            found = self.found.setdefault(name, [0, float("inf"), 0])
            found[0] += self.statements
            found[1] = min(found[1], took)
            found[2] += 1

    def per_request(self, requests: int) -> dict:
        """{route name: (statements per request, ms per request of the fastest batch)}."""
        return {
            name: (statements / requests / batches, fastest / requests * 1000)
            for name, (statements, fastest, batches) in self.found.items()
        }

    def close(self) -> None:
        from sqlalchemy import event

        event.remove(self.engine, "before_cursor_execute", self._count)
        self.engine.dispose()


def scaling(url: str | None, workdir: str, args) -> bool:
    """Statements and in-process wall time a request (which includes the database's work;
    on PostgreSQL another process) at each catalogue size. On SQLite every size is loaded
    first and the sizes take turns, batch by batch, so a machine whose speed drifts during
    the run slows them alike (measured one after another, the ratio of largest to smallest
    moved between x0.5 and x2 from run to run); PostgreSQL holds one database, so there the
    sizes are measured one after another."""
    interleaved = not url
    print(
        "\nscaling: in-process (no server), answer cache off; statements and ms per request "
        f"(wall time, the fastest of {BATCHES} batches of {args.requests} requests per route"
        f"{'; the sizes take turns' if interleaved else ''})\n"
    )
    print(f"{'route':36}" + "".join(f"{n:>18,}" for n in SIZES))
    results: list[dict] = []
    sized_apps: list[Sized] = []
    try:
        for size in SIZES:
            sized = url or f"sqlite:///{workdir}/scaling-{size}.sqlite"
            began = time.perf_counter()
            load(sized, size)
            print(f"  ({size:,} products loaded in {time.perf_counter() - began:.0f}s)", flush=True)
            app = Sized(sized, workdir, size)
            app.warm()
            if interleaved:
                sized_apps.append(app)
                continue
            try:
                for _ in range(BATCHES):
                    app.batch(args.requests)
                results.append(app.per_request(args.requests))
            finally:
                app.close()
        for _ in range(BATCHES if interleaved else 0):
            for app in sized_apps:
                app.batch(args.requests)
        results += [app.per_request(args.requests) for app in sized_apps]
    finally:
        for app in sized_apps:
            app.close()
    ok = True
    for name in results[0]:
        values = [found[name] for found in results]
        cells = "".join(f"{f'{s:g} st, {ms:.2f} ms':>18}" for s, ms in values)
        # To two decimals: a statement run now and then by the clock, not by the catalogue
        # (a version check once its interval passed) adds a thousandth or so.
        statements = {round(s, 2) for s, _ in values}
        growth = values[-1][1] / values[0][1]
        verdict = []
        if len(statements) != 1:
            verdict.append("statements vary")
        if growth > MAX_GROWTH:
            verdict.append(f"time x{growth:.2f} > x{MAX_GROWTH}")
        ok = ok and not verdict
        verdict = "FAIL: " + ", ".join(verdict) if verdict else "ok"
        print(f"{name[:35]:36}{cells}  x{growth:.2f} {verdict}")
    return ok


def load(url: str, products: int) -> None:
    """A fresh database with ``products`` products and the articles (bench/catalogue.py:
    on PostgreSQL without per-row triggers, the content version bumped once)."""
    migrate_fresh(url, True).dispose()
    catalogue.load(url, fresh=False, products=products)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database-url", help="default: fresh SQLite files in a temp dir")
    parser.add_argument("--reset", action="store_true", help="PostgreSQL: drop the schema first")
    parser.add_argument("--clients", type=int, default=8, help="keep-alive connections")
    add_client_option(parser)
    parser.add_argument("--threads", type=int, default=8, help="waitress threads")
    parser.add_argument("--seconds", type=float, default=6.0, help="per route")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    parser.add_argument("--requests", type=int, default=200, help="per batch (scaling)")
    parser.add_argument("--skip-load", action="store_true", help="skip the throughput part")
    parser.add_argument("--skip-scaling", action="store_true", help="skip the scaling part")
    parser.add_argument("--serve", nargs=2, metavar=("URL", "STORAGE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], args.serve[1], args.threads)
        return 0
    if args.database_url and not args.reset:
        sys.exit("every part starts from an empty database: pass --reset with --database-url")

    workdir = tempfile.mkdtemp(prefix="cmsshop-uncached-bench-")
    began = time.perf_counter()
    ok = True
    try:
        if not args.skip_load:
            url = args.database_url or f"sqlite:///{workdir}/bench.sqlite"
            load(url, catalogue.PRODUCTS)
            print(
                f"database: {url.split('@')[-1]} -- {catalogue.PRODUCTS} products (2 prices, "
                f"1 release each), {catalogue.ARTICLES} articles"
            )
            ok = throughput(url, workdir, args) and ok
        if not args.skip_scaling:
            ok = scaling(args.database_url, workdir, args) and ok
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\ntotal run: {time.perf_counter() - began:.0f}s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
