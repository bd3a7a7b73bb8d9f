"""Writing and reading audit entries (models.AuditEntry).

An entry is added to the caller's session, so it commits or rolls back with the change
it describes: a refused or failed change leaves no entry, and no change goes unrecorded.
Summaries are short and never hold a secret (a password, a token, a key): callers pass
what changed in words or values safe to show to the admins and the account's owner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import AuditEntry, User
from cmsshop.services.audit import capture


def actor_label(user: User | None, fallback: str = "system") -> str:
    """How an entry names who acted: ``user:<id>``, or ``fallback`` (``cli``, ``system``)."""
    return f"user:{user.id}" if user is not None else fallback


def record_change(
    session: Session,
    *,
    action: str,
    object_type: str,
    object_id: int | str,
    actor: User | None = None,
    actor_name: str | None = None,
    summary: Mapping[str, Any] | None = None,
    ip: str | None = None,
) -> AuditEntry:
    """Add one entry to ``session`` (committed with the change it records)."""
    entry = AuditEntry(
        actor_id=actor.id if actor is not None else None,
        actor=actor_name or actor_label(actor),
        action=action,
        object_type=object_type,
        object_id=str(object_id),
        summary=dict(summary or {}),
        ip=ip,
    )
    if capture.current_context(session) is not None:
        capture.fill_from_context(session, entry)
    elif actor is not None and object_type == "user" and str(object_id) == str(actor.id):
        entry.channel = "account"  # a customer's (or an admin's) change to their own account
    session.add(entry)
    return entry


def entries_for(session: Session, object_type: str, object_id: int | str, limit: int = 100):
    """The newest ``limit`` entries about one object, newest first."""
    return session.scalars(
        select(AuditEntry)
        .where(AuditEntry.object_type == object_type, AuditEntry.object_id == str(object_id))
        .order_by(AuditEntry.id.desc())
        .limit(limit)
    ).all()
