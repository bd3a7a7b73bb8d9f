"""Shared by the benchmark scripts: a freshly migrated database to measure on, the bare
Pyramid route served beside the app, the load driver and the report (see below)."""

from __future__ import annotations

import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def migrate_fresh(url: str, reset: bool):
    """Migrate an empty database (on PostgreSQL ``reset`` drops its public schema first,
    and a non-empty one without ``reset`` stops the script); returns its engine."""
    from alembic import command
    from alembic.config import Config

    from cmsshop.db import make_engine

    engine = make_engine(url)
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            tables = conn.exec_driver_sql(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
            ).scalar()
            if tables and not reset:
                sys.exit("the database is not empty; pass --reset to drop its public schema")
            conn.exec_driver_sql("DROP SCHEMA public CASCADE")
            conn.exec_driver_sql("CREATE SCHEMA public")
    cfg = Config(os.path.join(ROOT, "development.ini"))
    cfg.set_main_option("script_location", os.path.join(ROOT, "alembic"))
    cfg.attributes["database_url"] = url
    command.upgrade(cfg, "head")
    return engine


WORDS = ["backup", "firewall", "gallery", "invoice", "theme", "search", "cache", "forms"]


def load_products(session, count: int, rng) -> list[int]:
    """EUR (default) and USD, then ``count`` published products (``product-00000``...)
    with a price in each and a release, by bulk inserts (Core executemany): loading
    must not take longer than measuring. Returns the product ids."""
    from sqlalchemy import insert, select

    from cmsshop.models import Currency, Product, ProductPrice, Release
    from cmsshop.services.docs.markdown import render_markdown
    from cmsshop.util import utcnow

    session.add_all(
        [
            Currency(code="EUR", name="Euro", symbol="€", decimals=2, is_default=True),
            Currency(code="USD", name="US Dollar", symbol="$", decimals=2),
        ]
    )
    session.flush()
    description = "## Features\n\n- fast\n- *safe*\n\nSee [the docs](https://example.com)."
    description_html = render_markdown(description)
    for start in range(0, count, 2000):
        rows = []
        for i in range(start, min(count, start + 2000)):
            word = rng.choice(WORDS)
            rows.append(
                {
                    "slug": f"product-{i:05d}",
                    "name": f"{word.title()} Suite {i:05d}",
                    "summary": f"A {word} plugin, edition {i % 97}",
                    "description": description,
                    "description_html": description_html,
                    "published": True,
                    "archived": False,
                    "licensed": i % 3 != 0,
                    "max_activations": 3 if i % 3 else None,
                    "duration_days": 365 if i % 2 else None,
                }
            )
        session.execute(insert(Product), rows)
    ids = session.scalars(select(Product.id)).all()
    session.execute(
        insert(ProductPrice),
        [
            {"product_id": pid, "currency": code, "amount": 1900 + (pid % 50) * 100}
            for pid in ids
            for code in ("EUR", "USD")
        ],
    )
    now = utcnow()
    session.execute(
        insert(Release),
        [
            {
                "product_id": pid,
                "version": "1.0.0",
                "file_name": f"product-{pid}-1.0.0.zip",
                "storage_path": f"releases/{pid}/bench",
                "size": 1024,
                "sha256": "0" * 64,
                "released_at": now,
            }
            for pid in ids
        ],
    )
    return ids


# --- the bare route, the server and the load driver shared by every script ---------------
#
# Every script measures the project's routes against a *bare Pyramid route* served by the
# same waitress server in the same run: a Configurator with one route and one view
# returning a small dict through the ``json`` renderer, and nothing else (no tweens, no
# database, no sessions). ``/bench/bare`` is dispatched to it before the project's app
# sees the request; everything else goes to the real app. The routes take turns in short
# rounds, so that load from other programs on the machine hits all of them alike, and the
# scripts report each route's throughput as a ratio of the bare route's.

BARE_PATH = "/bench/bare"


def bare_app():
    """The bare Pyramid JSON route: the floor the project's routes are measured against."""
    from pyramid.config import Configurator

    config = Configurator()
    config.add_route("bare", BARE_PATH)
    config.add_view(lambda request: {"status": "ok"}, route_name="bare", renderer="json")
    return config.make_wsgi_app()


