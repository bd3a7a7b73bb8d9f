"""Registration is rate limited per IP and does not reveal which
emails have accounts."""

from __future__ import annotations

import time

from helpers.clients import client_from, register
from sqlalchemy import func, select

from cmsshop.models import User, UserSession

REGISTER = "/api/auth/register"


def test_taken_email_gets_the_status_and_body_of_a_new_one(app, customer, dbsession):
    new = register(client_from(app, "10.0.0.1"), "fresh@example.com")
    taken_client = client_from(app, "10.0.0.2")
    taken = register(taken_client, customer.email.upper())
    assert new.status_int == taken.status_int == 202
    assert new.json == taken.json
    assert new.content_type == taken.content_type == "application/json"
    assert sorted(new.headers.keys()) == sorted(taken.headers.keys())
    # Nobody is logged in: neither the new account (not verified yet) nor the taken one.
    assert taken_client.get("/api/auth/session").json["user"] is None
    assert dbsession.scalar(select(func.count()).select_from(UserSession)) == 0
    # The existing account is untouched (same password hash, one row).
    assert dbsession.scalar(select(func.count()).select_from(User)) == 2


def test_taken_email_does_not_change_the_existing_password(app, customer):
    register(client_from(app, "10.0.0.3"), customer.email)
    from helpers.app import PASSWORD

    client_from(app, "10.0.0.4").login(customer.email, PASSWORD)


def test_registrations_per_ip_are_limited_with_retry_after(app):
    client = client_from(app, "10.0.1.1")
    for i in range(5):
        register(client, f"user{i}@example.com")
    refused = register(client, "user5@example.com", status=429)
    assert refused.content_type == "application/json"
    assert refused.json["code"] == "rate_limited"
    assert int(refused.headers["Retry-After"]) >= 1
    assert refused.json["retryAfter"] == int(refused.headers["Retry-After"])
    # Taken emails count too: they are what an enumeration would try.
    register(client, "user0@example.com", status=429)
    # Another address is not affected.
    register(client_from(app, "10.0.1.2"), "user5@example.com")


def test_the_limit_is_a_setting(make_app):
    app = make_app(**{"cmsshop.register_max_per_ip": "2"})
    client = client_from(app, "10.0.2.1")
    register(client, "a@example.com")
    register(client, "b@example.com")
    register(client, "c@example.com", status=429)


def test_invalid_bodies_do_not_use_up_the_allowance(app):
    client = client_from(app, "10.0.3.1")
    for _ in range(8):
        client.post_json(REGISTER, {"email": "nope", "password": "short"}, status=422)
    register(client, "ok@example.com")


def test_taken_email_costs_a_password_hash_like_a_new_one(make_app, customer):
    # At the real argon2 cost a hash takes tens of milliseconds; a taken email that skipped
    # it would answer several times faster and so reveal itself.
    app = make_app(**{"cmsshop.password_hashing": "default", "cmsshop.register_max_per_ip": "100"})
    client = client_from(app, "10.0.4.1")

    def timed(email: str) -> float:
        started = time.perf_counter()
        register(client, email)
        return time.perf_counter() - started

    new = min(timed(f"n{i}@example.com") for i in range(3))
    taken = min(timed(customer.email) for _ in range(3))
    assert taken > new * 0.5, (new, taken)
