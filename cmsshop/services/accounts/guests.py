"""The accounts of guest checkout: an order placed with an e-mail address alone.

- ``customer_for_checkout`` gives the account the order belongs to. An address that has
  an account gets that account, whatever its role or state, and nothing about it
  changes; a new address gets a customer account with no password (``NO_PASSWORD``)
  and an unverified address. The caller answers both alike, so a checkout tells nobody
  whether an address has an account; the buyer sees the order's status only through
  the browser that placed it until they log in.
- An account without a password cannot log in (``users.authenticate`` refuses it as a
  wrong password). Its receipt carries a link that sets the first password, confirms
  the address and logs in (``tokens.set_first_password``); a password reset works too.
- ``check_guest_checkout_rate``: guest checkouts create accounts, so they are limited as
  registration is (``cmsshop.register_max_per_ip`` per ``cmsshop.register_window``), per
  IP and, since anyone can type anyone's address, per address too; counters of their
  own, so registering and buying do not use up each other's allowance.
"""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cmsshop.db import take_write_lock
from cmsshop.errors import RateLimited, ValidationFailed
from cmsshop.models import User
from cmsshop.services.accounts.users import NO_PASSWORD, find_user, has_password, normalise_email
from cmsshop.services.ratelimit import RateLimiter

__all__ = [
    "GUEST_EMAIL_POLICY",
    "GUEST_IP_POLICY",
    "check_guest_checkout_rate",
    "customer_for_checkout",
    "has_password",
    "rate_policies",
]

GUEST_IP_POLICY = "guest_checkout.ip"
GUEST_EMAIL_POLICY = "guest_checkout.email"
MAX_EMAIL, MAX_NAME = 320, 200  # the columns' sizes (and registration's limits)


def rate_policies(settings) -> list[tuple[str, int, int]]:
    """(name, limit, window) of the guest checkout policies: registration's numbers."""
    limit, window = settings["cmsshop.register_max_per_ip"], settings["cmsshop.register_window"]
    return [(GUEST_IP_POLICY, limit, window), (GUEST_EMAIL_POLICY, limit, window)]


def check_guest_checkout_rate(limiter: RateLimiter, email: str, client_ip: str) -> None:
    """Count a guest checkout for ``email`` from ``client_ip``; 429 ``rate_limited`` (with
    Retry-After) past either limit. Counted whether or not the address has an account,
    so the answer tells nothing. Call it before the request writes anything (the
    counters commit on their own: on SQLite the two transactions would wait on each
    other)."""
    checks = [(GUEST_EMAIL_POLICY, normalise_email(email)), (GUEST_IP_POLICY, client_ip)]
    refusal = limiter.count(checks)
    if refusal is not None:
        raise RateLimited(
            refusal.retry_after, "Too many checkouts without an account; wait before trying again."
        )


def _checked(email: str, name: str) -> tuple[str, str]:
    """The normalised address and the name to store; 422 for what the edge should have
    refused already (the view validates with registration's schema)."""
    email = normalise_email(email)
    local, at, domain = email.partition("@")
    if (
        not local
        or not at
        or not domain
        or "@" in domain
        or len(email) > MAX_EMAIL
        or any(c.isspace() or not c.isprintable() for c in email)
        # Reserved (RFC 2606), never delivered; a deleted account's address is one
        # (services.accounts.erasure), and no order may land on such an account.
        or domain == "invalid"
        or domain.endswith(".invalid")
    ):
        raise ValidationFailed({"email": "Enter a valid email address."})
    name = name.strip()
    if len(name) > MAX_NAME:
        raise ValidationFailed({"name": f"At most {MAX_NAME} characters."})
    return email, name or local[:MAX_NAME]


def customer_for_checkout(session: Session, email: str, name: str = "") -> User:
    """The account a guest's order belongs to: the existing account of ``email`` as it
    is, or a new customer account without a password, named ``name`` (or the address's
    local part), its address not verified. Two checkouts of a new address at once end
    with one account: the unique address settles it, and the loser reads the winner's."""
    email, name = _checked(email, name)
    # SQLite: queue for the write lock, so the lookup below is current and a concurrent
    # checkout of the same address waits for this one's commit.
    take_write_lock(session)
    user = find_user(session, email)
    if user is not None:
        return user
    try:
        with session.begin_nested():
            user = User(
                email=email,
                name=name,
                password_hash=NO_PASSWORD,
                role="customer",
                email_verified_at=None,
            )
            session.add(user)
    except IntegrityError:
        # PostgreSQL: another transaction inserted this address and committed while
        # ours waited on the unique index; READ COMMITTED lets the next statement see it.
        user = find_user(session, email)
        if user is None:  # it was not the address that collided
            raise
    return user
