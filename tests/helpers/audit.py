"""Reading the audit log in tests: the entries written since a mark, and the clients
that act as an admin through the JSON API (a login session or an API token)."""

from __future__ import annotations

from sqlalchemy import func, select

from cmsshop.models import AuditEntry
from cmsshop.services.apitokens.tokens import create_token


def last_entry_id(dbsession) -> int:
    dbsession.rollback()  # a fresh snapshot: the app committed in its own transactions
    mark = dbsession.scalar(select(func.max(AuditEntry.id))) or 0
    dbsession.rollback()  # and no snapshot held (SQLite: the next write would conflict)
    return mark


def entries_since(dbsession, mark: int) -> list[AuditEntry]:
    """The entries written after ``mark``, oldest first (detached, fully loaded)."""
    dbsession.rollback()
    entries = list(
        dbsession.scalars(select(AuditEntry).where(AuditEntry.id > mark).order_by(AuditEntry.id))
    )
    for entry in entries:
        dbsession.expunge(entry)
    dbsession.rollback()
    return entries


def all_entries(dbsession) -> list[AuditEntry]:
    return entries_since(dbsession, 0)


def token_for(dbsession, admin, scopes=("all",), name="automation"):
    """A new API token of ``admin``'s: (the row, its value)."""
    token, value = create_token(dbsession, name=name, scopes=list(scopes), created_by=admin)
    dbsession.commit()
    return token, value
