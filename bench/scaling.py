"""Scaling out: two application processes against one, answer cache on and off, same machine.

    createdb -h 127.0.0.1 -U postgres bench
    .venv/bin/python bench/scaling.py --reset \
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench

Loads the catalogue of bench/catalogue.py (10,000 products with two prices and a release
each, 2,000 articles; ``--reuse``: a previous run's database as it is) and serves the app
(store and docs on; licensing too with ``--validate``) in four setups at once: the answer
cache on (the default) and off (``cmsshop.answer_cache_ttl = 0``: every answer computed),
each from one process and from ``--processes`` (2) processes sharing one listening socket
(the pre-fork model of gunicorn's workers, with waitress as the worker: each process has
its own threads, pool and answer cache; bench/benchlib.py serve_wsgi). The setups take
turns in rounds, and within a setup the routes do: the bare Pyramid route, a catalogue
list page (pages 1-5, 20 products each) and a product by slug (Zipf over the first 1,000
products; with the cache on, every process has answered each of them once before the
rounds, so every request is a hit, the steady state of a shop's popular products). The
idle setups' servers wait meanwhile.

For each route it prints req/s in both setups, the ratio of N processes to one, the
ratio to the bare route, and CPU time per request: the app's (every server process),
PostgreSQL's (the backends serving this database, not the whole cluster, which other
programs may share), the load driver's clients, and how many cores other programs kept
busy meanwhile. The last lines are Markdown rows for the table in docs/performance.md
and the arithmetic for a larger machine (``--cores``) from the measured CPU per request.
Exits 1 on any error answer, or with ``--target R`` when a catalogue route's N-process
throughput is below R times its one-process throughput.

The clients run on the same cores as the servers and PostgreSQL: on 2 cores they take
CPU from the servers, so the ratio measured here is a floor for what a separate load
balancer would see; the CPU per request is what carries over to another machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import catalogue  # noqa: E402 - bench/catalogue.py, beside this script
import licensing  # noqa: E402 - bench/licensing.py
from benchlib import (  # noqa: E402
    BARE,
    DatabaseBackends,
    get_route,
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

LIST = "GET /api/store/products?page=1..5"
SLUG = "GET /api/store/products/{slug}, Zipf over 1,000"
POPULAR = 1_000
SHORT = {
    BARE.name: "bare route",
    LIST: "catalogue list (pages 1-5)",
    SLUG: "product by slug",
    "POST /api/license/validate": "licence validate",
}


def other_cores(result: dict) -> float:
    """Cores busy with other programs during the route's rounds: the machine's busy time
    less the server's, the database's and the clients'."""
    ours = sum(
        result[key]
        for key in ("cpu_ms", "database_cpu_ms", "client_cpu_ms")
        if result[key] == result[key]
    )
    return max(0.0, (result["machine_cpu_ms"] - ours) * result["rps"] / 1000)


def serve(url: str, work: str, threads: int, processes: int, ttl: str, validate: bool) -> None:
    import secrets

    from benchlib import paste_app

    production_logging(os.path.join(work, "server.log"))
    settings = {
        "cmsshop.environment": "benchmark",
        "cmsshop.database_url": url,
        "cmsshop.secret": secrets.token_urlsafe(48),
        "cmsshop.modules": "store docs",
        "cmsshop.storage_dir": work,
        "cmsshop.answer_cache_ttl": ttl,
    }
    if validate:
        settings.update(licensing.bench_settings(url, os.path.join(work, "keys")))
        settings["cmsshop.modules"] = "store docs licensing"
        settings["cmsshop.answer_cache_ttl"] = ttl
    serve_wsgi(with_bare_route(paste_app(settings)), threads, processes)


def routes(visit: bool, sample) -> list:
    """The bare route, a list page and a product by slug (Zipf over the first 1,000
    products: every one of them is in every process's answer cache after ``visit``);
    licence validate with ``sample``."""
    popular = zipf_sampler(POPULAR)
    every_product = [f"/api/store/products/product-{i:05d}" for i in range(POPULAR)]
    out = [
        BARE,
        get_route(LIST, lambda rng: f"/api/store/products?page={rng.randrange(1, 6)}"),
        get_route(
            SLUG,
            lambda rng: f"/api/store/products/product-{popular(rng):05d}",
            visit=every_product if visit else (),
        ),
    ]
    if sample:
        out.append(licensing.validate_route(sample))
    return out


