"""A frozen database answers 503 database_unavailable within seconds,
and routes that need no database keep answering.

Timings are taken over real HTTP (waitress), as a client sees them.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time

import pytest
import sqlalchemy as sa
from helpers.app import PASSWORD, is_postgresql, requires_postgresql, serve
from helpers.clients import new_client
from helpers.outage import assert_unavailable, get

from cmsshop.models import Base

TIMEOUT_MS = 1500


@contextlib.contextmanager
def postgresql_frozen(engine):
    """Another connection holds every table in ACCESS EXCLUSIVE mode (as a long
    migration or a stuck maintenance job would)."""
    tables = ", ".join(["alembic_version", *(t.name for t in Base.metadata.sorted_tables)])
    with engine.connect() as conn:
        transaction = conn.begin()
        conn.exec_driver_sql(f"LOCK TABLE {tables} IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            transaction.rollback()


@contextlib.contextmanager
def sqlite_write_locked(database_url: str):
    """Another connection holds SQLite's write lock (BEGIN IMMEDIATE) and sits on it."""
    engine = sa.create_engine(database_url, connect_args={"isolation_level": None})
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            try:
                yield
            finally:
                conn.exec_driver_sql("ROLLBACK")
    finally:
        engine.dispose()


@requires_postgresql
def test_frozen_postgresql_answers_503_quickly_and_openapi_keeps_working(make_app, engine):
    # health_fresh 0: the health call right after the freeze probes again (by default a
    # probe answers for the calls of the next quarter second).
    app = make_app(
        **{"cmsshop.db_statement_timeout_ms": str(TIMEOUT_MS), "cmsshop.health_fresh": "0"}
    )
    with serve(app) as url:
        assert get(url, "/api/health")[0] == 200
        # Built once before the freeze (the first OpenAPI document took over a second on a
        # loaded machine): what is measured below is whether a call waits for the database.
        assert get(url, "/api/openapi.json")[0] == get(url, "/api/license/jwks.json")[0] == 200
        with postgresql_frozen(engine):
            status, headers, body, seconds = get(url, "/api/health")
            assert_unavailable(status, headers, body)
            assert seconds < TIMEOUT_MS / 1000 + 2, seconds
            # Faster than the statement timeout: no statement waited on the locked tables.
            status, _headers, body, seconds = get(url, "/api/openapi.json")
            assert status == 200 and body["openapi"].startswith("3.")
            assert seconds < TIMEOUT_MS / 1000, seconds
            status, _headers, body, seconds = get(url, "/api/license/jwks.json")
            assert status == 200 and body["keys"], body
            assert seconds < TIMEOUT_MS / 1000, seconds
            status, headers, body, seconds = get(url, "/api/store/products")
            assert_unavailable(status, headers, body)
            assert seconds < TIMEOUT_MS / 1000 + 2, seconds
            status, headers, body, seconds = get(url, "/api/bootstrap")
            assert_unavailable(status, headers, body)
        # Thawed: the same app answers again.
        assert get(url, "/api/health")[0] == 200


@requires_postgresql
def test_the_statement_timeout_is_a_setting(make_app, engine):
    app = make_app(**{"cmsshop.db_statement_timeout_ms": "300"})
    with serve(app) as url, postgresql_frozen(engine):
        status, headers, body, seconds = get(url, "/api/health")
        assert_unavailable(status, headers, body)
        # Well under the default statement timeout (5 s), with room for a loaded machine.
        assert seconds < 3, seconds


@requires_postgresql
def test_a_restart_drops_the_whole_pool_and_each_path_recovers_at_its_next_attempt(
    app, engine, dbsession, customer
):
    """After a server restart every pooled connection is dead. The first statement to
    meet one -- on the ORM, on the rate limiter's plain statements (a SQLAlchemy
    Connection's DBAPI cursor) or on a raw connection (licensing validate) -- forgets the
    pool's connections of that age, as SQLAlchemy does on a disconnect it sees, so the
    request's next attempt runs on a fresh one. Forgetting only the one connection, the
    pool's other dead ones (checked out first in, first out) would use up the request's
    three attempts: 503."""
    from helpers.licensing import call_body, make_license, make_product, post, runtime

    app_engine = app.registry["cmsshop.engine"]
    license = make_license(dbsession, make_product(dbsession, "site-guard-pro"))
    client, product_runtime = new_client(app), runtime(app)
    body = call_body(license)
    assert post(product_runtime, "activate", body).status_code == 201
    csrf = client.get("/api/auth/session").json["csrfToken"]

    def login():
        return client.post_json(
            "/api/auth/login",
            {"email": customer.email, "password": PASSWORD},
            headers={"X-CSRF-Token": csrf},
            expect_errors=True,
        )

    def validate():
        return post(product_runtime, "validate", {**body, "nonce": secrets.token_hex(8)})

    def bootstrap():
        return client.get("/api/bootstrap", expect_errors=True)

    for request in (login, validate, bootstrap):
        # Five live connections idle in the pool, and no other: the session's app has
        # served many tests, and its pool may hold any number of connections, some of
        # them perhaps closed already (never checked again without a pre-ping).
        app_engine.dispose()
        idle = [app_engine.raw_connection() for _ in range(5)]
        pids = {pooled.driver_connection.info.backend_pid for pooled in idle}
        for pooled in idle:
            pooled.close()
        terminated = terminate_other_backends(engine)
        assert len(pids) == 5 and pids <= terminated, (pids, terminated)
        response = request()
        assert response.status_code == 200, (request.__name__, response.text)


