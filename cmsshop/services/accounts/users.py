"""Users: creation, password hashing (argon2id) and credential checks."""

from __future__ import annotations

from argon2 import PasswordHasher, profiles
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import User

# argon2id with argon2-cffi's defaults (RFC 9106 low-memory profile). The "cheapest"
# profile exists for the test suite only; production refuses it (cmsshop.settings).
HASHING_PROFILES = {"default": profiles.RFC_9106_LOW_MEMORY, "cheapest": profiles.CHEAPEST}
_hasher = PasswordHasher.from_parameters(HASHING_PROFILES["default"])
# Verified against when the email is unknown, so both failures take the same time.
_DUMMY_HASH = _hasher.hash("not-a-real-password")


def configure_hasher(profile: str) -> None:
    """Select the argon2 cost profile for this process (``cmsshop.password_hashing``)."""
    global _hasher, _DUMMY_HASH
    if profile not in HASHING_PROFILES:
        raise ValueError(f"unknown password hashing profile {profile!r}")
    if _hasher.time_cost == HASHING_PROFILES[profile].time_cost and (
        _hasher.memory_cost == HASHING_PROFILES[profile].memory_cost
    ):
        return  # already in use: do not pay for another dummy hash
    _hasher = PasswordHasher.from_parameters(HASHING_PROFILES[profile])
    _DUMMY_HASH = _hasher.hash("not-a-real-password")


class EmailTaken(Exception):
    pass


def normalise_email(email: str) -> str:
    return email.strip().lower()


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def find_user(session: Session, email: str) -> User | None:
    return session.scalar(select(User).where(User.email == normalise_email(email)))


def create_user(
    session: Session, email: str, password: str, name: str = "", role: str = "customer"
) -> User:
    """Add a user; raise EmailTaken if the (case-insensitive) email exists."""
    email = normalise_email(email)
    if find_user(session, email) is not None:
        raise EmailTaken(email)
    user = User(
        email=email,
        name=name or email.split("@")[0],
        password_hash=hash_password(password),
        role=role,
    )
    session.add(user)
    session.flush()
    return user


def authenticate(session: Session, email: str, password: str) -> User | None:
    """The user if the password matches, else None (same cost for an unknown email)."""
    user = find_user(session, email)
    try:
        _hasher.verify(user.password_hash if user else _DUMMY_HASH, password)
    except (VerificationError, InvalidHashError):
        return None
    if user is None:
        return None
    if _hasher.check_needs_rehash(user.password_hash):
        user.password_hash = hash_password(password)
    return user
