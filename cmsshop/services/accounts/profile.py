"""The account owner's own changes: name, e-mail address and password.

One place for the rules, so the JSON API (``/api/account/...``) and the settings pages
answer alike:

- a change of e-mail address or password, and deleting the account
  (services.accounts.erasure), needs the current password; a wrong one is counted
  against the login policy of the account's address (services.accounts.login), so a
  stolen session cannot guess the password faster than the login form could;
- a new address is not taken at once: a link is mailed to it (the outbox, its token
  issued by the sender as for any mailed link, services.accounts.tokens) and the change
  applies only when that link is opened, so nobody moves an account to an address they
  cannot read. The address must not belong to another account (checked when asked and
  again when the link is opened); requests are limited per account and per IP with the
  limits of the password-reset links. Once applied, the old address is told;
- a new password ends every other session of the owner and voids their mailed
  password links; the session that changed it stays;
- every change is an audit entry on ``("user", id)`` in the same transaction
  (services.audit.entries), which the settings page lists and the export includes.
"""

from __future__ import annotations

import uuid

from sqlalchemy import delete
from sqlalchemy.orm import Session

from cmsshop.db import take_write_lock
from cmsshop.errors import RateLimited, ValidationFailed
from cmsshop.models import AccountToken, User, UserSession
from cmsshop.services.accounts import login, tokens
from cmsshop.services.accounts.users import PasswordHasher, find_user, normalise_email
from cmsshop.services.audit.entries import entries_for, record_change
from cmsshop.services.mail.outbox import TOKEN_PLACEHOLDER, enqueue
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.util import utcnow

EMAIL_CHANGE_USER_POLICY = "email_change.user"
EMAIL_CHANGE_IP_POLICY = "email_change.ip"
# The audit actions of an owner's own changes (shown in words on the settings page).
ACTIONS = {
    "account.name_changed": "Name changed",
    "account.email_change_requested": "E-mail change requested",
    "account.email_changed": "E-mail address changed",
    "account.password_changed": "Password changed",
    "account.deleted": "Account deleted",
}


def rate_policies(settings) -> list[tuple[str, int, int]]:
    """(name, limit, window) of the e-mail change policies: a mailed link, limited like
    the password-reset links (the same settings)."""
    window = settings["cmsshop.password_reset_window"]
    return [
        (EMAIL_CHANGE_USER_POLICY, settings["cmsshop.password_reset_max_per_email"], window),
        (EMAIL_CHANGE_IP_POLICY, settings["cmsshop.password_reset_max_per_ip"], window),
    ]


def check_password(
    hasher: PasswordHasher, limiter: RateLimiter, user: User, password: str, field: str
) -> None:
    """Refuse (422 on ``field``) a wrong current password; 429 past the login limits of
    the account's address, which a wrong one counts against."""
    checks = [(login.LOGIN_EMAIL_POLICY, user.email)]
    refusal = limiter.count(checks)
    if refusal is not None:
        raise RateLimited(
            refusal.retry_after, "Too many wrong passwords; wait before trying again."
        )
    if not hasher.verify(user.password_hash, password):
        raise ValidationFailed({field: "This is not your current password."})
    limiter.refund(checks)


def change_name(session: Session, user: User, name: str, ip: str | None) -> bool:
    """Set the display name; False (and no entry) when it is the same."""
    name = name.strip()
    if not name:
        raise ValidationFailed({"name": "Enter a name."})
    if name == user.name:
        return False
    take_write_lock(session)
    record_change(
        session,
        action="account.name_changed",
        object_type="user",
        object_id=user.id,
        actor=user,
        summary={"before": {"name": user.name}, "after": {"name": name}},
        ip=ip,
    )
    user.name = name
    session.flush()
    return True


