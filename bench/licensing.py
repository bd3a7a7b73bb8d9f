"""Benchmark: POST /api/license/validate against a bare JSON route of the same app.

    .venv/bin/python bench/licensing.py                      # SQLite in a temp dir
    .venv/bin/python bench/licensing.py --reset \
        --database-url postgresql+psycopg://postgres@127.0.0.1/bench

Builds a fresh database with 100,000 licenses (10,000 of them activated), serves the
app with waitress in a separate process (8 threads, like development.ini; production
logging at INFO, into a file) beside the bare Pyramid route (bench/benchlib.py), and
drives both from two client processes with 16 keep-alive connections in all, the routes
taking turns in short rounds. Validate gets a fresh nonce and a random activated license
on every call. Prints requests/s, p50 and p99 latency and the server's CPU time per
request, and exits 1 unless validate reaches 35 % of the bare route's throughput with a
p99 under 25 ms. The licensing rate limits are raised for the run (one client IP sends
everything). ``--processes 2`` serves from two processes sharing the listening socket.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/benchlib.py
PRODUCT = "bench-product"


def bench_settings(database_url: str, key_dir: str) -> dict:
    return {
        "cmsshop.environment": "bench",
        "cmsshop.database_url": database_url,
        "cmsshop.secret": "bench-secret-0123456789-abcdefghijklmnopqrstuvwxyz",
        "cmsshop.base_url": "http://127.0.0.1",
        "cmsshop.modules": "licensing",
        "cmsshop.license_key_dir": key_dir,
        "cmsshop.license_rate_per_ip": "100000000/60",
        "cmsshop.license_rate_per_license": "100000/60",
        "cmsshop.license_rate_churn": "100000/3600",
    }


# --- database ------------------------------------------------------------------------------


def prepare_database(url: str, licenses: int, activated: int, reset: bool) -> None:
    from benchlib import migrate_fresh  # bench/benchlib.py, beside this script
    from sqlalchemy import insert, select

    from cmsshop.models import Activation, License, Product
    from cmsshop.services.licensing.records import fingerprint_hash
    from cmsshop.util import READABLE_ALPHABET, utcnow

    engine = migrate_fresh(url, reset)

    started = time.perf_counter()
    now = utcnow()
    alphabet = READABLE_ALPHABET
    with engine.begin() as conn:
        conn.execute(insert(Product).values(slug=PRODUCT, name="Bench", licensed=True))
        product_id = conn.scalar(select(Product.id).where(Product.slug == PRODUCT))
        chunk = 20_000
        for start in range(0, licenses, chunk):
            rows = []
            for _ in range(start, min(licenses, start + chunk)):
                raw = "".join(alphabet[b % 32] for b in secrets.token_bytes(25))
                key = "-".join(raw[i : i + 5] for i in range(0, 25, 5))
                rows.append(
                    {
                        "key": key,
                        "product_id": product_id,
                        "status": "active",
                        "max_activations": 3,
                        "created_at": now,
                        "updated_at": now,
                    }
                )
            conn.execute(insert(License), rows)  # executemany
        ids = conn.execute(select(License.id).order_by(License.id).limit(activated)).scalars().all()
        rows = [
            {
                "licence_id": license_id,  # Core insert: the stored column's name
                "fingerprint": f"bench-install-{license_id}",
                "fingerprint_sha256": fingerprint_hash(f"bench-install-{license_id}"),
                "domain": f"site{license_id}.bench-customer.com",
                "environment": "production",
                "active": True,
                "activated_at": now,
            }
            for license_id in ids
        ]
        conn.execute(insert(Activation), rows)
    engine.dispose()
    print(
        f"database: {licenses:,} licenses, {activated:,} activated, "
        f"inserted in {time.perf_counter() - started:.1f}s",
        flush=True,
    )


def activated_sample(url: str, count: int) -> list[dict]:
    from sqlalchemy import select

    from cmsshop.db import make_engine
    from cmsshop.models import Activation, License

    engine = make_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(
            select(License.key, Activation.fingerprint, Activation.domain)
            .join(Activation, Activation.license_id == License.id)
            .limit(count)
        ).all()
    engine.dispose()
    return [{"licenseKey": k, "fingerprint": f, "domain": d} for k, f, d in rows]


# --- server --------------------------------------------------------------------------------


def serve(database_url: str, key_dir: str, threads: int, processes: int, log_path: str) -> None:
    """Child process: the app beside the bare route on a free loopback port."""
    from benchlib import paste_app, production_logging, serve_wsgi, with_bare_route

    production_logging(log_path)
    app = paste_app(bench_settings(database_url, key_dir))
    serve_wsgi(with_bare_route(app), threads, processes)


# --- routes ---------------------------------------------------------------------------------

TARGET = 0.35  # of the bare route's throughput
P99_MS = 25.0


def validate_route(sample: list[dict]):
    """POST /api/license/validate with a random activated license and a fresh nonce."""
    from benchlib import Route, http_request

    def requests(rng, n):
        out = []
        for _ in range(n):
            item = sample[rng.randrange(len(sample))]
            nonce = f"{rng.getrandbits(128):032x}"
            body = json.dumps({"product": PRODUCT, "nonce": nonce, **item}).encode()
            out.append(
                http_request(
                    "POST",
                    "/api/license/validate",
                    body,
                    {"Content-Type": "application/json"},
                )
            )
        return out

    return Route("POST /api/license/validate", requests, target=TARGET, p99_ms=P99_MS)


def add_load_arguments(parser: argparse.ArgumentParser) -> None:
    """The database size and the load."""
    parser.add_argument("--licenses", type=int, default=100_000)
    parser.add_argument("--activated", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per route")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    parser.add_argument("--connections", type=int, default=16, help="keep-alive connections")
    parser.add_argument("--threads", type=int, default=8, help="waitress threads")


def main(argv=None) -> int:
    from benchlib import BARE, measure, report, start_server, stop_server

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", help="default: SQLite in a temporary directory")
    parser.add_argument("--reset", action="store_true", help="wipe a non-empty PostgreSQL db")
    add_load_arguments(parser)
    parser.add_argument("--processes", type=int, default=1, help="server processes")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--key-dir", help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.serve:
        serve(args.database_url, args.key_dir, args.threads, args.processes, args.log)
        return 0

    workdir = tempfile.mkdtemp(prefix="cmsshop-bench-")
    url = args.database_url or f"sqlite:///{workdir}/bench.sqlite"
    key_dir = os.path.join(workdir, "keys")
    from cmsshop.services.licensing.signing import generate_signing_key

    generate_signing_key(key_dir)
    prepare_database(url, args.licenses, args.activated, args.reset)
    sample = activated_sample(url, args.activated)

    server, port = start_server(
        __file__,
        ["--serve", "--database-url", url, "--key-dir", key_dir, "--threads",
         str(args.threads), "--processes", str(args.processes), "--log",
         os.path.join(workdir, "server.log")],
    )  # fmt: skip
    try:
        print(
            f"server: waitress, {args.processes} process(es) x {args.threads} threads, port "
            f"{port}; {args.connections} keep-alive connections; {args.seconds:.0f}s per route "
            f"in {args.rounds} alternating rounds; backend {url.split(':', 1)[0]}\n",
            flush=True,
        )
        results = measure(
            port,
            [BARE, validate_route(sample)],
            seconds=args.seconds,
            rounds=args.rounds,
            clients=args.connections,
            warmup=2.0,
            server_processes=args.processes,
            server_pid=server.pid if args.processes == 1 else None,
        )
        ok = report(results)
    finally:
        stop_server(server)
    for r in results:
        print(f"server CPU per request, {r['route'].name}: {r['cpu_ms']:.2f} ms")
    if url.startswith("postgresql"):
        validate = results[-1]
        print(
            f"PostgreSQL CPU per request (its local processes), {validate['route'].name}: "
            f"{validate['database_cpu_ms']:.2f} ms"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
