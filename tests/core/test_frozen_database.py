"""A PostgreSQL server frozen whole (SIGSTOP on the postmaster and every backend): the
kernel still accepts connections and acknowledges every byte, so neither the server's
statement timeout nor TCP notices anything. The app's own bound on each wait for an
answer (cmsshop.db_answer_timeout) makes health and database routes answer 503 within
seconds, routes without a database keep answering, and the same app recovers by itself
once the server runs again.

The cluster is the test's own (tests/helpers/private_postgresql.py): a shared server
must never be frozen. Timings are taken over real HTTP (waitress), as a client sees them.
"""

from __future__ import annotations

import concurrent.futures
import time

from alembic import command
from helpers.app import alembic_config, requires_postgresql, serve
from helpers.outage import assert_unavailable, get
from helpers.private_postgresql import private_cluster

ANSWER_TIMEOUT = 2.0
CONNECT_TIMEOUT = 2
HEALTH_BUDGET = ANSWER_TIMEOUT + 1  # the documented budget: one bounded wait, no retry
DATABASE_ROUTES = ("/api/store/products", "/api/bootstrap")


@requires_postgresql
def test_a_frozen_server_answers_503_in_seconds_and_recovers_by_itself(make_app):
    with private_cluster() as cluster:
        url = cluster.url()
        command.upgrade(alembic_config(url), "head")
        app = make_app(
            **{
                "cmsshop.database_url": url,
                "cmsshop.db_statement_timeout_ms": "1500",
                "cmsshop.db_answer_timeout": str(ANSWER_TIMEOUT),
                "cmsshop.db_connect_timeout": str(CONNECT_TIMEOUT),
                "cmsshop.health_fresh": "0",
            }
        )
        with serve(app) as base, concurrent.futures.ThreadPoolExecutor(4) as pool:
            # Pooled connections and the health probe's own, all idle and open.
            for path in ("/api/health", *DATABASE_ROUTES, "/api/openapi.json"):
                assert list(pool.map(lambda p: get(base, p)[0], [path] * 4)) == [200] * 4
            cluster.freeze()
            try:
                status, headers, body, seconds = get(base, "/api/health")
                assert_unavailable(status, headers, body)
                assert seconds < HEALTH_BUDGET, seconds
                for path in DATABASE_ROUTES:
                    status, headers, body, seconds = get(base, path)
                    assert_unavailable(status, headers, body)
                    # One bounded wait (a pooled connection's answer, or a new
                    # connection's handshake), not one per retry attempt.
                    assert seconds < ANSWER_TIMEOUT + CONNECT_TIMEOUT + 1, (path, seconds)
                # Requests of the database in flight (and their 5xx records, stored
                # after the answer is sent) leave the server free for the others.
                waiting = [pool.submit(get, base, path) for path in DATABASE_ROUTES * 2]
                time.sleep(0.2)
                for _ in range(3):
                    status, _headers, body, seconds = get(base, "/api/openapi.json")
                    assert status == 200 and body["openapi"].startswith("3."), body
                    assert seconds < 1, seconds
                for future in waiting:
                    assert_unavailable(*future.result()[:3])
                    assert future.result()[3] < ANSWER_TIMEOUT + CONNECT_TIMEOUT + 1
                status, headers, body, seconds = get(base, "/api/health")
                assert_unavailable(status, headers, body)
                assert seconds < HEALTH_BUDGET, seconds
            finally:
                cluster.thaw()
            # The same app, not restarted: every route answers again within seconds.
            started = time.monotonic()
            for path in ("/api/health", *DATABASE_ROUTES, "/api/openapi.json"):
                while (status := get(base, path)[0]) != 200 and time.monotonic() - started < 10:
                    time.sleep(0.2)
                assert status == 200, path
            assert time.monotonic() - started < 5
            for path in ("/api/health", *DATABASE_ROUTES):
                assert list(pool.map(lambda p: get(base, p)[0], [path] * 8)) == [200] * 8
