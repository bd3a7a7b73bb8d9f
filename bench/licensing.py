"""Benchmark: POST /api/license/validate against a bare JSON route of the same app.

    .venv/bin/python bench/licensing.py                      # SQLite in a temp dir
    .venv/bin/python bench/licensing.py --reset \
        --database-url postgresql+psycopg://postgres@127.0.0.1/bench

Builds a fresh database with 100,000 licenses (10,000 of them activated), serves the
app with waitress in a separate process (8 threads, like development.ini), and drives
it from client processes with keep-alive connections, the routes taking turns in short
rounds: the bare route (GET /api/health: JSON plus one trivial database round trip) and
validate with a fresh nonce and a random activated license on every call. Prints
requests/s, p50 and p99 latency and the server's CPU time per request for both, and the
throughput ratio (exit status 1 below 40 %). The licensing rate limits are raised for the run
(one client IP sends everything).
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import random
import secrets
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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


def serve(database_url: str, key_dir: str, threads: int) -> None:
    """Child process: serve the app and print the port."""
    import logging

    from waitress.server import create_server

    from cmsshop.config import configure

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)  # "queue depth" is the point
    app = configure(bench_settings(database_url, key_dir)).make_wsgi_app()
    server = create_server(app, host="127.0.0.1", port=0, threads=threads, connection_limit=1000)
    print(server.effective_port, flush=True)
    server.run()


# --- load ----------------------------------------------------------------------------------


def client_worker(args) -> list[float]:
    """One client process: ``connections`` threads, each with a keep-alive connection."""
    import threading

    port, route, duration, connections, sample, seed = args
    rng = random.Random(seed)
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()

    def validate_body() -> bytes:
        item = rng.choice(sample)
        return json.dumps({"product": PRODUCT, "nonce": secrets.token_urlsafe(16), **item}).encode()

    # Bodies (each with a fresh nonce) are made before the clock starts, so the client's
    # own JSON work does not take CPU from the server on a small machine.
    count = int(duration * 1500) + 100 if route == "validate" else 0
    bodies = iter([validate_body() for _ in range(count)])
    deadline = time.perf_counter() + duration

    def loop():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        local: list[float] = []
        bad = 0
        while time.perf_counter() < deadline:
            if route == "validate":
                body = next(bodies, None) or validate_body()
                started = time.perf_counter()
                conn.request(
                    "POST",
                    "/api/license/validate",
                    body,
                    {"Content-Type": "application/json"},
                )
            else:
                started = time.perf_counter()
                conn.request("GET", route)
            response = conn.getresponse()
            response.read()
            local.append(time.perf_counter() - started)
            if response.status != 200:
                bad += 1
        conn.close()
        with lock:
            latencies.extend(local)
            errors[0] += bad

    threads = [threading.Thread(target=loop) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [float(errors[0]), *latencies]


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc), or NaN elsewhere."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def run_round(pool, port, route, seconds, processes, connections, sample, server_pid):
    """One burst of load on one route: (errors, latencies, server CPU seconds)."""
    jobs = [(port, route, seconds, connections, sample, random.random()) for _ in range(processes)]
    cpu_before = process_cpu_seconds(server_pid)
    results = pool.map(client_worker, jobs)
    cpu_used = process_cpu_seconds(server_pid) - cpu_before
    return int(sum(r[0] for r in results)), [x for r in results for x in r[1:]], cpu_used


def summarise(route: str, errors: int, latencies: list[float], seconds: float, cpu: float):
    latencies = sorted(latencies)
    count = len(latencies)
    return {
        "route": route,
        "requests": count,
        "errors": errors,
        "rps": count / seconds,
        "p50_ms": statistics.median(latencies) * 1000 if count else float("nan"),
        "p99_ms": latencies[max(0, int(count * 0.99) - 1)] * 1000 if count else float("nan"),
        "server_cpu_ms": cpu / count * 1000 if count else float("nan"),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", help="default: SQLite in a temporary directory")
    parser.add_argument("--reset", action="store_true", help="wipe a non-empty PostgreSQL db")
    parser.add_argument("--licenses", type=int, default=100_000)
    parser.add_argument("--activated", type=int, default=10_000)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per route")
    parser.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="the routes take turns in this many rounds, so that load from other programs "
        "on the machine hits both alike",
    )
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--processes", type=int, default=2, help="client processes")
    parser.add_argument("--connections", type=int, default=4, help="connections per process")
    parser.add_argument("--threads", type=int, default=8, help="waitress threads")
    parser.add_argument("--bare-route", default="/api/health")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--key-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.serve:
        serve(args.database_url, args.key_dir, args.threads)
        return 0

    workdir = tempfile.mkdtemp(prefix="cmsshop-bench-")
    url = args.database_url or f"sqlite:///{workdir}/bench.sqlite"
    key_dir = os.path.join(workdir, "keys")
    from cmsshop.services.licensing.signing import generate_signing_key

    generate_signing_key(key_dir)
    prepare_database(url, args.licenses, args.activated, args.reset)
    sample = activated_sample(url, args.activated)

    server = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--serve", "--database-url", url,
         "--key-dir", key_dir, "--threads", str(args.threads)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        port = int(server.stdout.readline())
        print(
            f"server: waitress, {args.threads} threads, port {port}; clients: "
            f"{args.processes} processes x {args.connections} keep-alive connections",
            flush=True,
        )
        routes = (args.bare_route, "validate")
        totals = {route: [0, [], 0.0] for route in routes}
        slice_ = args.duration / args.rounds
        load = (args.processes, args.connections, sample, server.pid)
        with multiprocessing.get_context("spawn").Pool(args.processes) as pool:
            for route in routes:
                run_round(pool, port, route, args.warmup, *load)
            for _ in range(args.rounds):
                for route in routes:
                    errors, latencies, cpu = run_round(pool, port, route, slice_, *load)
                    totals[route][0] += errors
                    totals[route][1].extend(latencies)
                    totals[route][2] += cpu
        results = [
            summarise(route, *totals[route][:2], args.duration, totals[route][2])
            for route in routes
        ]
    finally:
        server.terminate()
        server.wait(timeout=10)

    backend = url.split(":", 1)[0]
    print(
        f"\nbackend: {backend}; {args.duration:.0f}s per route in {args.rounds} alternating "
        f"rounds, after {args.warmup:.0f}s warm-up"
    )
    print(
        f"{'route':<28}{'requests':>10}{'errors':>8}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}"
        f"{'server CPU ms/req':>19}"
    )
    for r in results:
        name = "POST /api/license/validate" if r["route"] == "validate" else f"GET {r['route']}"
        print(
            f"{name:<28}{r['requests']:>10}{r['errors']:>8}{r['rps']:>10.0f}"
            f"{r['p50_ms']:>10.2f}{r['p99_ms']:>10.2f}{r['server_cpu_ms']:>19.2f}"
        )
    ratio = results[1]["rps"] / results[0]["rps"] if results[0]["rps"] else 0.0
    print(f"\nvalidate / bare route throughput: {ratio:.0%} (must be >= 40%)")
    return 0 if ratio >= 0.40 and not any(r["errors"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
