"""Users and their server-side login sessions."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import CheckConstraint, ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from cmsshop.models.meta import Base, UTCDateTime
from cmsshop.util import utcnow

ROLES = ("customer", "admin")


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

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


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
