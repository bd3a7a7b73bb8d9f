"""Logging in and registering, with their rate policies.

One place for the rules, so the JSON API and the web pages answer alike:

- a login attempt is counted (reserved) *before* the password is checked, in one atomic
  statement every process shares, so N parallel guesses check at most the limit; a right
  password takes its attempt back;
- registration is limited per address and never logs in: a new email gets an unverified
  account and a verification link by mail, a taken email gets an "you already have an
  account" mail (at most one a day) and nothing else, and the caller answers both alike,
  so the answer does not tell who has an account;
- an unverified account cannot log in (403 ``email_not_verified``), said only after the
  password proved right, so it tells nothing to someone without the password.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from cmsshop.db import take_write_lock
from cmsshop.errors import ApiError, RateLimited
from cmsshop.models import User
from cmsshop.services.accounts import tokens
from cmsshop.services.accounts.users import (
    EmailTaken,
    PasswordHasher,
    authenticate,
    create_user,
    find_user,
    normalise_email,
)
from cmsshop.services.ratelimit import RateLimiter

LOGIN_EMAIL_POLICY = "login.email"
LOGIN_IP_POLICY = "login.ip"
REGISTER_IP_POLICY = "register.ip"


class InvalidCredentials(ApiError):
    code = "invalid_credentials"
    message = "The email or password is wrong."
    hints = ("Check both and try again.",)


class EmailNotVerified(ApiError):
    code = "email_not_verified"
    message = "Confirm your email address before logging in."
    hints = (
        "Open the link in the email we sent when you registered.",
        "No email? Ask for a password reset (POST /api/auth/password-reset, the "
        "/forgot-password page): its link confirms your address too.",
    )


def rate_policies(settings) -> list[tuple[str, int, int]]:
    """(name, limit, window) of the login and registration policies, from the settings."""
    limit, window = settings["cmsshop.login_max_failures"], settings["cmsshop.login_failure_window"]
    return [
        (LOGIN_EMAIL_POLICY, limit, window),
        # An address shared by many people (an office, a NAT) gets four times the allowance.
        (LOGIN_IP_POLICY, limit * 4, window),
        (
            REGISTER_IP_POLICY,
            settings["cmsshop.register_max_per_ip"],
            settings["cmsshop.register_window"],
        ),
    ]


def log_in(
    session: Session,
    hasher: PasswordHasher,
    limiter: RateLimiter,
    email: str,
    password: str,
    client_ip: str,
) -> User:
    """The user whose password this is; 429 past the failure limits, 401 otherwise, 403
    ``email_not_verified`` for the right password of an account not verified yet."""
    checks = [(LOGIN_EMAIL_POLICY, normalise_email(email)), (LOGIN_IP_POLICY, client_ip)]
    refusal = limiter.count(checks)
    if refusal is not None:
        raise RateLimited(refusal.retry_after, "Too many failed logins; wait before trying again.")
    user = authenticate(session, hasher, email, password)
    if user is None:
        raise InvalidCredentials()
    limiter.refund(checks)
    if not user.email_verified:
        raise EmailNotVerified()
    # The caller's session row is the request's first write: on SQLite, queue for the
    # write lock now (the counters above committed after the request's snapshot began).
    take_write_lock(session)
    return user


def register(
    session: Session,
    settings,
    hasher: PasswordHasher,
    limiter: RateLimiter,
    email: str,
    password: str,
    name: str,
    client_ip: str,
    next_path: str = "",
) -> User | None:
    """Register ``email``: a new, unverified user with a verification link mailed (leading
    on to ``next_path``), or None when the email is taken, its owner then mailed that
    someone tried. The caller answers both alike and logs nobody in; 429 past the
    per-address limit."""
    refusal = limiter.count([(REGISTER_IP_POLICY, client_ip)])
    if refusal is not None:
        raise RateLimited(refusal.retry_after, "Too many registrations; wait before trying again.")
    take_write_lock(session)  # the user row is the request's first write (see log_in)
    try:
        user = create_user(session, hasher, email, password, name, verified=False)
    except EmailTaken:
        existing = find_user(session, email)
        if existing is not None:
            tokens.send_account_exists(session, settings, existing)
        return None
    tokens.send_verification(session, settings, user, next_path)
    return user
