"""Parallel wrong passwords must not get more checks than the limit.

The guesses race over real HTTP (waitress, 8 threads, real commits), so each request
runs in its own thread with its own database connection, as in production.
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

from helpers.app import PASSWORD, serve

LIMIT = 5  # cmsshop.login_max_failures in these tests
LOGIN = "/api/auth/login"


class Browser:
    """One anonymous cookie and its CSRF token, shared by parallel requests."""

    def __init__(self, base_url: str, ip: str | None = None):
        self.netloc = urllib.parse.urlsplit(base_url).netloc
        self.forwarded = {"X-Forwarded-For": ip} if ip else {}
        status, headers, body = self.request("GET", "/api/auth/session")
        assert status == 200
        self.cookie = headers["Set-Cookie"].split(";", 1)[0]
        self.csrf = body["csrfToken"]

    def request(self, method: str, path: str, body: dict | None = None, headers=None):
        conn = http.client.HTTPConnection(self.netloc, timeout=30)
        try:
            conn.request(
                method,
                path,
                body=json.dumps(body) if body is not None else None,
                headers={"Content-Type": "application/json", **self.forwarded, **(headers or {})},
            )
            response = conn.getresponse()
            return response.status, response.headers, json.loads(response.read() or b"null")
        finally:
            conn.close()

    def login(self, email: str, password: str):
        return self.request(
            "POST",
            LOGIN,
            {"email": email, "password": password},
            {"Cookie": self.cookie, "X-CSRF-Token": self.csrf},
        )


def parallel_logins(browser: Browser, attempts: list[tuple[str, str]]):
    start = threading.Barrier(min(len(attempts), 40))

    def attempt(credentials):
        start.wait(timeout=30)
        return browser.login(*credentials)

    with ThreadPoolExecutor(max_workers=len(attempts)) as pool:
        return list(pool.map(attempt, attempts))


def statuses(results) -> dict[int, int]:
    counts: dict[int, int] = {}
    for status, _headers, _body in results:
        counts[status] = counts.get(status, 0) + 1
    return counts


def assert_refusals_are_json_with_retry_after(results) -> None:
    for status, headers, body in results:
        if status == 429:
            assert headers["Content-Type"].startswith("application/json")
            assert body["code"] == "rate_limited"
            assert int(headers["Retry-After"]) >= 1


def test_40_parallel_wrong_passwords_check_at_most_the_limit(app, customer):
    with serve(app) as url:
        browser = Browser(url)
        results = parallel_logins(browser, [(customer.email, "wrong password")] * 40)
        counts = statuses(results)
        # Every 401 is a password check that ran; the rest were refused before it.
        assert counts.get(401, 0) <= LIMIT, counts
        assert counts.get(401, 0) + counts.get(429, 0) == 40, counts
        assert counts.get(429, 0) >= 40 - LIMIT
        assert_refusals_are_json_with_retry_after(results)
        # The right password within the window is refused too (no check at all).
        status, headers, body = browser.login(customer.email, PASSWORD)
        assert status == 429 and body["code"] == "rate_limited"
        assert int(headers["Retry-After"]) >= 1


def test_parallel_guesses_at_many_accounts_from_one_address_are_bounded(app, customer):
    with serve(app) as url:
        browser = Browser(url)
        attempts = [(f"user{i}@example.com", "wrong password") for i in range(39)]
        results = parallel_logins(browser, [(customer.email, "wrong password"), *attempts])
        counts = statuses(results)
        # login.ip allows four times the per-account limit from one address.
        assert counts.get(401, 0) <= 4 * LIMIT, counts
        assert counts.get(401, 0) + counts.get(429, 0) == 40, counts
        assert_refusals_are_json_with_retry_after(results)


def test_parallel_right_passwords_succeed_and_take_their_attempts_back(app, customer):
    with serve(app) as url:
        browser = Browser(url)
        results = parallel_logins(browser, [(customer.email, PASSWORD)] * LIMIT)
        assert statuses(results) == {200: LIMIT}
        # Refunded: the whole allowance of wrong guesses is still there, and no more.
        later = [browser.login(customer.email, "wrong password")[0] for _ in range(LIMIT + 1)]
        assert later == [401] * LIMIT + [429]


def test_a_right_password_before_the_limit_does_not_reset_earlier_failures(app, customer):
    with serve(app) as url:
        browser = Browser(url)
        first = parallel_logins(browser, [(customer.email, "wrong password")] * 3)
        assert statuses(first) == {401: 3}
        status, _headers, body = browser.login(customer.email, PASSWORD)
        assert status == 200 and body["user"]["email"] == customer.email
        # Three failures still count: two more checks, then refusals.
        again = parallel_logins(browser, [(customer.email, "wrong password")] * 6)
        counts = statuses(again)
        assert counts.get(401, 0) <= 2 and counts.get(401, 0) + counts.get(429, 0) == 6, counts
        assert browser.login(customer.email, PASSWORD)[0] == 429
