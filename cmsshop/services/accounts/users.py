"""Users: creation, password hashing (argon2id) and credential checks.

An empty ``password_hash`` (``NO_PASSWORD``) means no password was ever set: an account
created by a guest checkout (``services.accounts.guests``). No password matches it, and
checking one costs the same argon2 time as checking a wrong one.
"""

from __future__ import annotations

import functools

import argon2
from argon2 import profiles
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import User
from cmsshop.util import utcnow

# argon2id with argon2-cffi's defaults (RFC 9106 low-memory profile). The "cheapest"
# profile exists for the test suite only; production refuses it (cmsshop.settings).
HASHING_PROFILES = {"default": profiles.RFC_9106_LOW_MEMORY, "cheapest": profiles.CHEAPEST}
# The stored hash of an account whose owner has not chosen a password yet.
NO_PASSWORD = ""


class PasswordHasher:
    """argon2id at the cost profile of ``cmsshop.password_hashing``: one per app, found
    with ``request.find_service(PasswordHasher)``; no process-wide state, so two apps in
    one process (tests, a script next to a server) can use different costs."""

    def __init__(self, profile: str = "default"):
        if profile not in HASHING_PROFILES:
            raise ValueError(f"unknown password hashing profile {profile!r}")
        self.profile = profile
        self._argon = argon2.PasswordHasher.from_parameters(HASHING_PROFILES[profile])

    @functools.cached_property
    def _dummy_hash(self) -> str:
        # Verified against when the email is unknown, so both failures take the same time.
        return self._argon.hash("not-a-real-password")

    def hash(self, password: str) -> str:
        return self._argon.hash(password)

    def verify(self, password_hash: str | None, password: str) -> bool:
        """Whether ``password`` matches; a None hash (no such user) or ``NO_PASSWORD``
        costs as much as a real one and matches nothing, not even the dummy's password."""
        try:
            self._argon.verify(password_hash or self._dummy_hash, password)
        except (VerificationError, InvalidHashError):
            return False
        return bool(password_hash)

    def needs_rehash(self, password_hash: str) -> bool:
        return self._argon.check_needs_rehash(password_hash)


def has_password(user: User) -> bool:
    """Whether the owner of ``user`` has chosen a password (a guest checkout's account
    has none until its receipt's link, or a reset link, sets one)."""
    return user.password_hash != NO_PASSWORD


class EmailTaken(Exception):
    pass


def normalise_email(email: str) -> str:
    return email.strip().lower()


def find_user(session: Session, email: str) -> User | None:
    return session.scalar(select(User).where(User.email == normalise_email(email)))


def create_user(
    session: Session,
    hasher: PasswordHasher,
    email: str,
    password: str,
    name: str = "",
    role: str = "customer",
    verified: bool = True,
) -> User:
    """Add a user; raise EmailTaken if the (case-insensitive) email exists.

    Accounts made by the operator (CLI, demo data, tests) are ``verified``; a
    self-registration passes False and the owner verifies by the link mailed to them."""
    email = normalise_email(email)
    # Hash first: a taken email then costs as much as a new one, so registration's timing
    # does not tell which emails have accounts.
    password_hash = hasher.hash(password)
    if find_user(session, email) is not None:
        raise EmailTaken(email)
    user = User(
        email=email,
        name=name or email.split("@")[0],
        password_hash=password_hash,
        role=role,
        email_verified_at=utcnow() if verified else None,
    )
    session.add(user)
    session.flush()
    return user


def authenticate(
    session: Session, hasher: PasswordHasher, email: str, password: str
) -> User | None:
    """The user if the password matches, else None (same cost for an unknown email)."""
    user = find_user(session, email)
    if not hasher.verify(user.password_hash if user else None, password) or user is None:
        return None
    if hasher.needs_rehash(user.password_hash):
        user.password_hash = hasher.hash(password)
    return user


def includeme(config) -> None:
    """Register the app's PasswordHasher, built from ``cmsshop.password_hashing``."""
    hasher = PasswordHasher(config.get_settings()["cmsshop.password_hashing"])
    config.register_service(hasher, PasswordHasher)
