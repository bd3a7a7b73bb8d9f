"""/api/health's probe (cmsshop.db.HealthProbe): the thread's own connection (the one the
catalogue reads use), no transaction, and a quarter-second window in which one successful
probe answers for the calls after it."""

from __future__ import annotations

import sqlite3
import time

import pytest
import sqlalchemy as sa
from helpers.app import is_postgresql
from helpers.clients import new_client

from cmsshop.db import HealthProbe, make_engine


def test_health_opens_no_transaction_and_checks_out_nothing_after_the_first(make_app):
    app = make_app(**{"cmsshop.health_fresh": "0"})
    client = new_client(app)
    engine = app.registry["cmsshop.engine"]
    checkouts, statements = [], []
    sa.event.listen(engine, "checkout", lambda *args: checkouts.append(1))
    sa.event.listen(engine, "before_cursor_execute", lambda *args: statements.append(1))
    for _ in range(5):
        assert client.get("/api/health").json == {"status": "ok", "database": "ok"}
    assert len(checkouts) == 1  # the probe's own connection, taken once for this thread
    assert statements == []  # on the DBAPI cursor: no SQLAlchemy statement, no BEGIN


def test_the_probe_and_the_catalogue_reads_share_the_threads_connection(make_app):
    app = make_app(**{"cmsshop.health_fresh": "0", "cmsshop.answer_cache_ttl": "0"})
    client = new_client(app)
    engine = app.registry["cmsshop.engine"]
    checkouts = []
    sa.event.listen(engine, "checkout", lambda *args: checkouts.append(1))
    for _ in range(3):
        assert client.get("/api/store/products").status_code == 200
        assert client.get("/api/docs/articles?q=guide").status_code == 200
        assert client.get("/api/health").json == {"status": "ok", "database": "ok"}
        client.get("/api/store/products/no-such-product", status=404)
    assert len(checkouts) == 1  # one connection, taken once for this thread


@pytest.fixture
def probe_engine(tmp_path, database_url):
    if is_postgresql(database_url):
        pytest.skip("the probe's window does not depend on the database")
    engine = make_engine(f"sqlite:///{tmp_path}/probe.sqlite")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE alembic_version (version_num VARCHAR(32))")
    yield engine
    engine.dispose()


def traced(probe: HealthProbe) -> list[str]:
    """The statements the probe's connection of this thread runs from now on."""
    seen: list[str] = []
    probe.connections.get().set_trace_callback(seen.append)
    return seen


def test_a_probe_answers_for_the_calls_of_its_window(probe_engine):
    probe = HealthProbe(probe_engine, fresh=0.2)
    probe.ping()
    seen = traced(probe)
    probe.ping()
    probe.ping()
    assert seen == []  # inside the window: no statement
    time.sleep(0.25)
    probe.ping()
    assert seen == ["SELECT 1 FROM alembic_version"]


def test_a_failed_probe_answers_for_nothing(probe_engine):
    probe = HealthProbe(probe_engine, fresh=0)
    probe.ping()
    with probe_engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE alembic_version")
    with pytest.raises(sqlite3.OperationalError):
        probe.ping()
    # A window never starts from a failure: the next call probes (and fails) again.
    probe.fresh = 60
    with pytest.raises(sqlite3.OperationalError):
        probe.ping()
    with probe_engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE alembic_version (version_num VARCHAR(32))")
    probe.ping()
    connection = probe.connections.get()
    probe_engine.dispose()  # closes the probe's connections too
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        connection.execute("SELECT 1")


def test_the_probe_opens_new_connections_after_the_pool_is_disposed(app):
    """Disposing the engine's pool closes every thread's probe connection with it; each
    thread's next probe opens a new one instead of answering 503 on the closed one."""
    client = new_client(app)
    engine = app.registry["cmsshop.engine"]
    probe = app.registry["cmsshop.health_probe"]
    assert client.get("/api/health").status_code == 200
    before = probe.connections.get()
    engine.dispose()
    probe.succeeded_at = float("-inf")  # past the probe's window
    assert client.get("/api/health").json == {"status": "ok", "database": "ok"}
    assert probe.connections.get() is not before
