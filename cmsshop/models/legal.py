"""The shop's legal pages (terms of sale, privacy policy, legal notice, refund policy),
each a series of versions: publishing a change adds a version and never edits an older
one, so an order can always show the exact terms its buyer accepted."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import CheckConstraint, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from cmsshop.models.meta import Base, UTCDateTime, one_of
from cmsshop.util import utcnow

# The pages a shop needs, by the slug of their URL (/legal/<kind>).
LEGAL_KINDS = ("terms", "privacy", "imprint", "refunds")


class LegalDocument(Base):
    __tablename__ = "legal_documents"
    __table_args__ = (
        UniqueConstraint("kind", "version"),
        CheckConstraint(one_of("kind", LEGAL_KINDS), name="kind"),
        CheckConstraint("version >= 1", name="version"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(20))
    version: Mapped[int] = mapped_column(Integer)
    title: Mapped[str] = mapped_column(String(200))
    # Markdown source and its rendered, sanitised HTML (services/docs/markdown.py).
    body: Mapped[str] = mapped_column(Text, default="")
    body_html: Mapped[str] = mapped_column(Text, default="")
    published_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    published_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
