"""Benchmark: fulfil N distinct payments through the live card webhook route.

    .venv/bin/python bench/webhooks.py          # a fresh SQLite file
    .venv/bin/python bench/webhooks.py --reset \
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench

1. Migrates a fresh database and creates N pending orders (one licensed product each).
2. Serves the real app (cmsshop.config.configure) with waitress on loopback, in a
   separate process (so the senders do not share its interpreter lock).
3. S concurrent senders POST one signed ``checkout.session.completed`` per order to
   ``/api/webhooks/cardprovider`` (trust-verified-events mode, so no provider API is
   involved: this measures verification, the event log and exactly-once fulfilment).
   Prints fulfilments/s and latency percentiles.
4. Re-sends every event (fresh signatures, same event ids) and shows that no row was
   added: counts of fulfilments, invoices, entitlements, licenses and events are taken
   before and after.

The bare Pyramid route (bench/benchlib.py) is driven first by the same senders, for
reference. Exits 1 below the targets (300 fulfilments/s, 400 duplicates/s, p99 under
500 ms) or if exactly-once or gap-free invoice numbering failed.

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

import requests
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
)
from cmsshop.services.payments.cardprovider import (  # noqa: E402
    build_event,
    checkout_session_object,
    signed_delivery,
)
from cmsshop.services.payments.checkout import new_order_number  # noqa: E402

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
            for model in (Fulfilment, Invoice, Entitlement, License, PaymentEvent)
        } | {
            "paid orders": session.scalar(
                select(func.count()).select_from(Order).where(Order.status == "paid")
            )
            or 0
        }


def send_all(
    url: str, events: list[dict], senders: int, method: str = "POST"
) -> tuple[float, list[float], dict]:
    """POST every event once (signed at send time); returns (seconds, latencies, statuses).
    ``method="GET"``: as many GETs of ``url``, for the bare route's reference."""
    work: queue.Queue = queue.Queue()
    for payload in events:
        work.put(payload)
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    lock = threading.Lock()

    def sender():
        http = requests.Session()
        while True:
            try:
                payload = work.get_nowait()
            except queue.Empty:
                return
            headers, body = signed_delivery(payload, SECRET)
            started = time.perf_counter()
            if method == "GET":
                response = http.get(url, timeout=60)
            else:
                response = http.post(url, data=body, headers=headers, timeout=60)
            elapsed = time.perf_counter() - started
            status = response.json().get("status", str(response.status_code))
            key = f"{response.status_code} {status}"
            with lock:
                latencies.append(elapsed)
                statuses[key] = statuses.get(key, 0) + 1

    threads = [threading.Thread(target=sender) for _ in range(senders)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started, latencies, statuses


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database-url", help="default: a fresh SQLite file in a temp dir")
    parser.add_argument("--reset", action="store_true", help="PostgreSQL: drop the public schema")
    parser.add_argument("--orders", type=int, default=2000)
    parser.add_argument("--senders", type=int, default=8)
    parser.add_argument("--threads", type=int, default=8, help="waitress threads")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve_forever()
        return 0

    tmp = tempfile.mkdtemp(prefix="cmsshop-bench-")
    url = args.database_url or f"sqlite:///{tmp}/bench.sqlite"
    print(f"database {url.split('@')[-1]}; {args.orders} orders; {args.senders} senders")
    numbers = prepare_database(url, args.reset, args.orders)
    settings = {
        "cmsshop.environment": "development",
        "cmsshop.database_url": url,
        "cmsshop.secret": "benchmark-secret-0123456789-abcdefghijklmnop",
        "cmsshop.modules": "store webhooks.cardprovider",
        "cmsshop.storage_dir": os.path.join(tmp, "files"),
        "cmsshop.cardprovider.webhook_secrets": SECRET,
        "cmsshop.payments.trust_verified_events": "true",
    }
    engine = make_engine(url)
    server, base = start_server(settings, args.threads)
    webhook = f"{base}/api/webhooks/cardprovider"
    events = [
        build_event(
            "checkout.session.completed",
            checkout_session_object(order_number=n, amount=PRICE, currency="EUR"),
        )
        for n in numbers
    ]
    try:
        bare_url = f"{base}{BARE_PATH}"
        seconds, latencies, _ = send_all(bare_url, events, args.senders, method="GET")
        report("bare Pyramid route, the same senders (reference)", seconds, latencies, {})
        bare_rps = len(latencies) / seconds
        seconds, latencies, statuses = send_all(webhook, events, args.senders)
        report("first delivery (fulfils)", seconds, latencies, statuses)
        fulfilled = statuses.get("200 processed", 0)
        fulfil_rate, fulfil_p99 = fulfilled / seconds, percentile(latencies, 99) * 1000
        print(
            f"  fulfilments/s    {fulfil_rate:.0f} ({fulfil_rate / bare_rps:.0%} of the bare "
            f"route; target {FULFIL_TARGET}/s, p99 < {P99_TARGET_MS} ms)"
        )
        before = row_counts(engine)
        print(f"  rows             {before}")
        seconds, latencies, statuses = send_all(webhook, events, args.senders)
        report("second delivery of every event (duplicates)", seconds, latencies, statuses)
        duplicate_rate = statuses.get("200 duplicate", 0) / seconds
        print(
            f"  duplicates/s     {duplicate_rate:.0f} ({duplicate_rate / bare_rps:.0%} of the "
            f"bare route; target {DUPLICATE_TARGET}/s)"
        )
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
        print(f"  targets met      {fast}")
        ok = (
            fast
            and fulfilled == args.orders
            and before["fulfilments"] == args.orders
            and not any(new_rows.values())
            and gap_free
        )
    finally:
        server.terminate()
        server.wait(timeout=10)
        engine.dispose()
    print("\nOK" if ok else "\nFAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
