"""Links mailed to a user: password reset, email verification, and the first password
of an account made by a guest checkout.

A link carries a random token (256 bits); the database keeps only its SHA-256
(``account_tokens.token_hash``), so a leaked database or backup opens no account. A
token is used once: ``consume_token`` marks it with one conditional UPDATE (``WHERE
used_at IS NULL AND expires_at > now``) and checks the row count, so two requests
racing with the same link (a double click, a mail scanner and the user) succeed once.

- ``request_password_reset`` answers the same for every email (the caller cannot tell
  who has an account) and is rate limited per email and per IP; when limited it queues
  nothing and logs it, and the caller still answers as usual. It does the same work for
  every address, known or not (so its timing tells nothing either): it queues a reset
  message to the address as typed, without looking the account up.
- ``issue_mailed_token`` is called by the mail sender as it sends a reset or
  verification message: it finds the account (none: the message is dropped), issues the
  token and hands it to the sender, which puts it only into the message that leaves. The
  outbox row keeps the link masked (``TOKEN_PLACEHOLDER``): the raw token is never
  stored, not even encrypted, and each attempt (a retry, an admin's resend) mails a
  fresh link.
- ``reset_password`` sets the new password, marks the email verified (the link proved
  the mailbox) and deletes every login session of the user: all devices are logged out.
- ``verify_email`` marks the email verified; the caller then starts a session.
- The receipt of an order whose account has no password yet (a guest checkout's) is
  queued as kind ``receipt_set_password`` with a masked link to ``/set-password``: the
  sender issues a password-reset token for it, valid ``cmsshop.guest_link_ttl`` (longer
  than a reset link: a receipt is read later than a reset asked for just now).
  ``set_first_password`` sets the password only while the account has none (then it is
  an ordinary reset; once a password is set, by this link or a reset, every such link
  stops working) and confirms the address; the caller logs the buyer in.

Messages go through the outbox (``services.mail.outbox.enqueue``) in the caller's
transaction, so a message is mailed exactly when its cause committed.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import secrets
import uuid
from urllib.parse import urlencode

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from cmsshop.db import take_write_lock
from cmsshop.errors import ApiError
from cmsshop.models import AccountToken, OutboxMessage, User, UserSession
from cmsshop.services.accounts.users import (
    PasswordHasher,
    find_user,
    has_password,
    normalise_email,
)
from cmsshop.services.mail.outbox import TOKEN_PLACEHOLDER, enqueue
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.util import utcnow

log = logging.getLogger(__name__)

PASSWORD_RESET = "password_reset"
VERIFY_EMAIL = "verify_email"
CHANGE_EMAIL = "change_email"
RESET_EMAIL_POLICY = "password_reset.email"
RESET_IP_POLICY = "password_reset.ip"
# token_urlsafe(32) gives 43 characters; anything far from that is not one of ours.
TOKEN_MIN_LENGTH, TOKEN_MAX_LENGTH = 20, 128
TOKEN_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
# The receipt of an order whose account has no password: it carries a set-password link.
RECEIPT_SET_PASSWORD = "receipt_set_password"
# The outbox kinds whose link the sender issues a token for, and the token's purpose.
# The set-password link is a reset link (it grants no more: choosing the password of an
# account that has none), with the lifetime of its own setting (MAILED_TOKEN_LIFETIMES).
MAILED_TOKEN_PURPOSES = {
    "password_reset": PASSWORD_RESET,
    "verify_email": VERIFY_EMAIL,
    RECEIPT_SET_PASSWORD: PASSWORD_RESET,
    # Mailed to the new address an owner asked to move to (services.accounts.profile):
    # its token remembers that address, so the link moves the account there and nowhere
    # else; it lives as long as a verification link, since it proves the same thing.
    "email_change": CHANGE_EMAIL,
}
MAILED_TOKEN_LIFETIMES = {
    "password_reset": "cmsshop.password_reset_ttl",
    "verify_email": "cmsshop.verify_email_ttl",
    RECEIPT_SET_PASSWORD: "cmsshop.guest_link_ttl",
    "email_change": "cmsshop.verify_email_ttl",
}


class InvalidToken(ApiError):
    code = "invalid_token"
    message = "This link is not valid."
    hints = (
        "Copy the whole link from the email.",
        "Ask for a new one: POST /api/auth/password-reset (the /forgot-password page).",
    )


class TokenExpired(ApiError):
    code = "token_expired"
    message = "This link has expired."
    hints = ("Ask for a new one: POST /api/auth/password-reset (the /forgot-password page).",)


class TokenUsed(ApiError):
    code = "token_used"
    message = "This link has been used already."
    hints = ("Log in with your password, or ask for a new link: POST /api/auth/password-reset.",)


def rate_policies(settings) -> list[tuple[str, int, int]]:
    """(name, limit, window) of the password-reset request policies."""
    window = settings["cmsshop.password_reset_window"]
    return [
        (RESET_EMAIL_POLICY, settings["cmsshop.password_reset_max_per_email"], window),
        (RESET_IP_POLICY, settings["cmsshop.password_reset_max_per_ip"], window),
    ]


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _lifetime(settings, purpose: str) -> int:
    if purpose == PASSWORD_RESET:
        return settings["cmsshop.password_reset_ttl"]
    return settings["cmsshop.verify_email_ttl"]


def issue_token(
    session: Session,
    settings,
    user: User,
    purpose: str,
    lifetime: int | None = None,
    new_email: str | None = None,
) -> tuple[AccountToken, str]:
    """A new token for ``user``: the row (holding only the hash) and the raw token, which
    goes into the mailed link and nowhere else. ``lifetime`` (seconds): the purpose's
    setting unless given; ``new_email``: the address a change_email token moves to."""
    token = secrets.token_urlsafe(32)
    now = utcnow()
    if lifetime is None:
        lifetime = _lifetime(settings, purpose)
    row = AccountToken(
        user_id=user.id,
        purpose=purpose,
        token_hash=hash_token(token),
        new_email=new_email,
        created_at=now,
        expires_at=now + dt.timedelta(seconds=lifetime),
    )
    session.add(row)
    session.flush()
    return row, token


def find_token(session: Session, purpose: str, token: object) -> AccountToken:
    """The live token row (not consumed); 400 ``invalid_token``, 410 ``token_expired``
    or ``token_used``. For showing a form before the link is used (a GET must not use
    it up: mail scanners open links)."""
    if (
        not isinstance(token, str)
        or not TOKEN_MIN_LENGTH <= len(token) <= TOKEN_MAX_LENGTH
        or not TOKEN_ALPHABET.issuperset(token)
    ):
        raise InvalidToken()
    row = session.scalar(
        select(AccountToken).where(
            AccountToken.token_hash == hash_token(token), AccountToken.purpose == purpose
        )
    )
    if row is None:
        raise InvalidToken()
    if row.used_at is not None:
        raise TokenUsed()
    if row.expires_at <= utcnow():
        raise TokenExpired()
    return row


def consume_token(session: Session, purpose: str, token: object) -> User:
    """Use the token once and return its user; the errors of :func:`find_token`, and
    ``token_used`` for the loser of two concurrent uses."""
    take_write_lock(session)  # SQLite: what is read next is current, writers queue
    row = find_token(session, purpose, token)
    now = utcnow()
    # The row count decides: on PostgreSQL a concurrent UPDATE waits for the first one's
    # commit and then finds used_at set; on SQLite the write lock serialises them.
    result = session.execute(
        update(AccountToken)
        .where(
            AccountToken.id == row.id,
            AccountToken.used_at.is_(None),
            AccountToken.expires_at > now,
        )
        .values(used_at=now)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        raise TokenUsed()
    user = session.get(User, row.user_id)
    if user is None:  # the account was deleted (its tokens cascade; a race at most)
        raise InvalidToken()
    return user


def page_link(settings, path: str, **params: str) -> str:
    return f"{settings['cmsshop.base_url'].rstrip('/')}{path}?{urlencode(params)}"


def order_link(settings, order_path: str, *, set_password: bool) -> str:
    """The receipt's link to the order at ``order_path`` (a local path): for an account
    without a password, the masked set-password link (the sender issues its token);
    otherwise the login page, leading on to the order."""
    base_url = settings["cmsshop.base_url"].rstrip("/")
    # "/" kept readable in the plain-text mail; the pages' safe_next checks it anyway.
    if set_password:
        query = urlencode({"token": TOKEN_PLACEHOLDER, "next": order_path}, safe="/")
        return f"{base_url}/set-password?{query}"
    return f"{base_url}/login?{urlencode({'next': order_path}, safe='/')}"


def guest_link_lifetime(settings) -> str:
    """How long a receipt's set-password link works, in words for the mail."""
    return duration_in_words(settings["cmsshop.guest_link_ttl"])