CACHE_PATH = "/bench/cache"


def with_bare_route(app):
    """One WSGI app: ``/bench/bare`` to :func:`bare_app`, ``/bench/cache`` to the answer
    cache's hit and miss counts (this process's), everything else to ``app``."""
    import json

    bare = bare_app()
    registry = getattr(app, "registry", None)

    def cache_counts(environ, start_response):
        cache = registry.get("cmsshop.answer_cache") if registry is not None else None
        counts = {"hits": cache.hits, "misses": cache.misses} if cache else {}
        # Which process answered: with several, the bench reaches each one on purpose.
        body = json.dumps({**counts, "pid": os.getpid()}).encode()
        start_response(
            "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        )
        return [body]

    def dispatch(environ, start_response):
        path = environ.get("PATH_INFO")
        if path == BARE_PATH:
            return bare(environ, start_response)
        if path == CACHE_PATH:
            return cache_counts(environ, start_response)
        return app(environ, start_response)

    return dispatch


def paste_app(settings: dict):
    """The app as pserve builds it, through the paste factory ``cmsshop.main``: called
    first thing in a server process of its own, it also sets SQLite up for threads as
    production does (cmsshop.db.configure_sqlite_for_threads)."""
    import cmsshop

    return cmsshop.main({}, **settings)


def serve_wsgi(app, threads: int, processes: int = 1, port: int = 0) -> None:
    """Serve ``app`` on loopback with waitress (``threads`` each) in ``processes``
    processes, each with its own listening socket on the same port (SO_REUSEPORT: the
    kernel spreads new connections over them): prints the port, then serves until
    killed. With more than one process this is the pre-fork model of gunicorn's workers,
    with waitress as the worker."""
    import logging
    import signal
    import socket

    from waitress.server import create_server

    # "Task queue depth is N" is expected when the clients outnumber idle threads.
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)

    def listen(port: int):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(1024)
        return sock

    sock = listen(port)
    port = sock.getsockname()[1]
    children = []
    for _ in range(processes - 1):
        pid = os.fork()
        if pid == 0:
            children = []
            sock.close()
            sock = listen(port)
            break
        children.append(pid)
    else:
        print(port, flush=True)

    def stop(signum, frame):
        for pid in children:
            os.kill(pid, signal.SIGTERM)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    server = create_server(app, sockets=[sock], threads=threads, connection_limit=1000)
    server.run()


def production_logging(path: str) -> None:
    """Log as production.ini does (``cmsshop`` at INFO: one line per request, through
    cmsshop.logs.SafeFormatter), into ``path`` instead of the terminal: the request log's
    cost is part of what is measured."""
    import logging.config

    logging.config.fileConfig(os.path.join(ROOT, "production.ini"), disable_existing_loggers=False)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(open(path, "a"))  # noqa: SIM115 - lives as long as the process


def zipf_sampler(count: int, s: float = 1.0):
    """``sample(rng)``: an index in ``range(count)``, rank r drawn with weight 1/r**s --
    how visits spread over a shop's products (a few popular, a long tail)."""
    import bisect
    import itertools

    cumulative = list(itertools.accumulate(1 / (rank**s) for rank in range(1, count + 1)))
    total = cumulative[-1]
    return lambda rng: bisect.bisect_left(cumulative, rng.random() * total)


def start_server(script: str, args: list[str]):
    """Run ``script`` with ``args`` (its ``--serve`` mode) in a child process; returns
    (process, port) once it printed its port."""
    import subprocess

    process = subprocess.Popen(
        [sys.executable, os.path.abspath(script), *args], stdout=subprocess.PIPE, text=True
    )
    line = process.stdout.readline()
    if not line.strip().isdigit():
        process.kill()
        sys.exit("the server did not start (see its output above)")
    return process, int(line)


def stop_server(process) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except Exception:  # noqa: BLE001 - a stuck server must not keep the bench alive
        process.kill()