def request_email_change(
    session: Session,
    settings,
    hasher: PasswordHasher,
    limiter: RateLimiter,
    user: User,
    new_email: str,
    password: str,
    ip: str,
) -> str:
    """Mail a confirmation link to ``new_email``; the account keeps its address until the
    link is opened (:func:`confirm_email_change`). Returns the normalised address."""
    new_email = normalise_email(new_email)
    check_password(hasher, limiter, user, password, "currentPassword")
    if new_email == user.email:
        raise ValidationFailed({"newEmail": "This is your current address already."})
    refusal = limiter.count(
        [(EMAIL_CHANGE_USER_POLICY, str(user.id)), (EMAIL_CHANGE_IP_POLICY, ip)]
    )
    if refusal is not None:
        raise RateLimited(
            refusal.retry_after, "Too many address changes asked for; wait before trying again."
        )
    if find_user(session, new_email) is not None:
        raise ValidationFailed({"newEmail": "Another account uses this address."})
    take_write_lock(session)
    enqueue(
        session,
        settings,
        kind="email_change",
        to=new_email,
        subject="Confirm your new email address",
        template="email_change",
        context={
            "name": user.name,
            "old_email": user.email,
            "link": tokens.page_link(
                settings, "/account/settings/email/confirm", token=TOKEN_PLACEHOLDER
            ),
            "valid_for": tokens.duration_in_words(settings["cmsshop.verify_email_ttl"]),
        },
        dedupe_key=f"email-change:{user.id}:{uuid.uuid4().hex}",
        user_id=user.id,
    )
    record_change(
        session,
        action="account.email_change_requested",
        object_type="user",
        object_id=user.id,
        actor=user,
        summary={"to": new_email},
        ip=ip,
    )
    session.flush()
    return new_email


def find_email_change(session: Session, token: object) -> AccountToken:
    """The live change_email token (a look, not a use: for showing the confirm button,
    as mail scanners open links); the errors of tokens.find_token."""
    return tokens.find_token(session, tokens.CHANGE_EMAIL, token)


def confirm_email_change(session: Session, settings, token: object, ip: str | None) -> User:
    """Move the link's account to the address the link was mailed to; the old address
    is told. Used once (``token_used`` after); 422 ``newEmail`` if another account took
    the address meanwhile (the link stays unused then, so nothing is lost)."""
    take_write_lock(session)
    row = find_email_change(session, token)
    owner = session.get(User, row.user_id)
    if owner is None or owner.deleted_at is not None or not row.new_email:
        raise tokens.InvalidToken()
    holder = find_user(session, row.new_email)
    if holder is not None and holder.id != owner.id:
        raise ValidationFailed({"newEmail": "Another account uses this address now."})
    user = tokens.consume_token(session, tokens.CHANGE_EMAIL, token)
    old_email = user.email
    if old_email == row.new_email:
        return user
    user.email = row.new_email
    # The new address just proved it receives mail.
    user.email_verified_at = user.email_verified_at or utcnow()
    # Other change links (to any address) stop working: one change per request.
    tokens.void_unused_tokens(session, user.id, tokens.CHANGE_EMAIL)
    record_change(
        session,
        action="account.email_changed",
        object_type="user",
        object_id=user.id,
        actor=user,
        summary={"before": {"email": old_email}, "after": {"email": user.email}},
        ip=ip,
    )
    enqueue(
        session,
        settings,
        kind="email_changed_notice",
        to=old_email,
        subject="Your email address was changed",
        template="email_changed_notice",
        context={"name": user.name, "old_email": old_email, "new_email": user.email},
        dedupe_key=f"email-changed:{user.id}:{row.id}",
        user_id=user.id,
    )
    session.flush()
    return user


def change_password(
    session: Session,
    hasher: PasswordHasher,
    limiter: RateLimiter,
    user: User,
    current_password: str,
    new_password: str,
    keep_session_id: str | None,
    ip: str | None,
) -> int:
    """Set a new password (the current one required); end every session of the owner but
    ``keep_session_id`` (the one that asked) and void their mailed password links.
    Returns how many sessions ended."""
    check_password(hasher, limiter, user, current_password, "currentPassword")
    if new_password == current_password:
        raise ValidationFailed({"newPassword": "Choose a password other than the current one."})
    password_hash = hasher.hash(new_password)
    take_write_lock(session)
    user.password_hash = password_hash
    others = delete(UserSession).where(UserSession.user_id == user.id)
    if keep_session_id is not None:
        others = others.where(UserSession.id != keep_session_id)
    ended = session.execute(others.execution_options(synchronize_session=False)).rowcount
    tokens.void_unused_tokens(session, user.id, tokens.PASSWORD_RESET)
    record_change(
        session,
        action="account.password_changed",
        object_type="user",
        object_id=user.id,
        actor=user,
        summary={"otherSessionsEnded": ended},
        ip=ip,
    )
    session.flush()
    return ended


def recent_activity(session: Session, user: User, limit: int = 20):
    """The newest audit entries on the owner's account, newest first."""
    return entries_for(session, "user", user.id, limit)


def describe(action: str) -> str:
    """An audit action in words for the owner."""
    return ACTIONS.get(action, action)
