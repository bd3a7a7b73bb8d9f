"""Scoped API tokens: how the seller's other systems call the admin JSON API without a
browser session (services/apitokens)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import JSON, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from cmsshop.models.accounts import User
from cmsshop.models.meta import Base, UTCDateTime
from cmsshop.util import utcnow

# What a token may do (services/apitokens/scopes.py says which routes each covers).
API_TOKEN_SCOPES = ("read", "catalogue", "orders", "licenses", "settings", "all")


class ApiToken(Base):
    """One token: only its SHA-256 is stored (the token is 256 random bits, shown once).
    It acts as the admin who created it, and only while that user is still an admin."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    # The first characters of the token ("cms_AbC1..."), so a seller can tell tokens
    # apart in the console and in a leaked-credential report; never enough to use it.
    prefix: Mapped[str] = mapped_column(String(16))
    scopes: Mapped[list] = mapped_column(JSON, default=list)
    created_by_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    last_used_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    last_used_ip: Mapped[str | None] = mapped_column(String(64))
    revoked_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)

    created_by: Mapped[User] = relationship(lazy="joined")

    @property
    def label(self) -> str:
        """How the audit log names the token: ``token:<id>``."""
        return f"token:{self.id}"
