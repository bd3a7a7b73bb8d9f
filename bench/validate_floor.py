"""Benchmark (diagnostic): validate against the least a validate can do, served alike.

    .venv/bin/python bench/validate_floor.py            # SQLite in a temp dir

bench/licensing.py measures validate against the bare route; this script asks where the
difference goes. Beside the app and the bare route, the same waitress server (8 threads,
16 keep-alive connections, production logging) serves plain WSGI routes -- no Pyramid,
no cmsshop code -- that each do a part of what no validate can skip, on the same SQLite
database, with bodies shaped like validate's:

- ``floor: JSON + sign``: read the body, parse it, sign it with Ed25519 (the
  ``cryptography`` package), answer JSON. No database.
- ``floor: + one SQLite write``: the same plus the nonce stored by one autocommitted
  INSERT on a per-thread connection (SQLite's own write lock and busy handler only).
- ``floor: + the write under a lock``: the same INSERT in BEGIN .. COMMIT under a
  process-wide ``threading.Lock``, the way SQLite writers in one process take turns in
  cmsshop (services/licensing/steps.py, ``one_writer``).
- ``floor: + the write by a batching writer``: the INSERT handed to one writer thread,
  which commits whatever calls are queued in one transaction and then answers them
  (group commit; not how cmsshop writes today).
- ``floor: + the write autocommitted, locked``: the lone INSERT of the second floor,
  taken under the process-wide lock (the lock without a transaction around it).

and, with cmsshop's code but not Pyramid's:

- ``floor: validate's service, no Pyramid``: the body parsed as the view parses a
  well-formed one, ``validation.validate`` (all of its SQLite work, the lease) and the
  view's JSON answer; no tweens, routing, renderer or request log.
- ``floor: service, group commit, no Pyramid``: the same calls run by one thread, every
  queued call in one transaction with one COMMIT (tried, not adopted).
- ``floor: set-based group commit, no Pyramid``: the same batches in seven statements
  whatever their size (bench/validate_batch.py, checked against validate_in by running
  it): what validate's work costs with its SQLite part as cheap as found.

It prints each route's throughput and the server's CPU per request as a ratio of the
bare route's, in alternating rounds. No targets: it exits 1 only if a route errs.
SQLite only; see docs/licensing.md (Performance) for what the numbers showed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/benchlib.py
FLOOR_SIGN = "/bench/floor/sign"
FLOOR_WRITE = "/bench/floor/write"
FLOOR_LOCKED = "/bench/floor/locked-write"
FLOOR_BATCHED = "/bench/floor/batched-write"
FLOOR_LOCKED_ONE = "/bench/floor/locked-autocommit"
FLOOR_SERVICE = "/bench/floor/validate-service"
FLOOR_SERVICE_GROUPED = "/bench/floor/validate-service-grouped"
FLOOR_SERVICE_SET = "/bench/floor/validate-service-set"


def json_route(answer):
    """A WSGI app that reads the request body and answers 200 with the JSON of
    ``answer(body)``."""

    def app(environ, start_response):
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        out = json.dumps(answer(body)).encode()
        start_response(
            "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(out)))]
        )
        return [out]

    return app


def group_commit(run_batch):
    """``submit(item)`` for one thread that takes every item queued so far, gets their
    outcomes from ``run_batch(items)`` (one transaction for all), then releases their
    callers: ``submit`` returns the item's outcome, or raises it if it is an exception.
    A batch that fails fails each of its callers; none waits forever."""
    import contextlib
    import queue

    queued: queue.SimpleQueue = queue.SimpleQueue()

    def run_batches():
        while True:
            batch = [queued.get()]
            with contextlib.suppress(queue.Empty):
                while True:
                    batch.append(queued.get_nowait())
            try:
                outcomes = run_batch([item for item, _ in batch])
            except Exception as exc:  # noqa: BLE001 - handed to every caller of the batch
                outcomes = [exc] * len(batch)
            for (_, waiter), outcome in zip(batch, outcomes, strict=True):
                waiter[1] = outcome
                waiter[0].release()

    threading.Thread(target=run_batches, daemon=True).start()

    def submit(item):
        waiter = [threading.Lock(), None]  # [released once the batch ended, the outcome]
        waiter[0].acquire()
        queued.put((item, waiter))
        waiter[0].acquire()
        if isinstance(waiter[1], Exception):
            raise waiter[1]
        return waiter[1]

    return submit


def floor_routes(database_path: str):
    """``{path: WSGI app}`` for the five plain floors, on the SQLite file at
    ``database_path``."""
    import sqlite3

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    local = threading.local()
    writer = threading.Lock()
    # A nonce seen before is left alone: the rounds' client seeds may repeat across routes.
    insert = (
        "INSERT INTO bench_floor_nonces (nonce, seen_at) VALUES (?, datetime('now')) "
        "ON CONFLICT (nonce) DO NOTHING"
    )

    def connection():
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = sqlite3.connect(database_path, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=10000")
        return conn

    def store_alone(nonce):
        connection().execute(insert, (nonce,))

    def store_under_lock(nonce):
        conn = connection()
        with writer:
            conn.execute("BEGIN")
            conn.execute(insert, (nonce,))
            conn.execute("COMMIT")

    def store_alone_under_lock(nonce):
        conn = connection()
        with writer:
            conn.execute(insert, (nonce,))

    def store_batch(nonces):  # in group_commit's thread, on a connection of its own
        conn = connection()
        conn.execute("BEGIN")
        try:
            for nonce in nonces:
                conn.execute(insert, (nonce,))
            conn.execute("COMMIT")
        except sqlite3.Error:
            conn.execute("ROLLBACK")
            raise
        return [None] * len(nonces)

    def route(store):
        def answer(body):
            if store is not None:
                store(json.loads(body)["nonce"])
            return {"lease": key.sign(body).hex()}

        return json_route(answer)

    return {
        FLOOR_SIGN: route(None),
        FLOOR_WRITE: route(store_alone),
        FLOOR_LOCKED: route(store_under_lock),
        FLOOR_BATCHED: route(group_commit(store_batch)),
        FLOOR_LOCKED_ONE: route(store_alone_under_lock),
    }


def service_routes(registry):
    """``{path: WSGI app}`` for validate's own work without Pyramid: the body read as the
    view reads a well-formed one, the service call and the view's JSON answer -- no
    tweens, no routing, no renderer, no request log. ``FLOOR_SERVICE`` calls the service
    as the view does (one SQLite transaction per call under the writer lock);
    ``FLOOR_SERVICE_GROUPED`` hands the call to one thread that runs every queued call in
    one transaction (``validation.validate_in`` for each) and answers them after its
    COMMIT: group commit, tried and not adopted (README, "Not yet at target").
    ``FLOOR_SERVICE_SET`` does the same with bench/validate_batch.py, which writes a whole
    batch in seven statements: the cheapest way found to do validate's SQLite work."""
    import validate_batch as set_based

    from cmsshop.config import SINGLETONS
    from cmsshop.hotsql import raw_transaction
    from cmsshop.services.licensing import validation
    from cmsshop.services.licensing.records import AuditRecord, Licensing, LicensingPolicy
    from cmsshop.services.licensing.signing import LeaseSigner
    from cmsshop.services.licensing.steps import one_writer
    from cmsshop.services.ratelimit import RateLimiter
    from cmsshop.util import utcnow
    from cmsshop.views.licensing import license_result_body, well_formed_license_request

    services = {iface: service for (iface, _), service in registry[SINGLETONS].items()}
    engine = registry["cmsshop.engine"]
    licensing = Licensing(engine, services[LeaseSigner], services[LicensingPolicy])
    limiter = services[RateLimiter]

    def validate_queued(calls):  # each call's result, or its refusal to raise
        with one_writer(engine), raw_transaction(engine) as conn:
            outcomes = [
                validation.validate_in(conn, licensing, data, audit, limiter, now)
                for data, audit, now in calls
            ]
        return [result if refusal is None else refusal for result, refusal in outcomes]

    def validate_set(calls):  # the same, in seven statements whatever the batch's size
        with one_writer(engine), raw_transaction(engine) as conn:
            return set_based.validate_batch(conn, licensing, limiter, calls)

    def direct(call):  # as the view calls it
        data, audit, _ = call
        return validation.validate(licensing, data, audit, limiter)

    def route(submit):
        def answer(body):
            data = well_formed_license_request(json.loads(body))
            audit = AuditRecord(action="validate", ip="127.0.0.1")
            return license_result_body(submit((data, audit, utcnow())))

        return json_route(answer)

    return {
        FLOOR_SERVICE: route(direct),
        FLOOR_SERVICE_GROUPED: route(group_commit(validate_queued)),
        FLOOR_SERVICE_SET: route(group_commit(validate_set)),
    }