def test_unreachable_database_answers_503_within_the_connect_timeout(make_app):
    # A black-holed address: connecting waits for the connect timeout, not forever.
    # Routes without a database answer in less than one connect timeout: they never
    # tried to connect (3 s, so that a loaded test machine cannot blur the difference).
    connect_timeout = 3
    app = make_app(
        **{
            "cmsshop.database_url": "postgresql+psycopg://nobody@10.255.255.1:5432/none",
            "cmsshop.db_connect_timeout": str(connect_timeout),
        }
    )
    with serve(app) as url:
        status, headers, body, seconds = get(url, "/api/health")
        assert_unavailable(status, headers, body)
        assert seconds < connect_timeout + 3, seconds
        status, _headers, _body, seconds = get(url, "/api/openapi.json")
        assert status == 200 and seconds < connect_timeout, seconds
        status, _headers, body, seconds = get(url, "/api/license/jwks.json")
        assert status == 200 and body["keys"] and seconds < connect_timeout, seconds


def test_sqlite_write_lock_held_elsewhere_answers_503_within_the_busy_timeout(
    make_app, database_url, customer
):
    if is_postgresql(database_url):
        pytest.skip("SQLite's write lock")
    app = make_app(**{"cmsshop.db_busy_timeout_ms": str(TIMEOUT_MS)})
    client = new_client(app)
    csrf = client.get("/api/auth/session").json["csrfToken"]
    cookie = f"cmsshop_session={client.cookies['cmsshop_session']}"
    login = json.dumps({"email": customer.email, "password": PASSWORD})
    with serve(app) as url, sqlite_write_locked(database_url):
        status, headers, body, seconds = get(
            url,
            "/api/auth/login",
            "POST",
            login,
            {"Content-Type": "application/json", "X-CSRF-Token": csrf, "Cookie": cookie},
        )
        assert_unavailable(status, headers, body)
        # One wait for the lock, not one per retry attempt.
        assert seconds < TIMEOUT_MS / 1000 + 2, seconds
        # Readers are not blocked (WAL), nor are routes without a database.
        assert get(url, "/api/health")[0] == 200
        assert get(url, "/api/openapi.json")[0] == 200
        assert get(url, "/api/store/products")[0] == 200
    # Released: the same login works.
    assert (
        client.post_json(
            "/api/auth/login",
            {"email": customer.email, "password": PASSWORD},
            headers={"X-CSRF-Token": csrf},
        ).json["user"]["email"]
        == customer.email
    )


def test_openapi_and_health_do_not_need_a_request_session(app):
    # A request that never asks for request.db opens no connection: counted on the pool.
    engine = app.registry["cmsshop.engine"]
    checkouts = []
    sa.event.listen(engine, "checkout", lambda *args: checkouts.append(1))
    client = new_client(app)
    client.get("/api/openapi.json", status=200)
    assert checkouts == []


def terminate_other_backends(engine) -> set[int]:
    """Drop every other connection to this database (a PostgreSQL restart, a proxy's idle
    timeout), then let the test's own engine reconnect lazily. Returns the process ids
    of the connections the server ended."""
    with engine.connect() as conn:
        # In the select list, not the WHERE clause: there, the planner may call it on
        # this connection's own process before the filter leaves that one out.
        rows = conn.exec_driver_sql(
            "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).all()
        killed = {pid for pid, ended in rows if ended}
    engine.dispose()
    return killed


@requires_postgresql
def test_dropped_connections_are_replaced_without_a_pre_ping(app, engine, dbsession):
    """No pre-ping on checkout: a request whose pooled connection the server dropped
    fails its first statement and is retried on a fresh connection -- the client sees
    nothing. The ORM path (bootstrap), the raw path (licensing validate) and the health
    probe's own connection all recover."""
    from helpers.licensing import call_body, make_license, make_product, post, runtime

    def fresh(body: dict) -> dict:
        return {**body, "nonce": secrets.token_hex(8)}

    license = make_license(dbsession, make_product(dbsession, "site-guard-pro"))
    client, product_runtime = new_client(app), runtime(app)
    body = call_body(license)
    assert post(product_runtime, "activate", body).status_code == 201
    for _ in range(2):
        assert client.get("/api/bootstrap").status_code == 200
        assert (
            post(product_runtime, "validate", {**body, "nonce": secrets.token_hex(8)}).status_code
            == 200
        )
        assert client.get("/api/health").status_code == 200
        assert terminate_other_backends(engine)
    time.sleep(0.3)  # past the health probe's quarter second
    assert client.get("/api/bootstrap").status_code == 200
    assert (
        post(product_runtime, "validate", {**body, "nonce": secrets.token_hex(8)}).status_code
        == 200
    )
