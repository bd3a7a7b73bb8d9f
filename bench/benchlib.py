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
