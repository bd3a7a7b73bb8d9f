"""Scaling out: N server processes on one database against one process, same machine.

    .venv/bin/python bench/scaling.py --reset \
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench

Loads the catalogue of bench/catalogue.py (10,000 products, 2,000 articles) and the
licenses of bench/licensing.py (100,000, 10,000 activated) into one fresh database,
then serves the app (store, docs and licensing on) first from one process and then
from ``--processes`` processes sharing one listening socket (the pre-fork model of
gunicorn's workers, with waitress as the worker: each process has its own threads,
pool and answer cache; bench/benchlib.py serve_wsgi). In each setup it measures the
bare Pyramid route, the catalogue list and licence validate, and prints every route's
throughput in both setups and the ratio. Exits 1 unless validate and the catalogue list
reach ``--target`` (1.6) times their one-process throughput with 2 processes.

The clients run on the same machine: on 2 cores they take CPU from the servers, so the
ratio measured here is a floor for what a separate load balancer would see.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import catalogue  # noqa: E402 - bench/catalogue.py, beside this script
import licensing  # noqa: E402 - bench/licensing.py
from benchlib import (  # noqa: E402
    BARE,
    get_route,
    measure,
    production_logging,
    serve_wsgi,
    start_server,
    stop_server,
    with_bare_route,
)


def serve(url: str, work: str, threads: int, processes: int) -> None:
    from cmsshop.config import configure

    production_logging(os.path.join(work, "server.log"))
    settings = {
        **licensing.bench_settings(url, os.path.join(work, "keys")),
        "cmsshop.modules": "store docs licensing",
        "cmsshop.storage_dir": work,
    }
    serve_wsgi(with_bare_route(configure(settings).make_wsgi_app()), threads, processes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database-url", help="default: a fresh SQLite file in a temp dir")
    parser.add_argument("--reset", action="store_true", help="PostgreSQL: drop the schema first")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8, help="waitress threads per process")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=8.0, help="per route and setup")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--target", type=float, default=1.6)
    parser.add_argument("--serve", nargs=3, metavar=("URL", "WORK", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], args.serve[1], args.threads, int(args.serve[2]))
        return 0

    work = tempfile.mkdtemp(prefix="cmsshop-scaling-bench-")
    url = args.database_url or f"sqlite:///{work}/bench.sqlite"
    from cmsshop.services.licensing.signing import generate_signing_key

    generate_signing_key(os.path.join(work, "keys"))
    licensing.prepare_database(url, 100_000, 10_000, args.reset)
    catalogue.load(url, fresh=False)
    sample = licensing.activated_sample(url, 10_000)
    routes = [
        BARE,
        get_route(
            "GET /api/store/products?page=1..5",
            lambda rng: f"/api/store/products?page={rng.randrange(1, 6)}",
        ),
        licensing.validate_route(sample),
    ]
    throughput = {}
    for processes in (1, args.processes):
        server, port = start_server(
            __file__, ["--threads", str(args.threads), "--serve", url, work, str(processes)]
        )
        try:
            results = measure(
                port, routes, seconds=args.seconds, rounds=args.rounds, clients=args.connections,
                server_processes=processes,
            )  # fmt: skip
        finally:
            stop_server(server)
        throughput[processes] = {r["route"].name: r for r in results}
    print(
        f"\nbackend {url.split(':', 1)[0]}; {args.threads} waitress threads a process, "
        f"{args.connections} keep-alive connections, {os.cpu_count()} CPUs\n"
    )
    one, many = throughput[1], throughput[args.processes]
    print(
        f"{'route':40}{'1 process':>11}{'p99 ms':>8}{f'{args.processes} processes':>13}"
        f"{'p99 ms':>8}{'ratio':>7}  verdict"
    )
    ok = True
    for route in routes:
        a, b = one[route.name], many[route.name]
        ratio = b["rps"] / a["rps"] if a["rps"] else 0.0
        enforced = route is not BARE
        good = ratio >= args.target and not a["errors"] and not b["errors"]
        ok = ok and (good or not enforced)
        verdict = ("ok" if good else f"FAIL: < {args.target}x") if enforced else "-"
        print(
            f"{route.name[:39]:40}{a['rps']:11.0f}{a['p99_ms']:8.1f}{b['rps']:13.0f}"
            f"{b['p99_ms']:8.1f}{ratio:7.2f}  {verdict}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
