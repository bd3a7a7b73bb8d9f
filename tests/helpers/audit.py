"""Reading the audit log in tests: the entries written since a mark, and the clients
that act as an admin through the JSON API (a login session or an API token)."""

from __future__ import annotations

from sqlalchemy import func, select

from cmsshop.models import AuditEntry
from cmsshop.services.apitokens.tokens import create_token


def last_entry_id(dbsession) -> int:
    dbsession.rollback()  # a fresh snapshot: the app committed in its own transactions
    return dbsession.scalar(select(func.max(AuditEntry.id))) or 0


def entries_since(dbsession, mark: int) -> list[AuditEntry]:
    dbsession.rollback()
    return list(
        dbsession.scalars(select(AuditEntry).where(AuditEntry.id > mark).order_by(AuditEntry.id))
    )


def all_entries(dbsession) -> list[AuditEntry]:
    return entries_since(dbsession, 0)


def token_for(dbsession, admin, scopes=("all",), name="automation"):
    """A new API token of ``admin``'s: (the row, its value)."""
    token, value = create_token(dbsession, name=name, scopes=list(scopes), created_by=admin)
    dbsession.commit()
    return token, value
