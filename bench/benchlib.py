"""Shared by the benchmark scripts: a freshly migrated database to measure on."""

from __future__ import annotations

import os
import sys

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


def serve_app(url: str, storage: str, threads: int, modules: str) -> None:
    """In a child process: the real app (the real ``configure()``) with ``modules`` on a
    free loopback port under waitress; prints the port, then serves until killed."""
    import logging
    import secrets

    from waitress.server import create_server

    from cmsshop.config import configure

    # "Task queue depth is N" is expected when the clients outnumber idle threads.
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    app = configure(
        {
            "cmsshop.environment": "benchmark",
            "cmsshop.database_url": url,
            "cmsshop.secret": secrets.token_urlsafe(48),
            "cmsshop.modules": modules,
            "cmsshop.storage_dir": storage,
        }
    ).make_wsgi_app()
    server = create_server(app, host="127.0.0.1", port=0, threads=threads)
    print(server.effective_port, flush=True)
    server.run()


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