def serve(database_url: str, key_dir: str, threads: int, log_path: str) -> None:
    """Child process: the app, the bare route and the floors on a free loopback port."""
    from benchlib import production_logging, serve_wsgi, with_bare_route
    from licensing import bench_settings

    from cmsshop.config import configure

    production_logging(log_path)
    cmsshop = configure(bench_settings(database_url, key_dir)).make_wsgi_app()
    app = with_bare_route(cmsshop)
    floors = floor_routes(database_url.split("///", 1)[1])
    floors.update(service_routes(cmsshop.registry))

    def dispatch(environ, start_response):
        floor = floors.get(environ.get("PATH_INFO"))
        return (floor or app)(environ, start_response)

    serve_wsgi(dispatch, threads)


def main(argv=None) -> int:
    from benchlib import BARE, Route, http_request, measure, report, start_server, stop_server
    from licensing import activated_sample, add_load_arguments, prepare_database, validate_route

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_load_arguments(parser)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--database-url", help=argparse.SUPPRESS)
    parser.add_argument("--key-dir", help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.serve:
        serve(args.database_url, args.key_dir, args.threads, args.log)
        return 0

    import sqlite3

    from cmsshop.services.licensing.signing import generate_signing_key

    workdir = tempfile.mkdtemp(prefix="cmsshop-bench-")
    url = f"sqlite:///{workdir}/bench.sqlite"
    key_dir = os.path.join(workdir, "keys")
    generate_signing_key(key_dir)
    prepare_database(url, args.licenses, args.activated, reset=False)
    with sqlite3.connect(f"{workdir}/bench.sqlite") as conn:
        conn.execute("CREATE TABLE bench_floor_nonces (nonce TEXT PRIMARY KEY, seen_at TEXT)")
    validate = validate_route(activated_sample(url, args.activated))

    def floor(name, path):
        def requests(rng, n):  # validate's own bodies, to another path
            return [
                http_request("POST", path, body, {"Content-Type": "application/json"})
                for body in (r.split(b"\r\n\r\n", 1)[1] for r in validate.requests(rng, n))
            ]

        return Route(name, requests)

    routes = [
        BARE,
        floor("floor: JSON + sign", FLOOR_SIGN),
        floor("floor: + one SQLite write", FLOOR_WRITE),
        floor("floor: + the write under a lock", FLOOR_LOCKED),
        floor("floor: + the write by a batching writer", FLOOR_BATCHED),
        floor("floor: + the write autocommitted, locked", FLOOR_LOCKED_ONE),
        floor("floor: validate's service, no Pyramid", FLOOR_SERVICE),
        floor("floor: service, group commit, no Pyramid", FLOOR_SERVICE_GROUPED),
        floor("floor: set-based group commit, no Pyramid", FLOOR_SERVICE_SET),
        Route(validate.name, validate.requests),  # no target here: see bench/licensing.py
    ]
    server, port = start_server(
        __file__,
        ["--serve", "--database-url", url, "--key-dir", key_dir, "--threads",
         str(args.threads), "--log", os.path.join(workdir, "server.log")],
    )  # fmt: skip
    try:
        print(
            f"server: waitress, {args.threads} threads, port {port}; {args.connections} "
            f"keep-alive connections; {args.seconds:.0f}s per route in {args.rounds} "
            "alternating rounds; SQLite\n",
            flush=True,
        )
        results = measure(
            port,
            routes,
            seconds=args.seconds,
            rounds=args.rounds,
            clients=args.connections,
            warmup=2.0,
            server_pid=server.pid,
        )
        ok = report(results)
    finally:
        stop_server(server)
    bare_cpu = results[0]["cpu_ms"]
    for r in results:
        print(
            f"server CPU per request, {r['route'].name[:43]:44} {r['cpu_ms']:5.2f} ms "
            f"({r['cpu_ms'] / bare_cpu:4.1f}x bare)"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
