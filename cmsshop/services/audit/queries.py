"""Reading the audit log: filtered and paged for the console and the admin API, whole
for the CSV export, and the entries about one licence or one order."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator

from sqlalchemy import Select, or_, select
from sqlalchemy.orm import Session

from cmsshop.models import Activation, ApiToken, AuditEntry, License, Order, OrderNote, Refund, User
from cmsshop.services.paging import Page, PageRequest, fetch_page

EXPORT_BATCH = 500


@dataclasses.dataclass(frozen=True)
class AuditFilters:
    """The list's filters; None is no filter. ``until`` is inclusive (a whole day)."""

    actor: str | None = None
    action: str | None = None
    object_type: str | None = None
    object_id: str | None = None
    since: dt.date | None = None
    until: dt.date | None = None


def _start_of(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time.min, tzinfo=dt.UTC)


def filtered(filters: AuditFilters) -> Select:
    query = select(AuditEntry)
    if filters.actor:
        query = query.where(AuditEntry.actor == filters.actor)
    if filters.action:
        query = query.where(AuditEntry.action == filters.action)
    if filters.object_type:
        query = query.where(AuditEntry.object_type == filters.object_type)
    if filters.object_id:
        query = query.where(AuditEntry.object_id == filters.object_id)
    if filters.since:
        query = query.where(AuditEntry.created_at >= _start_of(filters.since))
    if filters.until:
        query = query.where(AuditEntry.created_at < _start_of(filters.until + dt.timedelta(days=1)))
    return query.order_by(AuditEntry.id.desc())


def list_entries(session: Session, filters: AuditFilters, paging: PageRequest) -> Page:
    """One page of the entries matching ``filters``, newest first."""
    return fetch_page(session, filtered(filters), paging)


def export_batches(session: Session, filters: AuditFilters) -> Iterator[list[AuditEntry]]:
    """Every entry matching ``filters``, newest first, in batches (keyset by id)."""
    query = filtered(filters)
    last_id = None
    while True:
        batch_query = query if last_id is None else query.where(AuditEntry.id < last_id)
        batch = list(session.scalars(batch_query.limit(EXPORT_BATCH)))
        if batch:
            yield batch
        if len(batch) < EXPORT_BATCH:
            return
        last_id = batch[-1].id


def _about(session: Session, pairs: list[tuple[str, list[str]]], limit: int) -> list[AuditEntry]:
    conditions = [
        (AuditEntry.object_type == kind) & AuditEntry.object_id.in_(ids)
        for kind, ids in pairs
        if ids
    ]
    if not conditions:
        return []
    return list(
        session.scalars(
            select(AuditEntry).where(or_(*conditions)).order_by(AuditEntry.id.desc()).limit(limit)
        )
    )


def license_entries(session: Session, license: License, limit: int = 100) -> list[AuditEntry]:
    """The entries about a licence and its activations, newest first."""
    activation_ids = session.scalars(
        select(Activation.id).where(Activation.license_id == license.id)
    ).all()
    return _about(
        session,
        [("license", [license.key]), ("activation", [str(i) for i in activation_ids])],
        limit,
    )


def order_entries(session: Session, order: Order, limit: int = 100) -> list[AuditEntry]:
    """The entries about an order, its notes and its refunds, newest first."""
    note_ids = session.scalars(select(OrderNote.id).where(OrderNote.order_id == order.id)).all()
    refund_ids = session.scalars(select(Refund.id).where(Refund.order_id == order.id)).all()
    return _about(
        session,
        [
            ("order", [order.number]),
            ("order_note", [str(i) for i in note_ids]),
            ("refund", [str(i) for i in refund_ids]),
        ],
        limit,
    )


@dataclasses.dataclass(frozen=True)
class Actor:
    """Who an entry names, as the console shows it."""

    label: str
    user: User | None
    token: ApiToken | None


def actors_of(session: Session, entries) -> dict[int, Actor]:
    """entry id -> its actor, users and tokens loaded in two queries."""
    user_ids = {e.actor_id for e in entries if e.actor_id is not None}
    token_ids = {e.actor_token_id for e in entries if e.actor_token_id is not None}
    users = (
        {u.id: u for u in session.scalars(select(User).where(User.id.in_(user_ids)))}
        if user_ids
        else {}
    )
    tokens = (
        {t.id: t for t in session.scalars(select(ApiToken).where(ApiToken.id.in_(token_ids)))}
        if token_ids
        else {}
    )
    return {
        e.id: Actor(e.actor, users.get(e.actor_id), tokens.get(e.actor_token_id)) for e in entries
    }
