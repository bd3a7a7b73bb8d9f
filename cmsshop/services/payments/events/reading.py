"""Reading the event log (admin): a page of rows, one row, its stored headers."""

from __future__ import annotations

import json

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import PaymentEvent
from cmsshop.services.paging import Page, PageRequest, fetch_page


def list_events(
    session: Session,
    paging: PageRequest,
    *,
    provider: str | None = None,
    status: str | None = None,
    order_number: str | None = None,
) -> Page:
    """A page of event rows, newest first, filtered by provider, status and order."""
    query = select(PaymentEvent)
    if provider:
        query = query.where(PaymentEvent.provider == provider)
    if status:
        query = query.where(PaymentEvent.status == status)
    if order_number:
        query = query.where(PaymentEvent.order_number == order_number)
    query = query.order_by(PaymentEvent.received_at.desc(), PaymentEvent.id.desc())
    return fetch_page(session, query, paging)


def find_event(session: Session, row_id: int) -> PaymentEvent | None:
    return session.get(PaymentEvent, row_id)


def stored_headers(row: PaymentEvent) -> dict[str, str]:
    """The headers kept with an event (an empty dict when none or unreadable)."""
    try:
        headers = json.loads(row.headers) if row.headers else {}
    except ValueError:
        return {}
    return headers if isinstance(headers, dict) else {}
