"""Users, their server-side login sessions and their one-time account tokens
(password reset, email verification)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import JSON, CheckConstraint, ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from cmsshop.models.meta import Base, UTCDateTime, one_of
from cmsshop.util import utcnow

ROLES = ("customer", "admin")
# What a token sent by e-mail proves: the right to choose a new password, that the
# address receives mail, or that a new address the owner asked for receives it (see
# services/accounts/tokens.py).
TOKEN_PURPOSES = ("password_reset", "verify_email", "change_email")


class User(Base):
    __tablename__ = "users"
    __table_args__ = (CheckConstraint("role IN ('customer', 'admin')", name="role"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    # Always stored lower-cased (services.accounts.normalise_email), so the unique
    # constraint is case-insensitive on every backend.
    email: Mapped[str] = mapped_column(String(320), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    password_hash: Mapped[str] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(20), default="customer")
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    # When the owner proved the address receives mail (a verification or reset link);
    # None: registered but not verified yet, and login is refused until it is.
    email_verified_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    # When the owner deleted the account: its personal data is erased, the row stays for
    # the orders and invoices the law requires to be kept (services/accounts/erasure.py).
    deleted_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def email_verified(self) -> bool:
        return self.email_verified_at is not None


class UserSession(Base):
    """A login session. The cookie holds a random token; only its SHA-256 is stored,
    so a database leak does not hand out live sessions. Deleting the row (logout)
    makes every copy of the cookie useless."""

    __tablename__ = "user_sessions"
    __table_args__ = (Index("ix_user_sessions_expires_at", "expires_at"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)

    user: Mapped[User] = relationship(lazy="joined")


class AccountToken(Base):
    """A single-use token mailed to a user. The link holds a random token; only its
    SHA-256 is stored (a database leak hands out no live links). ``used_at`` is set by
    one conditional UPDATE, so a link opened twice at once works once."""

    __tablename__ = "account_tokens"
    __table_args__ = (CheckConstraint(one_of("purpose", TOKEN_PURPOSES), name="purpose"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    purpose: Mapped[str] = mapped_column(String(20))
    # A change_email token: the address it moves the account to once its link is opened.
    new_email: Mapped[str | None] = mapped_column(String(320))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    used_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)


class AuditEntry(Base):
    """One change, recorded in the transaction that makes it: who (a user, or a label
    such as ``cli``), what action, on which object, a short before/after summary, from
    which address. Written once, never edited or deleted by the app. A customer's own
    changes to their account are entries on ``("user", id)``."""

    __tablename__ = "audit_entries"
    __table_args__ = (
        Index("ix_audit_entries_object", "object_type", "object_id", "id"),
        Index("ix_audit_entries_created_at", "created_at"),
        Index("ix_audit_entries_actor", "actor", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    actor_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    # Who, in words that outlive the user row: "user:42", "token:7", "cli", "system".
    actor: Mapped[str] = mapped_column(String(120))
    # The API token the change was made with (its owner is actor_id).
    actor_token_id: Mapped[int | None] = mapped_column(
        ForeignKey("api_tokens.id", ondelete="SET NULL")
    )
    # How: "console" (a page's form), "api" (the JSON API, session or token), "cli"
    # (cmsshop-admin), "account" (a customer's own change), "system".
    channel: Mapped[str | None] = mapped_column(String(16))
    # Which route or command made it: "PATCH /api/admin/products/{slug}".
    via: Mapped[str | None] = mapped_column(String(120))
    action: Mapped[str] = mapped_column(String(64))  # e.g. account.email_changed
    object_type: Mapped[str] = mapped_column(String(32))
    object_id: Mapped[str] = mapped_column(String(64))
    # {"before": {...}, "after": {...}} or any short summary; never a secret.
    summary: Mapped[dict] = mapped_column(JSON, default=dict)
    ip: Mapped[str | None] = mapped_column(String(64))
