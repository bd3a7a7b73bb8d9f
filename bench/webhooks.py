"""Benchmark: fulfil N distinct payments through the live card webhook route.

    .venv/bin/python bench/webhooks.py          # a fresh SQLite file
    .venv/bin/python bench/webhooks.py --reset \
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench

1. Migrates a fresh database and creates N pending orders (one licensed product each).
2. Serves the real app (cmsshop.config.configure) with waitress on loopback, in a
   separate process, in queued mode (the production default) with one real
   ``cmsshop-admin worker`` process beside it (``--workers``; ``--processing inline``
   acts on every payment in its request instead).
3. S concurrent senders (keep-alive connections from two client processes) POST one
   signed ``checkout.session.completed`` per order to ``/api/webhooks/cardprovider``
   (trust-verified-events mode, so no provider API is involved: this measures
   verification, the event log and exactly-once fulfilment). Fulfilments/s is N over the
   time from the first send until every order is paid (polled in the database).
4. Re-sends every event (fresh signatures, same event ids) and shows that no row was
   added: counts of fulfilments, invoices, entitlements, licenses and events are taken
   before and after.

The bare Pyramid route (bench/benchlib.py) is driven first by the same senders, for
reference. Exits 1 below the targets (300 fulfilments/s, 400 duplicates/s, answers' p99
under 500 ms) or if exactly-once or gap-free invoice numbering failed.
``--provider-latency MS`` confirms every payment with a loopback stand-in for the
provider API answering after MS ms: then only the answers' p99 and exactly-once count.
``--subscriber`` adds an outgoing webhook endpoint subscribed to every event type, on a
loopback receiver: fulfilment then writes an order.paid and a license.created event (and
their deliveries) per payment, which the worker's webhook thread delivers meanwhile; it
checks one of each per order, every delivery received once, and how long they took;
``--receiver-latency MS`` makes the receiver answer after MS ms, as a distant endpoint
does (``CMSSHOP_WEBHOOKS_WORKER_THREADS`` sets the worker's delivery threads).

Never part of the test suite; everything stays on loopback and stops by itself.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchlib import (  # noqa: E402 - bench/benchlib.py, beside this script
    BARE_PATH,
    migrate_fresh,
    production_logging,
    serve_wsgi,
    with_bare_route,
)

from cmsshop.config import configure  # noqa: E402
from cmsshop.db import make_engine  # noqa: E402
from cmsshop.models import (  # noqa: E402
    WEBHOOK_EVENT_TYPES,
    Currency,
    Entitlement,
    Fulfilment,
    Invoice,
    License,
    Order,
    OrderItem,
    PaymentEvent,
    Product,
    ProductPrice,
    User,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
)
from cmsshop.services.checkout.orders import new_order_number  # noqa: E402
from cmsshop.services.payments.cardprovider import (  # noqa: E402
    build_event,
    checkout_session_object,
    signed_delivery,
)
from cmsshop.services.webhooks.signing import encrypt_secret, new_secret  # noqa: E402

SECRET = "whsec_benchmark_0123456789abcdef"
# The targets, on PostgreSQL with 8 senders (SQLite's single writer does not
# reach them; the script reports and fails there too).
FULFIL_TARGET = 300
DUPLICATE_TARGET = 400
P99_TARGET_MS = 500
PRICE = 4900


def prepare_database(url: str, reset: bool, orders: int) -> list[str]:
    engine = migrate_fresh(url, reset)
    numbers = [new_order_number() for _ in range(orders)]
    with Session(engine) as session:
        session.add(Currency(code="EUR", name="Euro", symbol="€", decimals=2, is_default=True))
        user = User(email="bench@example.com", name="Bench", password_hash="x", role="customer")
        product = Product(
            slug="bench-product",
            name="Bench Product",
            published=True,
            licensed=True,
            max_activations=3,
            duration_days=365,
        )
        product.prices = [ProductPrice(currency="EUR", amount=PRICE)]
        session.add_all([user, product])
        session.flush()
        order_rows = [
            {
                "number": n,
                "user_id": user.id,
                "currency": "EUR",
                "total": PRICE,
                "status": "pending",
                "provider": "cardprovider",
            }
            for n in numbers
        ]
        session.execute(insert(Order), order_rows)
        ids = dict(session.execute(select(Order.number, Order.id)).all())
        session.execute(
            insert(OrderItem),
            [
                {
                    "order_id": ids[n],
                    "product_id": product.id,
                    "product_slug": product.slug,
                    "name": product.name,
                    "amount": PRICE,
                }
                for n in numbers
            ],
        )
        session.commit()
    engine.dispose()
    return numbers


def row_counts(engine) -> dict[str, int]:
    with Session(engine) as session:
        return {
            model.__tablename__: session.scalar(select(func.count()).select_from(model)) or 0
            for model in (
                Fulfilment,
                Invoice,
                Entitlement,
                License,
                PaymentEvent,
                WebhookEvent,
                WebhookDelivery,
            )
        } | {
            "paid orders": session.scalar(
                select(func.count()).select_from(Order).where(Order.status == "paid")
            )
            or 0
        }


def _sender_process(port, path, events, threads, method, out) -> None:
    """One client process: ``threads`` keep-alive connections take the next event of
    this process's share, sign it at send time and POST it (or GET ``path``)."""
    import http.client

    work: queue.Queue = queue.Queue()
    for payload in events:
        work.put(payload)
    results: list[tuple[float, str]] = []
    lock = threading.Lock()

    def sender():
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        mine = []
        while True:
            try:
                payload = work.get_nowait()
            except queue.Empty:
                break
            started = time.perf_counter()
            if method == "GET":
                connection.request("GET", path)
            else:
                headers, body = signed_delivery(payload, SECRET)
                connection.request("POST", path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            elapsed = time.perf_counter() - started
            status = json.loads(data).get("status", "") if method != "GET" else ""
            mine.append((elapsed, f"{response.status} {status}".strip()))
        connection.close()
        with lock:
            results.extend(mine)

    pool = [threading.Thread(target=sender) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    out.send(results)
    out.close()


def send_all(
    base: str, path: str, events: list[dict], senders: int, method: str = "POST", processes=2
) -> tuple[float, float, list[float], dict]:
    """Send every event once from ``processes`` client processes (``senders``
    connections in all, each from a thread on a keep-alive connection); returns (start,
    seconds, latencies, answers counted by "status body-status")."""
    import multiprocessing

    port = int(base.rsplit(":", 1)[1])
    context = multiprocessing.get_context("fork")
    pipes, children = [], []
    for index in range(processes):
        share = events[index::processes]
        receive, send = context.Pipe(duplex=False)
        threads = senders // processes + (1 if index < senders % processes else 0)
        child = context.Process(
            target=_sender_process, args=(port, path, share, threads, method, send)
        )
        pipes.append(receive)
        children.append(child)
    started_wall = time.time()
    started = time.perf_counter()
    for child in children:
        child.start()
    results = []
    for receive in pipes:
        results.extend(receive.recv())
    seconds = time.perf_counter() - started
    for child in children:
        child.join()
    statuses: dict[str, int] = {}
    for _, status in results:
        statuses[status] = statuses.get(status, 0) + 1
    return started_wall, seconds, [elapsed for elapsed, _ in results], statuses


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def report(title: str, seconds: float, latencies: list[float], statuses: dict) -> None:
    print(f"\n{title}")
    print(
        f"  requests         {len(latencies)} in {seconds:.2f} s = {len(latencies) / seconds:.0f}/s"
    )
    print(
        f"  latency ms       p50 {statistics.median(latencies) * 1000:.1f}  "
        f"p99 {percentile(latencies, 99) * 1000:.1f}  max {max(latencies) * 1000:.1f}"
    )
    print(f"  answers          {dict(sorted(statuses.items()))}")


def serve_forever() -> None:
    """``--serve``: the server process; settings as JSON in CMSSHOP_BENCH_SETTINGS."""
    settings = json.loads(os.environ["CMSSHOP_BENCH_SETTINGS"])
    threads = int(settings.pop("threads"))
    os.makedirs(settings["cmsshop.storage_dir"], exist_ok=True)
    production_logging(os.path.join(settings["cmsshop.storage_dir"], "server.log"))
    serve_wsgi(with_bare_route(configure(settings).make_wsgi_app()), threads)


def start_server(settings: dict, threads: int) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "CMSSHOP_BENCH_SETTINGS": json.dumps({**settings, "threads": threads})}
    process = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--serve"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    port = process.stdout.readline().strip()
    if not port.isdigit():
        process.kill()
        sys.exit("the server process did not start")
    return process, f"http://127.0.0.1:{port}"


WORKER_INI = """[app:main]
use = egg:cmsshop
{settings}

[loggers]
keys = root, cmsshop

[handlers]
keys = file

[formatters]
keys = generic

[logger_root]
level = WARNING
handlers = file

[logger_cmsshop]
level = INFO
handlers =
qualname = cmsshop

[handler_file]
class = FileHandler
args = ({log!r}, "a")
formatter = generic

[formatter_generic]
class = cmsshop.logs.SafeFormatter
format = %(asctime)s %(levelname)s [%(name)s] %(message)s
"""


def start_workers(settings: dict, tmp: str, count: int) -> list[subprocess.Popen]:
    """``count`` real ``cmsshop-admin worker`` processes on the bench settings."""
    ini = os.path.join(tmp, "worker.ini")
    lines = "\n".join(f"{key} = {value}" for key, value in settings.items())
    with open(ini, "w") as handle:
        handle.write(WORKER_INI.format(settings=lines, log=os.path.join(tmp, "worker.log")))
    admin = os.path.join(os.path.dirname(sys.executable), "cmsshop-admin")
    return [
        subprocess.Popen([admin, ini, "worker"], stderr=subprocess.DEVNULL) for _ in range(count)
    ]


def paid_count(engine) -> int:
    with engine.connect() as conn:
        return conn.scalar(select(func.count()).select_from(Order).where(Order.status == "paid"))


def wait_until_paid(engine, orders: int, timeout: float = 600) -> float:
    """time.time() when every order was paid (polled every 20 ms)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if paid_count(engine) >= orders:
            return time.time()
        time.sleep(0.02)
    sys.exit(f"only {paid_count(engine)} of {orders} orders were paid after {timeout} s")


class Receiver:
    """A webhook endpoint's server on loopback (``--subscriber``): answers 200 at once and
    counts the deliveries per event id."""

    def __init__(self, latency: float = 0.0):
        import collections
        import http.server

        receiver = self
        self.received: collections.Counter = collections.Counter()
        self.last_at = 0.0

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                time.sleep(latency)
                receiver.received[json.loads(body)["id"]] += 1
                receiver.last_at = time.time()
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"

    def stop(self) -> None:
        self.server.shutdown()


def add_subscriber(engine, url: str, server_secret: str) -> None:
    with Session(engine) as session:
        session.add(
            WebhookEndpoint(
                url=url,
                event_types=list(WEBHOOK_EVENT_TYPES),
                secret_encrypted=encrypt_secret(server_secret, new_secret()),
            )
        )
        session.commit()


def wait_until_delivered(engine, timeout: float = 600) -> bool:
    """Whether every webhook delivery succeeded within ``timeout`` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        with engine.connect() as conn:
            waiting = conn.scalar(
                select(func.count())
                .select_from(WebhookDelivery)
                .where(WebhookDelivery.status != "succeeded")
            )
        if not waiting:
            return True
        time.sleep(0.1)
    return False


class SlowProvider:
    """A stand-in for the card provider's API on loopback (``--provider-latency``): it
    answers the confirmation call (GET /v1/checkout/sessions/<id>) with the session the
    event carries, after ``latency`` seconds, as a distant API would."""

    def __init__(self, latency: float, sessions: dict[str, dict]):
        import http.server

        provider = self
        self.latency, self.sessions, self.calls = latency, sessions, 0

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                time.sleep(provider.latency)
                provider.calls += 1
                found = provider.sessions.get(self.path.rsplit("/", 1)[-1])
                data = json.dumps(found or {"error": {"message": "No such object"}}).encode()
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def stop(self) -> None:
        self.server.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database-url", help="default: a fresh SQLite file in a temp dir")
    parser.add_argument("--reset", action="store_true", help="PostgreSQL: drop the public schema")
    parser.add_argument("--orders", type=int, default=2000)
    parser.add_argument("--senders", type=int, default=8)
    parser.add_argument("--threads", type=int, default=8, help="waitress threads")
    parser.add_argument(
        "--processing",
        choices=("queued", "inline"),
        default="queued",
        help="cmsshop.payments.webhook_processing (queued: the production default)",
    )
    parser.add_argument("--workers", type=int, default=1, help="worker processes (queued)")
    parser.add_argument(
        "--provider-latency",
        type=float,
        default=0,
        help="ms: confirm every payment with a loopback provider API this slow, instead of "
        "trusting verified events; the targets are then the answers' p99 and exactly-once",
    )
    parser.add_argument(
        "--subscriber",
        action="store_true",
        help="an outgoing webhook endpoint subscribed to every event type, on loopback",
    )
    parser.add_argument(
        "--receiver-latency", type=float, default=0, help="ms the --subscriber's answers take"
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve_forever()
        return 0

    tmp = tempfile.mkdtemp(prefix="cmsshop-bench-")
    url = args.database_url or f"sqlite:///{tmp}/bench.sqlite"
    print(
        f"database {url.split('@')[-1]}; {args.orders} orders; {args.senders} senders; "
        f"{args.processing} processing"
        + (f", {args.workers} worker process(es)" if args.processing == "queued" else "")
    )
    numbers = prepare_database(url, args.reset, args.orders)
    settings = {
        "cmsshop.environment": "development",
        "cmsshop.database_url": url,
        "cmsshop.secret": "benchmark-secret-0123456789-abcdefghijklmnop",
        "cmsshop.modules": "store webhooks.cardprovider",
        "cmsshop.storage_dir": os.path.join(tmp, "files"),
        "cmsshop.mail.backend": "files",
        "cmsshop.mail.dir": os.path.join(tmp, "mail"),
        "cmsshop.cardprovider.webhook_secrets": SECRET,
        "cmsshop.payments.trust_verified_events": "true",
        "cmsshop.payments.webhook_processing": args.processing,
    }
    events = [
        build_event(
            "checkout.session.completed",
            checkout_session_object(order_number=n, amount=PRICE, currency="EUR"),
        )
        for n in numbers
    ]
    provider = None
    if args.provider_latency:
        sessions = {e["data"]["object"]["id"]: e["data"]["object"] for e in events}
        provider = SlowProvider(args.provider_latency / 1000, sessions)
        settings.update(
            {
                "cmsshop.payments.trust_verified_events": "false",
                "cmsshop.cardprovider.api_key": "sk_test_bench0123456789",
                "cmsshop.cardprovider.api_base": provider.url,
            }
        )
        print(f"payments confirmed by a provider API answering in {args.provider_latency:.0f} ms")
    engine = make_engine(url)
    receiver = None
    if args.subscriber:
        receiver = Receiver(args.receiver_latency / 1000)
        add_subscriber(engine, receiver.url, settings["cmsshop.secret"])
        settings["cmsshop.webhooks.allow_private_addresses"] = "true"
        print(f"an outgoing webhook endpoint subscribed to every event type at {receiver.url}")
    server, base = start_server(settings, args.threads)
    workers = start_workers(settings, tmp, args.workers) if args.processing == "queued" else []
    webhook = "/api/webhooks/cardprovider"
    queued = args.processing == "queued"
    try:
        _, seconds, latencies, _ = send_all(base, BARE_PATH, events, args.senders, method="GET")
        report("bare Pyramid route, the same senders (reference)", seconds, latencies, {})
        bare_rps = len(latencies) / seconds
        started, seconds, latencies, statuses = send_all(base, webhook, events, args.senders)
        report("first delivery of every event", seconds, latencies, statuses)
        answered = statuses.get("200 queued" if queued else "200 processed", 0)
        fulfil_seconds = (wait_until_paid(engine, args.orders) - started) if queued else seconds
        fulfil_rate, fulfil_p99 = args.orders / fulfil_seconds, percentile(latencies, 99) * 1000
        print(
            f"  fulfilments/s    {fulfil_rate:.0f}: all {args.orders} orders paid "
            f"{fulfil_seconds:.2f} s after the first send ({fulfil_rate / bare_rps:.0%} of "
            f"the bare route; target {FULFIL_TARGET}/s, answers p99 < {P99_TARGET_MS} ms)"
        )
        before = row_counts(engine)
        print(f"  rows             {before}")
        _, seconds, latencies, statuses = send_all(base, webhook, events, args.senders)
        report("second delivery of every event (duplicates)", seconds, latencies, statuses)
        duplicate_rate = statuses.get("200 duplicate", 0) / seconds
        print(
            f"  duplicates/s     {duplicate_rate:.0f} ({duplicate_rate / bare_rps:.0%} of the "
            f"bare route; target {DUPLICATE_TARGET}/s)"
        )
        time.sleep(1.0)  # anything a duplicate wrongly queued would be acted on by now
        after = row_counts(engine)
        new_rows = {name: after[name] - before[name] for name in after}
        print(f"  rows             {after}")
        print(f"  new rows         {new_rows}")
        with Session(engine) as session:
            sequences = sorted(session.scalars(select(Invoice.sequence)))
        gap_free = sequences == list(range(1, len(sequences) + 1))
        print(f"  invoice numbers  1..{len(sequences)} gap-free: {gap_free}")
        fast = (
            fulfil_rate >= FULFIL_TARGET
            and duplicate_rate >= DUPLICATE_TARGET
            and fulfil_p99 < P99_TARGET_MS
        )
        if provider is not None:
            print(f"  provider calls   {provider.calls} (one per payment)")
            fast = fulfil_p99 < P99_TARGET_MS  # the rates are bound by the provider here
        print(f"  targets met      {fast}")
        hooks_ok = True
        if receiver is not None:
            delivered = wait_until_delivered(engine)
            done = receiver.last_at - started
            counts = sorted(set(receiver.received.values()))
            hooks_ok = (
                delivered
                and before["webhook_events"] == 2 * args.orders
                and len(receiver.received) == 2 * args.orders
                and counts == [1]
            )
            print(
                f"  webhooks         {len(receiver.received)} events received "
                f"(deliveries per event: {counts}), the last {done:.2f} s after the first "
                f"send ({len(receiver.received) / done:.0f}/s); one order.paid and one "
                f"license.created per order, each delivered once: {hooks_ok}"
            )
        ok = (
            fast
            and hooks_ok
            and answered == args.orders
            and before["fulfilments"] == args.orders
            and not any(new_rows.values())
            and gap_free
        )
    finally:
        if provider is not None:
            provider.stop()
        if receiver is not None:
            receiver.stop()
        for process in [server, *workers]:
            process.terminate()
        for process in [server, *workers]:
            process.wait(timeout=30)
        engine.dispose()
    print("\nOK" if ok else "\nFAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
