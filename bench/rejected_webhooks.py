"""Measure what a burst of forged (badly signed) webhook deliveries adds to the database.

    .venv/bin/python bench/rejected_webhooks.py                      # a fresh SQLite file
    .venv/bin/python bench/rejected_webhooks.py --reset \
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench

Migrates a fresh database, builds the real app (cmsshop.config.configure) and POSTs N
deliveries of about 1 MiB each (the body limit) with a wrong Stripe signature to
/api/webhooks/cardprovider: once from N different addresses (every one is logged), once
from a single address (the per-address limit stops logging). Prints the growth of the
database: the SQLite file after a WAL checkpoint, or pg_total_relation_size of
payment_events on PostgreSQL. Never part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import webtest
from sqlalchemy import text

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchlib import migrate_fresh  # noqa: E402 - bench/benchlib.py, beside this script

from cmsshop.config import configure  # noqa: E402
from cmsshop.db import make_engine  # noqa: E402

MIB = 1024 * 1024
SECRET = "whsec_benchmark_0123456789abcdef"


def database_bytes(url: str, path: str | None) -> int:
    engine = make_engine(url)
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            size = conn.execute(text("SELECT pg_total_relation_size('payment_events')")).scalar()
        else:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            size = os.path.getsize(path)
    engine.dispose()
    return int(size)


def send_burst(app, count: int, addresses: int) -> dict[int, int]:
    head = b'{"id": "evt_forged", "type": "checkout.session.completed", "pad": "'
    body = head + b"x" * (MIB - 64 - len(head) - 2) + b'"}'
    answers: dict[int, int] = {}
    for index in range(count):
        address = f"10.9.{(index % addresses) // 250}.{(index % addresses) % 250 + 1}"
        client = webtest.TestApp(app, extra_environ={"REMOTE_ADDR": address})
        response = client.post(
            "/api/webhooks/cardprovider",
            body,
            headers={"Stripe-Signature": "t=1,v1=" + "0" * 64},
            expect_errors=True,
        )
        answers[response.status_int] = answers.get(response.status_int, 0) + 1
    return answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url")
    parser.add_argument("--reset", action="store_true")
    parser.add_argument("--deliveries", type=int, default=200)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="cmsshop-rejected-")
    path = None
    url = args.database_url
    if url is None:
        path = os.path.join(workdir, "bench.sqlite")
        url = f"sqlite:///{path}"
    migrate_fresh(url, args.reset).dispose()
    app = configure(
        {
            "cmsshop.environment": "testing",
            "cmsshop.database_url": url,
            "cmsshop.secret": "bench-secret-" + "x" * 40,
            "cmsshop.modules": "store webhooks.cardprovider",
            "cmsshop.storage_dir": os.path.join(workdir, "storage"),
            "cmsshop.license_key_dir": os.path.join(workdir, "keys"),
            "cmsshop.cardprovider.webhook_secrets": SECRET,
        }
    ).make_wsgi_app()
    for label, addresses in (("from distinct addresses", args.deliveries), ("from one address", 1)):
        before = database_bytes(url, path)
        answers = send_burst(app, args.deliveries, addresses)
        grown = database_bytes(url, path) - before
        print(
            f"{args.deliveries} forged ~1 MiB deliveries {label}: answers {answers}, "
            f"database grew by {grown} bytes ({grown / MIB:.3f} MiB)"
        )


if __name__ == "__main__":
    main()
