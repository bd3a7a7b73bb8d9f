"""Answer-cache memory: does junk in the key grow the server past the cache's byte bound?

    .venv/bin/python bench/cache_memory.py          # a fresh SQLite file in a temp dir
    .venv/bin/python bench/cache_memory.py --reset \
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench

Migrates a fresh database, loads 200 products, serves the real app (the real
``configure()``, ``cmsshop.answer_cache_bytes`` set to ``--bound-mib``) with waitress in
a separate process on a free loopback port, and sends it anonymous keep-alive GETs of
the public catalogue with large distinct query strings, in two rounds: unknown
parameters (``?perPage=5&junk<i>=<KiB>``) under odd ``Accept`` values, then distinct
values of a parameter the route reads (``?q=<200 distinct characters>&pad<i>=<KiB>``,
each a real answer the cache keeps). After each round it prints the server process's
RSS growth against the bound (ratio), the bytes the cache counted and its entries.
A first round of the same shape, not counted, warms the process (allocator arenas,
waitress buffers). Exits 1 when a round grows the process by more than the bound. Not
part of the test suite; a run takes under a minute.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchlib import (  # noqa: E402 - bench/benchlib.py, beside this script
    load_products,
    migrate_fresh,
    serve_wsgi,
    start_server,
    stop_server,
)

MIB = 1024 * 1024
PRODUCTS = 200
STATS_PATH = "/bench/cache-size"
ODD_ACCEPTS = ("", "*/*", "text/html", "application/json;q=0.1, text/plain", "x/y;;;")


def load(url: str, reset: bool) -> None:
    from sqlalchemy.orm import Session

    engine = migrate_fresh(url, reset)
    with Session(engine) as session:
        load_products(session, PRODUCTS, random.Random(42))
        session.commit()
    engine.dispose()


def serve(url: str, storage: str, bound: int) -> None:
    """Child process: the real app, and ``/bench/cache-size`` (the cache's counted bytes,
    entries and bound, this process's)."""
    import secrets

    from benchlib import paste_app

    app = paste_app(
        {
            "cmsshop.environment": "benchmark",
            "cmsshop.database_url": url,
            "cmsshop.secret": secrets.token_urlsafe(48),
            "cmsshop.modules": "store docs",
            "cmsshop.storage_dir": storage,
            "cmsshop.answer_cache_bytes": str(bound),
        }
    )
    cache = app.registry["cmsshop.answer_cache"]

    def dispatch(environ, start_response):
        if environ.get("PATH_INFO") != STATS_PATH:
            return app(environ, start_response)
        body = json.dumps(
            {"bytes": cache.bytes, "entries": len(cache.entries), "bound": cache.max_bytes}
        ).encode()
        start_response(
            "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        )
        return [body]

    serve_wsgi(dispatch, threads=4)


def rss(pid: int) -> int:
    """The resident set of ``pid`` in bytes (Linux: /proc/<pid>/status, VmRSS)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def unknown_parameters(i: int, kib: int) -> tuple[str, dict]:
    accept = ODD_ACCEPTS[i % len(ODD_ACCEPTS)] if i % 2 else f"application/x-junk-{i}+json"
    return f"/api/store/products?perPage=5&junk{i}={'x' * (kib * 1024)}", {"Accept": accept}


def known_values(i: int, kib: int) -> tuple[str, dict]:
    q = f"{i:08d}" + "y" * 192  # 200 characters: the longest search the route accepts
    return f"/api/store/products?q={q}&pad{i}={'z' * (kib * 1024)}", {}


def send(port: int, make, start: int, count: int, kib: int) -> dict[int, int]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    answers: dict[int, int] = {}
    for i in range(start, start + count):
        path, headers = make(i, kib)
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        response.read()
        answers[response.status] = answers.get(response.status, 0) + 1
    connection.close()
    return answers


def stats(port: int) -> dict:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("GET", STATS_PATH)
    found = json.loads(connection.getresponse().read())
    connection.close()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database-url", help="default: a fresh SQLite file in a temp dir")
    parser.add_argument("--reset", action="store_true", help="PostgreSQL: drop the schema first")
    parser.add_argument("--requests", type=int, default=1500, help="per round")
    parser.add_argument("--query-kib", type=int, default=200, help="junk per query string")
    parser.add_argument("--bound-mib", type=int, default=16, help="answer_cache_bytes")
    parser.add_argument("--serve", nargs=3, metavar=("URL", "STORAGE", "BOUND"),
                        help=argparse.SUPPRESS)  # fmt: skip
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], args.serve[1], int(args.serve[2]))
        return 0

    began = time.perf_counter()
    workdir = tempfile.mkdtemp(prefix="cmsshop-cache-memory-")
    url = args.database_url or f"sqlite:///{os.path.join(workdir, 'bench.sqlite')}"
    load(url, args.reset)
    bound = args.bound_mib * MIB
    server, port = start_server(__file__, ["--serve", url, workdir, str(bound)])
    ok = True
    try:
        warm = max(1, args.requests // 10)
        send(port, unknown_parameters, -warm, warm, args.query_kib)
        send(port, known_values, -warm, warm, args.query_kib)
        sent = args.requests * args.query_kib / 1024
        print(
            f"{args.requests} anonymous GETs per round, {args.query_kib} KiB of query string "
            f"each ({sent:.0f} MiB sent); cache bound {args.bound_mib} MiB"
        )
        for label, make in (
            ("unknown parameters, odd Accept values", unknown_parameters),
            ("distinct values of a parameter the route reads", known_values),
        ):
            before = rss(server.pid)
            answers = send(port, make, 0, args.requests, args.query_kib)
            grown = rss(server.pid) - before
            found = stats(port)
            within = grown <= bound and found["bytes"] <= found["bound"]
            ok = ok and within
            print(
                f"- {label}: answers {answers}; RSS grew {grown / MIB:.1f} MiB = "
                f"{grown / bound:.2f} of the bound; cache counted {found['bytes'] / MIB:.2f} MiB "
                f"({found['bytes'] / found['bound']:.2f} of the bound) in {found['entries']} "
                f"entries: {'within' if within else 'OVER'} the bound"
            )
    finally:
        stop_server(server)
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"total run: {time.perf_counter() - began:.0f}s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
