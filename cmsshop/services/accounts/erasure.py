"""Deleting an account at its owner's request: personal data erased, the records the
law requires kept.

Asked with the current password and a typed confirmation (``DELETE``), so neither a
stolen session nor a slip of the mouse deletes an account. In one transaction:

- erased: the name (``Deleted account``), the address (``deleted-<id>@invalid``, a
  reserved domain that receives no mail, which frees the real address for a new
  account), the password (none matches it: login is impossible, and no mailed link of
  any kind is issued for a deleted account, services.accounts.tokens), every login
  session and mailed token, the saved billing details, the cart, the messages queued
  or kept for the account in the outbox, the support tickets with their conversations
  (the owner's own words, and replies written to them; nothing the shop must keep), the
  IP address and browser of each download, and the summaries and addresses of the
  account's own audit entries (they hold old e-mail addresses; the action and its time
  stay);
- kept unchanged: orders, invoices and credit notes (legal documents with the buyer's
  billing snapshot, kept for the period tax law sets), refunds and payment records;
- licenses keep working: they were paid for and run on the buyer's sites, which
  deleting the shop account should not break; their activations stay for the same
  reason. Downloads need a login, so they end with the account.

The deletion itself is an audit entry (without personal data) on ``("user", id)``.
"""

from __future__ import annotations

from sqlalchemy import delete, or_, select, update
from sqlalchemy.orm import Session

from cmsshop.db import take_write_lock
from cmsshop.errors import Forbidden, ValidationFailed
from cmsshop.models import (
    AccountToken,
    AuditEntry,
    BillingProfile,
    Cart,
    DownloadLog,
    Entitlement,
    OutboxMessage,
    SupportTicket,
    User,
    UserSession,
)
from cmsshop.services.accounts.profile import check_password
from cmsshop.services.accounts.users import NO_PASSWORD, PasswordHasher
from cmsshop.services.audit.entries import record_change
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.util import utcnow

CONFIRMATION = "DELETE"
DELETED_NAME = "Deleted account"


def deleted_email(user_id: int) -> str:
    return f"deleted-{user_id}@invalid"


def delete_account(
    session: Session,
    hasher: PasswordHasher,
    limiter: RateLimiter,
    user: User,
    password: str,
    confirmation: str,
    ip: str | None,
) -> None:
    """Erase ``user``'s personal data (see the module's docstring); 422 on ``password``
    or ``confirmation``, 403 for an admin (the shop must keep someone who can run it:
    another admin removes the role first)."""
    if user.is_admin:
        raise Forbidden("An admin account cannot be deleted from its settings.")
    check_password(hasher, limiter, user, password, "password")
    if confirmation.strip() != CONFIRMATION:
        raise ValidationFailed({"confirmation": f"Type {CONFIRMATION} to confirm."})
    take_write_lock(session)
    old_email = user.email
    user_filter = {"synchronize_session": False}
    for model in (UserSession, AccountToken, BillingProfile, Cart):
        session.execute(
            delete(model).where(model.user_id == user.id).execution_options(**user_filter)
        )
    session.execute(
        delete(OutboxMessage)
        .where(or_(OutboxMessage.user_id == user.id, OutboxMessage.to_address == old_email))
        .execution_options(**user_filter)
    )
    for ticket in session.scalars(select(SupportTicket).where(SupportTicket.user_id == user.id)):
        session.delete(ticket)  # its messages go with it (the relationship's cascade)
    session.execute(
        update(DownloadLog)
        .where(
            DownloadLog.entitlement_id.in_(
                select(Entitlement.id).where(Entitlement.user_id == user.id)
            )
        )
        .values(ip="", user_agent=None)
        .execution_options(**user_filter)
    )
    session.execute(
        update(AuditEntry)
        .where(AuditEntry.object_type == "user", AuditEntry.object_id == str(user.id))
        .values(summary={}, ip=None)
        .execution_options(**user_filter)
    )
    user.name = DELETED_NAME
    user.email = deleted_email(user.id)
    user.password_hash = NO_PASSWORD
    user.email_verified_at = None
    user.deleted_at = utcnow()
    record_change(
        session,
        action="account.deleted",
        object_type="user",
        object_id=user.id,
        actor=user,
        summary={},
    )
    session.flush()
