"""Requests timed over real HTTP while the database is unavailable."""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse


def get(base_url: str, path: str, method: str = "GET", body=None, headers=None):
    """(status, headers, JSON body, seconds taken)."""
    conn = http.client.HTTPConnection(urllib.parse.urlsplit(base_url).netloc, timeout=60)
    started = time.perf_counter()
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        data = json.loads(response.read())
        return response.status, response.headers, data, time.perf_counter() - started
    finally:
        conn.close()


def assert_unavailable(status, headers, body) -> None:
    """The answer of a route whose database does not answer: 503 database_unavailable."""
    assert status == 503, body
    assert body["code"] == "database_unavailable"
    assert int(headers["Retry-After"]) >= 1
    assert headers["Content-Type"].startswith("application/json")
