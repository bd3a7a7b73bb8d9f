"""Creating, finding and revoking API tokens (models.ApiToken).

A token is ``cms_`` and 43 URL-safe characters (256 random bits): too long to guess, so
a plain SHA-256 is stored and looked up (as GitHub and PyPI do), not a slow password hash.
It is shown once, when made. A token works while it is neither revoked nor expired and
its creator is still an admin with an account.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import ApiToken, User
from cmsshop.util import utcnow

TOKEN_PREFIX = "cms_"
# How many characters of the token the console shows ("cms_AbC1"): enough to tell
# tokens apart, far too few to use one.
SHOWN_PREFIX = 8
# last_used_at and last_used_ip are written at most once a minute per token (unless the
# address changes): a busy integration does not rewrite its token row on every call.
LAST_USED_EVERY = dt.timedelta(seconds=60)
# Every token's calls are counted under this policy, per token, per minute (the limit is
# the setting cmsshop.api_tokens.rate_limit; modules/apitokens declares the policy).
RATE_POLICY = "api_tokens.token"
RATE_WINDOW = 60


def hash_api_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(
    session: Session,
    *,
    name: str,
    scopes: list[str],
    created_by: User,
    expires_at: dt.datetime | None = None,
) -> tuple[ApiToken, str]:
    """A new token and its value (shown once; only its hash is kept)."""
    value = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken(
        name=name,
        token_hash=hash_api_token(value),
        prefix=value[:SHOWN_PREFIX],
        scopes=sorted(set(scopes)),
        created_by_id=created_by.id,
        expires_at=expires_at,
    )
    token.created_by = created_by
    session.add(token)
    session.flush()
    return token, value


def usable(token: ApiToken, now: dt.datetime) -> bool:
    owner = token.created_by
    return (
        token.revoked_at is None
        and (token.expires_at is None or token.expires_at > now)
        and owner.is_admin
        and owner.deleted_at is None
    )


def looks_like_token(value: str) -> bool:
    """Whether ``value`` has a token's shape (nothing else is looked up or counted)."""
    return value.startswith(TOKEN_PREFIX) and 20 <= len(value) <= 100 and value.isascii()


def rate_subject(value: str) -> str:
    """What a token's calls are counted under: its hash (the same for every call with
    it, known before the database is read, and no use to anyone who reads the table)."""
    return hash_api_token(value)


def find_usable_token(session: Session, value: str) -> ApiToken | None:
    """The live token whose value is ``value``, or None (unknown, revoked, expired, or its
    creator is no longer an admin)."""
    if not looks_like_token(value):
        return None
    token = session.scalar(select(ApiToken).where(ApiToken.token_hash == hash_api_token(value)))
    if token is None or not usable(token, utcnow()):
        return None
    return token


def note_use(token: ApiToken, ip: str | None, now: dt.datetime | None = None) -> None:
    """Keep when and from where the token was last used (at most once a minute)."""
    now = now or utcnow()
    if (
        token.last_used_at is None
        or now - token.last_used_at >= LAST_USED_EVERY
        or token.last_used_ip != ip
    ):
        token.last_used_at = now
        token.last_used_ip = ip


def revoke_token(token: ApiToken, now: dt.datetime | None = None) -> bool:
    """Revoke ``token``; False if it already was."""
    if token.revoked_at is not None:
        return False
    token.revoked_at = now or utcnow()
    return True


def list_tokens(session: Session) -> list[ApiToken]:
    """Every token, newest first (revoked and expired ones too: the console shows them)."""
    return list(session.scalars(select(ApiToken).order_by(ApiToken.id.desc())))


def find_token(session: Session, token_id: int | None) -> ApiToken | None:
    return session.get(ApiToken, token_id) if token_id is not None else None


def token_status(token: ApiToken, now: dt.datetime | None = None) -> str:
    """``active``, ``revoked``, ``expired`` or ``suspended`` (its creator is no longer
    an admin), as the console and the admin API show it."""
    now = now or utcnow()
    if token.revoked_at is not None:
        return "revoked"
    if token.expires_at is not None and token.expires_at <= now:
        return "expired"
    if not usable(token, now):
        return "suspended"
    return "active"