def duration_in_words(seconds: int) -> str:
    """A lifetime in words for the mail: "7 days", "1 hour", "10 minutes"."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = round(seconds / size)
            return f"{count} {unit}" if count == 1 else f"{count} {unit}s"
    return f"{seconds} seconds"


def send_verification(session: Session, settings, user: User, next_path: str = "") -> None:
    """Queue the verification mail with its link masked (the sender issues the token;
    ``next_path``, a local path checked by the caller, is where the link leads once
    verified)."""
    params = {"token": TOKEN_PLACEHOLDER, **({"next": next_path} if next_path else {})}
    enqueue(
        session,
        settings,
        kind="verify_email",
        to=user.email,
        subject="Confirm your email address",
        template="verify_email",
        context={
            "name": user.name,
            "link": page_link(settings, "/verify-email", **params),
            "valid_for": duration_in_words(settings["cmsshop.verify_email_ttl"]),
        },
        dedupe_key=f"verify-email:{user.id}",
        user_id=user.id,
    )


def send_account_exists(session: Session, settings, user: User) -> None:
    """Tell the owner of a taken email that someone tried to register with it: at most
    one such mail a day (a flood of registrations sends one). An account a guest
    checkout made has no password yet: the mail says so and points to the password
    reset, which sets the first one (registering never does: whoever typed the address
    may not own it). A deleted account is told nothing: its address is a placeholder
    that receives no mail (services.accounts.erasure)."""
    if user.deleted_at is not None:
        return
    enqueue(
        session,
        settings,
        kind="account_exists",
        to=user.email,
        subject="You already have an account",
        template="account_exists",
        context={"name": user.name, "has_password": has_password(user)},
        dedupe_key=f"account-exists:{user.id}:{utcnow().date().isoformat()}",
        user_id=user.id,
    )


def request_password_reset(
    session: Session, settings, limiter: RateLimiter, email: str, client_ip: str
) -> None:
    """Mail a reset link if ``email`` has an account; nothing tells the caller whether
    it has. Past the rate limits nothing is queued (logged, never said)."""
    email = normalise_email(email)
    refusal = limiter.count([(RESET_EMAIL_POLICY, email), (RESET_IP_POLICY, client_ip)])
    if refusal is not None:
        log.warning(
            "password reset request not sent: rate limited (ip %s, %d of %d)",
            client_ip,
            refusal.count,
            refusal.limit,
        )
        return
    take_write_lock(session)  # the message is the request's first write (see log_in)
    # The same work for every address: no account lookup here (the sender does it), one
    # message rendered and queued, so neither the answer nor its timing tells.
    enqueue(
        session,
        settings,
        kind="password_reset",
        to=email,
        subject="Reset your password",
        template="password_reset",
        context={
            "link": page_link(settings, "/reset-password", token=TOKEN_PLACEHOLDER),
            "valid_for": duration_in_words(settings["cmsshop.password_reset_ttl"]),
        },
        dedupe_key=f"password-reset:{uuid.uuid4().hex}",
    )


def issue_mailed_token(session: Session, settings, message: OutboxMessage) -> str | None:
    """The token for the masked link of ``message`` (a kind of
    ``MAILED_TOKEN_PURPOSES``), issued in the sender's transaction; None when the
    message is to be dropped: a reset asked for an address without an account, or an
    account deleted since. Its row holds only the token's hash, like any token's."""
    purpose = MAILED_TOKEN_PURPOSES[message.kind]
    if message.user_id is not None:
        user = session.get(User, message.user_id)
    else:
        user = find_user(session, message.to_address)
    # A deleted account gets no link of any kind (services.accounts.erasure).
    if user is None or user.deleted_at is not None:
        return None
    message.user_id = user.id
    lifetime = settings[MAILED_TOKEN_LIFETIMES[message.kind]]
    # An e-mail change's link goes to the new address: the message's recipient.
    new_email = message.to_address if purpose == CHANGE_EMAIL else None
    _, token = issue_token(session, settings, user, purpose, lifetime, new_email)
    return token


def reset_password(session: Session, hasher: PasswordHasher, token: object, password: str) -> User:
    """Set a new password with a reset link; every session of the user ends."""
    password_hash = hasher.hash(password)  # before the write lock: it takes a while
    user = consume_token(session, PASSWORD_RESET, token)
    _set_password(session, user, password_hash)
    return user


def find_set_password_token(session: Session, token: object) -> User:
    """The account whose first password the link of a receipt sets (a look, not a use:
    for showing the form); the errors of :func:`find_token`, and ``token_used`` once
    the account has a password (set by this link or another, or by a reset)."""
    row = find_token(session, PASSWORD_RESET, token)
    user = session.get(User, row.user_id)
    if user is None:
        raise InvalidToken()
    if has_password(user):
        raise TokenUsed()
    return user


def set_first_password(
    session: Session, hasher: PasswordHasher, token: object, password: str
) -> User:
    """Set the first password of an account made by a guest checkout, with the link of
    its receipt; confirms the address (the link reached the mailbox). ``token_used``
    if the account has a password by now: then the link is spent, and the owner logs in
    (or asks for a reset). The caller logs the user in."""
    password_hash = hasher.hash(password)  # before the write lock: it takes a while
    take_write_lock(session)
    find_set_password_token(session, token)  # refused before the token is spent
    user = consume_token(session, PASSWORD_RESET, token)
    _set_password(session, user, password_hash)
    return user


def _set_password(session: Session, user: User, password_hash: str) -> None:
    """Store ``password_hash``, confirm the address, end every session of ``user`` and
    void their other reset and set-password links."""
    now = utcnow()
    user.password_hash = password_hash
    if user.email_verified_at is None:
        user.email_verified_at = now  # the link reached the mailbox: that is the proof
    session.execute(
        delete(UserSession)
        .where(UserSession.user_id == user.id)
        .execution_options(synchronize_session=False)
    )
    # Other reset links mailed before stop working too.
    void_unused_tokens(session, user.id, PASSWORD_RESET)
    session.flush()


def void_unused_tokens(session: Session, user_id: int, purpose: str) -> None:
    """Every ``purpose`` link mailed to ``user_id`` and not opened yet stops working."""
    session.execute(
        update(AccountToken)
        .where(
            AccountToken.user_id == user_id,
            AccountToken.purpose == purpose,
            AccountToken.used_at.is_(None),
        )
        .values(used_at=utcnow())
        .execution_options(synchronize_session=False)
    )


def verify_email(session: Session, token: object) -> User:
    """Mark the email of the link's user verified; the caller logs the user in."""
    user = consume_token(session, VERIFY_EMAIL, token)
    if user.email_verified_at is None:
        user.email_verified_at = utcnow()
    session.flush()
    return user
