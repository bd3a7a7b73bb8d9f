"""The smoke suite cleans up after runs that were killed before their teardown: their
databases are dropped by the next run on the same machine, a live run's and another
machine's are left alone."""

from __future__ import annotations

import os
import subprocess

import sqlalchemy as sa
from helpers.smoke_databases import SMOKE_PREFIX, drop_left_behind, host_tag


def test_a_killed_runs_database_is_dropped_by_the_next_run(smoke_database_url):
    server = sa.engine.make_url(smoke_database_url).set(database="postgres")
    admin = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    dead = subprocess.Popen(["true"])  # a process that is gone
    dead.wait()
    killed = f"{SMOKE_PREFIX}{host_tag()}_{dead.pid}_deadbeef"
    live = f"{SMOKE_PREFIX}{host_tag()}_{os.getpid()}_cafef00d"
    elsewhere = f"{SMOKE_PREFIX}00000000_{dead.pid}_deadbeef"
    ours = sa.engine.make_url(smoke_database_url).database
    try:
        with admin.connect() as connection:
            for name in (killed, live, elsewhere):
                connection.exec_driver_sql(f"CREATE DATABASE {name}")
            dropped = drop_left_behind(connection)
            left = set(
                connection.exec_driver_sql(
                    f"SELECT datname FROM pg_database WHERE starts_with(datname, '{SMOKE_PREFIX}')"
                ).scalars()
            )
        assert dropped == [killed]
        assert {live, elsewhere, ours} <= left and killed not in left
    finally:
        with admin.connect() as connection:
            for name in (killed, live, elsewhere):
                connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()
