"""Admins publishing the same legal page at the same moment, over real HTTP: every
publication becomes its own version, numbered 1..n without a gap or a duplicate (the
unique (kind, version) settles a collision and the loser is retried), on SQLite and
PostgreSQL alike."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import requests
from helpers.app import serve
from helpers.clients import new_client
from sqlalchemy import select

from cmsshop.models import LegalDocument

# As many as the request attempts (retry.attempts, 3): the last of n writers may lose
# n - 1 collisions before its turn, and more admins than that publishing the same page
# in the same instant is not a case worth a lock.
WRITERS = 3


def test_simultaneous_publications_each_get_a_version(app, admin, dbsession):
    client = new_client(app)
    client.login(admin.email)
    headers = {
        "Cookie": f"cmsshop_session={client.cookies['cmsshop_session']}",
        "X-CSRF-Token": client.csrf_token,
    }
    barrier = threading.Barrier(WRITERS)
    with serve(app) as url:

        def publish(n: int):
            barrier.wait(timeout=30)
            return requests.post(
                f"{url}/api/admin/legal/terms",
                json={"title": "Terms of sale", "body": f"Text number {n}."},
                headers=headers,
                timeout=60,
            )

        with ThreadPoolExecutor(max_workers=WRITERS) as pool:
            answers = list(pool.map(publish, range(WRITERS)))
    assert [a.status_code for a in answers] == [201] * WRITERS, [a.text for a in answers]
    assert sorted(a.json()["version"] for a in answers) == list(range(1, WRITERS + 1))
    dbsession.commit()
    stored = dbsession.scalars(select(LegalDocument).order_by(LegalDocument.version)).all()
    assert [d.version for d in stored] == list(range(1, WRITERS + 1))
    assert sorted(d.body for d in stored) == sorted(f"Text number {n}." for n in range(WRITERS))
