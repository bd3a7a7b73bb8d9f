"""cmsshop.db.configure_sqlite_for_threads: SQLite's memory statistics (one mutex for
every allocation of the process) are off in a server process, which the paste app
factory sets up before anything connects. Run in child processes: the test process holds
SQLite connections, and SQLite may only be reconfigured while none is open."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import ctypes, sqlite3, sys
import _sqlite3
{setup}
connection = sqlite3.connect(":memory:")
connection.execute("CREATE TABLE t (x TEXT)")
connection.executemany("INSERT INTO t VALUES (?)", [("x" * 100,)] * 1000)
connection.execute("SELECT json_group_array(x) FROM t").fetchall()
library = ctypes.CDLL(_sqlite3.__file__)
library.sqlite3_memory_used.restype = ctypes.c_int64
print(library.sqlite3_memory_used())
"""


def probe(setup: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(setup=setup)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return int(done.stdout.split()[-1])


def test_a_server_process_counts_no_sqlite_allocations():
    if probe("") == 0:
        pytest.skip("this SQLite counts no allocations in the first place")
    configured = (
        "from cmsshop.db import configure_sqlite_for_threads\n"
        "assert configure_sqlite_for_threads() and configure_sqlite_for_threads()"
    )
    assert probe(configured) == 0


def test_the_paste_app_factory_configures_sqlite_first(tmp_path):
    """cmsshop.main (what pserve calls) on a migrated SQLite database: the app it makes
    answers, and SQLite counts nothing."""
    from alembic import command
    from helpers.app import alembic_config

    url = f"sqlite:///{tmp_path / 'factory.sqlite'}"
    command.upgrade(alembic_config(url), "head")
    setup = f"""
import cmsshop
from webtest import TestApp
app = cmsshop.main({{}}, **{{
    "cmsshop.database_url": {url!r}, "cmsshop.secret": "x" * 48,
    "cmsshop.storage_dir": {str(tmp_path)!r}, "cmsshop.modules": "store docs",
}})
assert TestApp(app).get("/api/store/products").json["total"] == 0
"""
    assert probe(setup) == 0