def http_request(method: str, path: str, body: bytes = b"", headers: dict | None = None):
    """The bytes of one keep-alive HTTP/1.1 request."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if body or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class Route:
    """A route to measure: ``requests(rng, n)`` makes ``n`` request byte strings (made
    before the clock starts, so the clients' own work does not take CPU from the server);
    ``target`` is the minimum throughput as a fraction of the bare route's, ``p99_ms``
    the maximum 99th percentile latency (None: reported, not enforced)."""

    def __init__(self, name, requests, target=None, p99_ms=None, expect=(200,), visit=()):
        self.name, self.requests, self.target, self.p99_ms = name, requests, target, p99_ms
        self.expect = expect
        # Paths requested once before the rounds (a warm answer cache: see catalogue.py).
        self.visit = visit


def get_route(name, paths, **kwargs) -> Route:
    """A GET route; ``paths(rng)`` gives one path."""
    return Route(name, lambda rng, n: [http_request("GET", paths(rng)) for _ in range(n)], **kwargs)


BARE = get_route("bare Pyramid route (GET /bench/bare)", lambda rng: BARE_PATH)


def _read_response(sock, buffer: bytearray) -> tuple[int, bytearray]:
    """Read one response from ``sock`` (Content-Length framing); returns (status, rest)."""
    while True:
        end = buffer.find(b"\r\n\r\n")
        if end >= 0:
            break
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        buffer += chunk
    head = bytes(buffer[:end]).lower()
    status = int(head[9:12])
    at = head.find(b"content-length:")
    length = int(head[at + 15 : head.find(b"\r\n", at)]) if at >= 0 else 0
    total = end + 4 + length
    while len(buffer) < total:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        buffer += chunk
    return status, buffer[total:]


def _client_process(port, route, seconds, connections, seed, per_connection, pipe):
    """One client process: ``connections`` threads with a keep-alive socket each."""
    import random
    import socket
    import threading

    rng = random.Random(seed)
    batches = [route.requests(rng, per_connection) for _ in range(connections)]
    results = []
    lock = threading.Lock()
    barrier = threading.Barrier(connections)

    def loop(batch, source):
        # Each connection from its own loopback address (127.0.0.0/8 is all loopback):
        # a shop's runtimes and visitors come from many addresses, and per-address
        # rate counters should not all be one row.
        sock = socket.create_connection(("127.0.0.1", port), timeout=30, source_address=source)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        latencies, bad, buffer, i = [], 0, bytearray(), 0
        barrier.wait()
        clock = time.perf_counter
        deadline = clock() + seconds
        while clock() < deadline:
            if i == len(batch):
                batch.extend(route.requests(rng, 50))
            request = batch[i]
            i += 1
            started = clock()
            sock.sendall(request)
            status, buffer = _read_response(sock, buffer)
            latencies.append(clock() - started)
            if status not in route.expect:
                bad += 1
        sock.close()
        with lock:
            results.append((bad, latencies))

    threads = [
        threading.Thread(target=loop, args=(batch, (f"127.1.{seed % 250}.{i + 1}", 0)))
        for i, batch in enumerate(batches)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    pipe.send((sum(r[0] for r in results), [x for r in results for x in r[1]]))
    pipe.close()


def _stat(pid) -> tuple[int, float] | None:
    """(parent pid, user + system CPU seconds) of a live process, from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _process_tree(pid: int) -> dict[int, tuple[int, float]]:
    """{pid: (parent pid, CPU seconds)} of a live process and its live descendants (a
    pre-fork server's workers; Linux /proc); empty when it is gone."""
    stats = {int(name): _stat(name) for name in os.listdir("/proc") if name.isdigit()}
    if not stats.get(pid):
        return {}
    tree, grew = {pid}, True
    while grew:
        grew = False
        for child, stat in stats.items():
            if stat and child not in tree and stat[0] in tree:
                tree.add(child)
                grew = True
    return {member: stats[member] for member in tree if stats[member]}


def _switches(pid: int) -> int:
    """Context switches, voluntary or not, of every thread of process ``pid`` (Linux
    /proc/PID/task/*/status)."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/status") as fh:
                for line in fh:  # voluntary_ctxt_switches, nonvoluntary_ctxt_switches
                    if line.startswith(("voluntary_ctxt", "nonvoluntary_ctxt")):
                        total += int(line.split()[-1])
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
    return total


NO_USAGE = (float("nan"), float("nan"), float("nan"))


def server_usage(pid: int | None, database_cpu) -> tuple[float, float, float]:
    """(user + system CPU seconds, context switches, the database's CPU seconds from
    ``database_cpu()``) of a server process and its live descendants (a pre-fork
    server's workers) so far, from one walk of /proc; NaNs without a live server. The
    switches are its threads handing the GIL and waitress's task queue to each other: a
    route that releases the GIL more often than the bare route pays for each release
    with a hand-over or two (docs/performance.md)."""
    tree = _process_tree(pid) if pid else {}
    if not tree:
        return NO_USAGE
    cpu = sum(seconds for _, seconds in tree.values())
    return cpu, sum(_switches(member) for member in tree), database_cpu()


def _add_usage(used: list, before: tuple, after: tuple) -> None:
    """Add what the server used between two :func:`server_usage` readings to ``used``."""
    for k, (then, now) in enumerate(zip(before, after, strict=True)):
        used[k] += now - then


def machine_cpu_seconds() -> float:
    """CPU time every core spent busy since boot (/proc/stat: all but idle and iowait)."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(x) for x in fh.readline().split()[1:9]]
    except (OSError, ValueError):
        return float("nan")
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def client_cpu_seconds() -> float:
    """CPU time of this process's finished children: across one run_load, its clients'."""
    times = os.times()
    return times.children_user + times.children_system


class DatabaseBackends:
    """CPU time of the PostgreSQL backends serving one database (``url``'s), found through
    pg_stat_activity on each call: unlike :func:`database_cpu_seconds` it leaves out other
    databases' load on a shared server. Each call returns the total over every backend
    seen so far (one that exited counts with its last reading: what it spent after that
    is missed; the app's pools keep theirs)."""

    def __init__(self, url: str):
        from cmsshop.db import make_engine

        self.engine = make_engine(url)
        self.connection = self.engine.connect()
        self.seen: dict[int, float] = {}

    def __call__(self) -> float:
        rows = self.connection.exec_driver_sql(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).all()
        self.connection.rollback()
        for (pid,) in rows:
            stat = _stat(pid)
            if stat:
                self.seen[pid] = stat[1]
        return sum(self.seen.values())

    def close(self) -> None:
        self.connection.close()
        self.engine.dispose()


def database_cpu_seconds() -> float:
    """User + system CPU time of every local PostgreSQL process (Linux /proc; 0 without
    one): with the server and PostgreSQL on one machine, what each call costs the
    database."""
    total = 0.0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                head, tail = fh.read().rsplit(")", 1)
        except OSError:
            continue
        if head.endswith("(postgres"):
            fields = tail.split()
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def run_load(port, route, seconds, clients, processes=2, seed=0):
    """Load on one route for ``seconds`` from ``processes`` client processes with
    ``clients`` keep-alive connections in all; returns (errors, latencies)."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    per_process = [clients // processes + (i < clients % processes) for i in range(processes)]
    per_connection = max(50, int(seconds * 6000 / max(1, clients)))
    workers = []
    for i, count in enumerate(per_process):
        if not count:
            continue
        receive, send = context.Pipe(duplex=False)
        process = context.Process(
            target=_client_process,
            args=(port, route, seconds, count, seed * 1000 + i, per_connection, send),
        )
        process.start()
        workers.append((process, receive))
    errors, latencies = 0, []
    for process, receive in workers:
        bad, mine = receive.recv()
        process.join()
        errors += bad
        latencies.extend(mine)
    return errors, latencies


def cache_counts(port) -> dict:
    """The server's answer-cache counts (one server process; {} without a cache)."""
    import http.client
    import json

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", CACHE_PATH)
        return json.loads(connection.getresponse().read())
    finally:
        connection.close()


def connections_to_each(port, processes: int, per_process: int = 1, attempts: int = 400):
    """Keep-alive connections, ``per_process`` to each of a pre-fork server's
    ``processes`` (the kernel picks the process per connection: new ones are opened until
    each has its share, or ``attempts`` run out). Returns {pid: [(connection, counts)]},
    counts being the process's answer-cache counts when the connection was made."""
    import http.client
    import json

    found: dict[int, list] = {}
    for _ in range(attempts):
        if len(found) == processes and all(len(v) >= per_process for v in found.values()):
            break
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("GET", CACHE_PATH)
        counts = json.loads(connection.getresponse().read())
        mine = found.setdefault(counts.pop("pid", 0), [])
        if len(mine) < per_process:
            mine.append((connection, counts))
        else:
            connection.close()
    return found


def cache_counts_all(port, processes: int) -> dict:
    """The answer-cache counts summed over a pre-fork server's processes ({} without a
    cache, or when a process could not be reached)."""
    found = connections_to_each(port, processes)
    total = {"hits": 0, "misses": 0}
    for connections in found.values():
        for connection, counts in connections:
            connection.close()
            if not counts:
                return {}
            total["hits"] += counts["hits"]
            total["misses"] += counts["misses"]
    return total if len(found) == processes else {}


def visit_each(port, paths, clients: int, processes: int) -> None:
    """Request every path once in every one of a pre-fork server's processes (each warms
    its own answer cache), over ``clients`` keep-alive connections in all."""
    import threading

    paths = list(paths)
    if not paths:
        return
    if processes == 1:
        return visit(port, paths, clients)
    per_process = max(1, clients // processes)
    found = connections_to_each(port, processes, per_process)
    if len(found) < processes:
        raise RuntimeError(f"reached {len(found)} of the {processes} server processes")

    def client(connection, mine):
        for path in mine:
            connection.request("GET", path)
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"visit {path}: {response.status}")
        connection.close()

    threads = [
        threading.Thread(target=client, args=(connection, paths[i::per_process]))
        for connections in found.values()
        for i, (connection, _) in enumerate(connections)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def visit(port, paths, clients: int) -> None:
    """Request every path once, over ``clients`` keep-alive connections."""
    import http.client
    import threading

    paths = list(paths)

    def client(mine):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for path in mine:
            connection.request("GET", path)
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"visit {path}: {response.status}")
        connection.close()

    threads = [threading.Thread(target=client, args=(paths[i::clients],)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def measure(
    port, routes, *, seconds, rounds, clients, warmup=1.0, server_pid=None, processes=2,
    server_processes=1, database_cpu=None, seed=0,
):  # fmt: skip
    """Every route (the bare one first) in ``rounds`` alternating rounds of
    ``seconds / rounds`` each, after a warm-up per route; returns one result per route.
    ``server_pid``: also the CPU time of that server (with its pre-fork workers) and of
    the database (``database_cpu()``, default every local PostgreSQL process) per request.
    The clients' CPU and the machine's busy time are measured in every run. Calls on one
    server with the same ``seed`` send the same requests (nonces included): give each a
    different one (a multiple of 1,000)."""
    import statistics

    database_cpu = database_cpu or database_cpu_seconds
    totals = {id(route): [0, [], 0, 0, 0.0, 0.0] for route in routes}
    used = {id(route): [0.0, 0, 0.0] for route in routes}  # server_usage's, summed
    for i, route in enumerate(routes):
        visit_each(port, route.visit, clients, server_processes)
        run_load(port, route, warmup, clients, processes, seed=seed + i)
    for r in range(rounds):
        for i, route in enumerate(routes):
            # Answer-cache counts, summed over the server's processes.
            counts = cache_counts_all(port, server_processes)
            usage = server_usage(server_pid, database_cpu)
            clients_cpu, machine = client_cpu_seconds(), machine_cpu_seconds()
            errors, latencies = run_load(
                port, route, seconds / rounds, clients, processes, seed=seed + 100 * r + i + 1
            )
            total = totals[id(route)]
            total[4] += client_cpu_seconds() - clients_cpu
            total[5] += machine_cpu_seconds() - machine
            total[0] += errors
            total[1].extend(latencies)
            _add_usage(used[id(route)], usage, server_usage(server_pid, database_cpu))
            after = cache_counts_all(port, server_processes) if counts else {}
            if after:
                total[2] += after["hits"] - counts["hits"]
                total[3] += after["misses"] - counts["misses"]
    results = []
    for route in routes:
        errors, latencies, hits, misses, clients_cpu, machine = totals[id(route)]
        cpu, switches, database = used[id(route)]
        latencies.sort()
        count = len(latencies)
        results.append(
            {
                "route": route,
                "requests": count,
                "errors": errors,
                "rps": count / seconds,
                # CPU seconds per request: the load driver's client processes, and every
                # core's busy time (whoever used it: the difference from server, database
                # and clients is other programs' load); the machine's cores busy on average.
                "client_cpu_ms": clients_cpu / count * 1000 if count else float("nan"),
                "machine_cpu_ms": machine / count * 1000 if count else float("nan"),
                "busy_cores": machine / seconds,
                "p50_ms": statistics.median(latencies) * 1000 if count else float("nan"),
                "p99_ms": latencies[max(0, int(count * 0.99) - 1)] * 1000
                if count
                else float("nan"),
                "cpu_ms": cpu / count * 1000 if count and server_pid else float("nan"),
                "switches": switches / count if count and server_pid else float("nan"),
                "database_cpu_ms": database / count * 1000
                if count and server_pid
                else float("nan"),
                # Share of the route's requests answered from the answer cache (None: not
                # cached, or several server processes).
                "hit_share": hits / (hits + misses) if hits + misses else None,
            }
        )
    return results


WRK_PATHS = 4000  # distinct paths a route's wrk script cycles through (each thread from
# a random start)


def _wrk_script(route: Route, rng, directory: str) -> str:
    """A wrk Lua script sending ``route``'s requests (GETs: their paths)."""
    paths = []
    for request in route.requests(rng, WRK_PATHS):
        method, path = request.split(b" ", 2)[:2]
        if method != b"GET":
            raise ValueError(f"{route.name}: wrk sends GETs only here")
        paths.append(path.decode())
    listed = ",\n".join(json.dumps(p) for p in paths)
    script = os.path.join(directory, f"route-{abs(hash(route.name))}.lua")
    with open(script, "w") as fh:
        fh.write(
            f"local paths = {{\n{listed}\n}}\nlocal i = 0\nlocal threads = 0\n"
            # Each thread from its own place in the list.
            "function setup(thread) threads = threads + 1; "
            "thread:set('offset', threads * 997) end\n"
            "function init(args) i = (offset or 0) % #paths end\n"
            "function request() i = i % #paths + 1; return wrk.format('GET', paths[i]) end\n"
        )
    return script


_WRK_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _wrk_run(port: int, script: str, seconds: float, clients: int) -> dict:
    """One wrk run: requests, errors (non-2xx/3xx answers, socket errors) and the
    latency percentiles it prints (ms)."""
    import re
    import subprocess

    done = subprocess.run(
        ["wrk", "-t1", f"-c{clients}", f"-d{max(1, round(seconds))}s", "--latency",
         "-s", script, f"http://127.0.0.1:{port}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    out = done.stdout
    found = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)\b", out)
    requests = int(found.group(1))
    duration = float(found.group(2)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[found.group(3)]
    errors = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses: (\d+)", out))
    socket = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors += sum(int(n) for n in socket.groups()) if socket else 0
    latency = {
        int(q): float(v) * _WRK_UNITS[unit]
        for q, v, unit in re.findall(r"^\s+(\d+)%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    }
    return {
        "requests": requests,
        "seconds": duration,
        "errors": errors,
        "p50": latency.get(50),
        "p99": latency.get(99),
    }


def measure_wrk(
    port, routes, *, seconds, rounds, clients, server_pid=None, database_cpu=None, seed=0
):  # fmt: skip
    """:func:`measure` with wrk (one thread, ``clients`` keep-alive connections) as the
    load generator, as the issue tracker's numbers were taken: a C client's CPU a request
    is small and the same for every route, where the Python clients' grows with the
    answer's size and takes the same two cores from the server. GET routes only; the
    latencies are wrk's percentiles (p50: the rounds' median, p99: their highest)."""
    import random
    import statistics
    import tempfile

    database_cpu = database_cpu or database_cpu_seconds
    rng = random.Random(seed)
    totals = {id(route): [0, 0, [], [], 0.0, 0.0] for route in routes}
    used = {id(route): [0.0, 0, 0.0] for route in routes}  # server_usage's, summed
    with tempfile.TemporaryDirectory(prefix="cmsshop-wrk-") as directory:
        scripts = {id(route): _wrk_script(route, rng, directory) for route in routes}
        for route in routes:
            _wrk_run(port, scripts[id(route)], 1, clients)  # warm-up
        for _ in range(rounds):
            for route in routes:
                usage = server_usage(server_pid, database_cpu)
                clients_cpu = client_cpu_seconds()
                run = _wrk_run(port, scripts[id(route)], seconds / rounds, clients)
                total = totals[id(route)]
                total[0] += run["requests"]
                total[1] += run["errors"]
                total[2].append(run["p50"])
                total[3].append(run["p99"])
                total[4] += client_cpu_seconds() - clients_cpu
                total[5] += run["seconds"]
                _add_usage(used[id(route)], usage, server_usage(server_pid, database_cpu))
    results = []
    for route in routes:
        count, errors, p50s, p99s, clients_cpu, elapsed = totals[id(route)]
        cpu, switches, database = used[id(route)]
        results.append(
            {
                "route": route,
                "requests": count,
                "errors": errors,
                "rps": count / elapsed,
                "client_cpu_ms": clients_cpu / count * 1000 if count else float("nan"),
                "p50_ms": statistics.median(p50s),
                "p99_ms": max(p99s),
                "cpu_ms": cpu / count * 1000 if count and server_pid else float("nan"),
                "switches": switches / count if count and server_pid else float("nan"),
                "database_cpu_ms": database / count * 1000
                if count and server_pid
                else float("nan"),
                "hit_share": None,
            }
        )
    return results


def add_client_option(parser, note: str = "") -> None:
    """``--client``: wrk (the default where it is installed: apt-get install wrk) or the
    Python clients of :func:`measure`, whose CPU a request grows with the answer."""
    import shutil

    parser.add_argument(
        "--client",
        choices=("wrk", "python"),
        default="wrk" if shutil.which("wrk") else "python",
        help="load generator: wrk, or the Python clients (their CPU a request grows with "
        "the answer)" + note,
    )


def measure_with(client: str):
    """:func:`measure_wrk` or :func:`measure`, as ``--client`` says."""
    return measure_wrk if client == "wrk" else measure


def report(results, title: str = "") -> bool:
    """Print the table (ratio to the first, bare, route) and whether every target holds."""
    bare = results[0]["rps"] or float("nan")
    ok = True
    if title:
        print(title)
    print(
        f"{'route':44}{'req/s':>8}{'p50 ms':>8}{'p99 ms':>8}{'vs bare':>9}"
        f"{'target':>8}{'errors':>7}{'cached':>8}  verdict"
    )
    for r in results:
        route = r["route"]
        ratio = r["rps"] / bare
        failures = []
        if route.target is not None and not ratio >= route.target:
            failures.append(f"< {route.target:.0%} of bare")
        if route.p99_ms is not None and not r["p99_ms"] < route.p99_ms:
            failures.append(f"p99 >= {route.p99_ms:g} ms")
        if r["errors"]:
            failures.append("errors")
        ok = ok and not failures
        target = f"{route.target:.0%}" if route.target is not None else "-"
        verdict = "FAIL: " + ", ".join(failures) if failures else "ok"
        share = r.get("hit_share")
        cached = "-" if share is None else f"{share:.0%}"
        print(
            f"{route.name[:43]:44}{r['rps']:8.0f}{r['p50_ms']:8.1f}{r['p99_ms']:8.1f}"
            f"{ratio:9.0%}{target:>8}{r['errors']:7d}{cached:>8}  {verdict}"
        )
    return ok