def combine(rounds: list[list[dict]]) -> list[dict]:
    """One result per route from rounds of ``measure`` (one round each): sums and
    request-weighted means; p50 the rounds' weighted mean, p99 the worst round's."""
    combined = []
    for results in zip(*rounds, strict=True):
        count = sum(r["requests"] for r in results) or 1
        seconds = sum(r["requests"] / r["rps"] for r in results if r["rps"])
        shares = [(r["hit_share"], r["requests"]) for r in results if r["hit_share"] is not None]

        def mean(key, results=results, count=count):
            return sum(r[key] * r["requests"] for r in results) / count

        combined.append(
            {
                "route": results[0]["route"],
                "requests": count,
                "errors": sum(r["errors"] for r in results),
                "rps": count / seconds if seconds else 0.0,
                "p50_ms": mean("p50_ms"),
                "p99_ms": max(r["p99_ms"] for r in results),
                "hit_share": sum(s * n for s, n in shares) / sum(n for _, n in shares)
                if shares
                else None,
                **{
                    key: mean(key)
                    for key in ("cpu_ms", "database_cpu_ms", "client_cpu_ms", "machine_cpu_ms")
                },
            }
        )
    return combined


def fmt(value: float, digits: int = 2) -> str:
    return "-" if value != value else f"{value:.{digits}f}"  # NaN: not measured


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database-url", help="default: a fresh SQLite file in a temp dir")
    parser.add_argument("--reset", action="store_true", help="PostgreSQL: drop the schema first")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8, help="waitress threads per process")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=6.0, help="per route and setup")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--cache", choices=("on", "off", "both"), default="both", help="answer cache setups"
    )
    parser.add_argument(
        "--validate", action="store_true", help="also licence validate (100,000 licenses)"
    )
    parser.add_argument(
        "--reuse", action="store_true", help="the database holds a previous run's data: no load"
    )
    parser.add_argument("--cores", type=int, default=16, help="the larger machine's cores")
    parser.add_argument("--target", type=float, help="N/1 ratio the catalogue routes must reach")
    parser.add_argument("--serve", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        url, work, processes, ttl, validate = args.serve
        serve(url, work, args.threads, int(processes), ttl, validate == "1")
        return 0

    began = time.perf_counter()
    work = tempfile.mkdtemp(prefix="cmsshop-scaling-bench-")
    url = args.database_url or f"sqlite:///{work}/bench.sqlite"
    backend = url.split(":", 1)[0].split("+")[0]
    # The bulk load's statements (20,000 rows of prices in one executemany, a content
    # version bump each) may outlast the app's bounds on a busy machine (the answer's, the
    # statement's, and tcp_user_timeout's while PostgreSQL is not reading the pipeline):
    # the load gets minutes, the servers keep their bounds.
    import cmsshop.db

    make_engine = cmsshop.db.make_engine

    def patient_engine(url, **kwargs):
        if not url.startswith("postgresql"):
            return make_engine(url, **kwargs)
        # catalogue.load() asks for these bounds itself; licensing's load does not.
        kwargs.setdefault("connect_args", {}).setdefault("tcp_user_timeout", 600_000)
        kwargs.setdefault("answer_timeout", 600)
        kwargs.setdefault("statement_timeout_ms", 600_000)
        return make_engine(url, **kwargs)

    cmsshop.db.make_engine = patient_engine
    if args.validate:
        from cmsshop.services.licensing.signing import generate_signing_key

        generate_signing_key(os.path.join(work, "keys"))
    if args.reuse:
        pass
    elif args.validate:
        licensing.prepare_database(url, 100_000, 10_000, args.reset)
        catalogue.load(url, fresh=False)
    else:
        migrate_fresh(url, args.reset).dispose()
        catalogue.load(url)
    sample = licensing.activated_sample(url, 10_000) if args.validate else None
    cmsshop.db.make_engine = make_engine
    print(f"loaded in {time.perf_counter() - began:.0f}s", flush=True)

    database = DatabaseBackends(url) if backend == "postgresql" else None
    caches = [c for c in ("on", "off") if args.cache in (c, "both")]
    setups = [(c, p) for c in caches for p in (1, args.processes)]
    servers, results = {}, {setup: [] for setup in setups}
    try:
        for cache, processes in setups:
            ttl = "300" if cache == "on" else "0"
            servers[cache, processes] = start_server(
                __file__,
                ["--threads", str(args.threads), "--serve", url, work, str(processes), ttl,
                 "1" if sample else "0"],
            )  # fmt: skip
        # The setups take turns, round by round, like the routes within a setup: load from
        # other programs on the machine then hits them all alike. The idle servers wait.
        for r in range(args.rounds):
            for k, (cache, processes) in enumerate(setups):
                server, port = servers[cache, processes]
                results[cache, processes].append(
                    measure(
                        port, routes(cache == "on" and r == 0, sample),
                        seconds=args.seconds / args.rounds, rounds=1,
                        clients=args.connections, warmup=1.0 if r == 0 else 0.2,
                        server_pid=server.pid, server_processes=processes,
                        database_cpu=database or (lambda: float("nan")),
                        # Requests never repeat (validate's nonces): a seed per call.
                        seed=1000 * (r * len(setups) + k),
                    )
                )  # fmt: skip
    finally:
        for server, _ in servers.values():
            stop_server(server)
        if database:
            database.close()
        shutil.rmtree(work, ignore_errors=True)
    for setup in setups:
        results[setup] = {r["route"].name: r for r in combine(results[setup])}
        report(list(results[setup].values()), f"\nanswer cache {setup[0]}, {setup[1]} process(es):")
    n = args.processes
    print(
        f"\nbackend {backend}; {args.threads} waitress threads a process, {args.connections} "
        f"keep-alive connections from 2 client processes, {args.seconds:g}s per route and "
        f"setup in {args.rounds} rounds taken in turns, {os.cpu_count()} CPUs. CPU time in "
        f"ms a request: app = every server process, PG = this database's PostgreSQL "
        f"backends, clients = the load driver; other = cores busy with other programs.\n"
    )
    print(
        f"{'route':34}{'cache':>6}{'1p req/s':>9}{f'{n}p req/s':>9}{f'{n}p/1p':>7}"
        f"{'1p/bare':>8}{f'{n}p/bare':>8}{'app 1p':>7}{f'{n}p':>6}{'PG 1p':>7}{f'{n}p':>6}"
        f"{'clients':>8}{'other':>6}{'errors':>7}"
    )
    ok, rows, arithmetic = True, [], []
    for cache in caches:
        one, many = results[cache, 1], results[cache, n]
        for name in one:
            a, b = one[name], many[name]
            ratio = b["rps"] / a["rps"] if a["rps"] else 0.0
            ok = ok and not a["errors"] and not b["errors"]
            if args.target and name in (LIST, SLUG) and ratio < args.target:
                ok = False
            short = SHORT.get(name, name)
            other = max(other_cores(a), other_cores(b))
            print(
                f"{short[:33]:34}{cache:>6}{a['rps']:9.0f}{b['rps']:9.0f}{ratio:7.2f}"
                f"{a['rps'] / one[BARE.name]['rps']:8.0%}{b['rps'] / many[BARE.name]['rps']:8.0%}"
                f"{fmt(a['cpu_ms']):>7}{fmt(b['cpu_ms']):>6}{fmt(a['database_cpu_ms']):>7}"
                f"{fmt(b['database_cpu_ms']):>6}{fmt(b['client_cpu_ms']):>8}{other:6.1f}"
                f"{a['errors'] + b['errors']:7d}"
            )
            cell = (
                f"**{ratio:.2f}x** ({a['rps']:,.0f} -> {b['rps']:,.0f} req/s); CPU a request: "
                f"app {fmt(a['cpu_ms'])} / {fmt(b['cpu_ms'])} ms"
                + (f", PostgreSQL {fmt(b['database_cpu_ms'])} ms" if database else "")
                + (f"; **{a['errors'] + b['errors']} errors**" if a["errors"] + b["errors"] else "")
            )
            cells = ["-", cell] if database else [cell, "-"]
            rows.append(
                f"| {n} processes / 1, answer cache {cache}: {short} | reported | "
                f"{' | '.join(cells)} | `bench/scaling.py{' --validate' if sample else ''}` (PG) |"
            )
            if name != BARE.name and database:
                app, db = b["cpu_ms"], b["database_cpu_ms"]
                arithmetic.append(
                    f"{short[:33]:34}{cache:>6}  1,000 req/s = {app:.2f} app cores + {db:.2f} "
                    f"PostgreSQL cores; {args.cores} cores -> about "
                    f"{args.cores * 1000 / (app + db):,.0f} req/s "
                    f"({args.cores * app / (app + db):.1f} app : "
                    f"{args.cores * db / (app + db):.1f} PostgreSQL)"
                )
            elif name != BARE.name:  # SQLite: the database's work is in the app's CPU
                app = b["cpu_ms"]
                arithmetic.append(
                    f"{short[:33]:34}{cache:>6}  1,000 req/s = {app:.2f} app cores, SQLite "
                    f"included; {args.cores} cores -> about {args.cores * 1000 / app:,.0f} "
                    "req/s (reads only: SQLite has one writer)"
                )
    print("\nMarkdown rows (docs/performance.md):")
    print("\n".join(rows))
    print(
        f"\nA larger machine, clients elsewhere, from the CPU a request measured with {n} "
        f"processes (holding while processes are added, at least one a core: a process "
        f"runs Python on one core at a time):"
    )
    print("\n".join(arithmetic))
    print(f"\ntotal run: {time.perf_counter() - began:.0f}s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
