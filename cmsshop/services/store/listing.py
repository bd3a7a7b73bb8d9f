"""The one searchable listing of the catalogue and docs (products, articles; public and
admin): one statement counts, one fetches the page, both built once per shape.

Lists read plain rows of the columns they show rather than ORM objects: a row has no
relationship to lazy-load (so no accidental N+1), and it costs a fraction of an ORM
instance to build. Building a SQLAlchemy statement costs more than running these small
indexed queries, so callers cache what :func:`listing_statements` returns per shape
(public or not, searched or not, ...) and run it with parameters.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, bindparam, func, or_, select
from sqlalchemy.orm import Session

from cmsshop.services.paging import Page, PageRequest, fetch_page
from cmsshop.services.store.text import like_pattern


@dataclasses.dataclass(frozen=True)
class ListingStatements:
    count: Select
    page: Select


def listing_statements(
    model: Any,
    columns: Sequence,
    *,
    order: Sequence,
    filters: Sequence = (),
    search_in: Sequence = (),
) -> ListingStatements:
    """Count and page statements for the rows of ``model`` matching ``filters`` and, when
    ``search_in`` is given, a case-insensitive substring (parameter ``pattern``) of any of
    those columns; the page is ``columns`` in ``order`` (parameters ``limit``/``offset``)."""
    where = list(filters)
    if search_in:
        pattern = bindparam("pattern")
        where.append(or_(*(column.ilike(pattern, escape="/") for column in search_in)))
    count = select(func.count()).select_from(model).where(*where)
    page = (
        select(*columns)
        .where(*where)
        .order_by(*order)
        .limit(bindparam("limit"))
        .offset(bindparam("offset"))
    )
    return ListingStatements(count, page)


def fetch_listing(
    session: Session,
    statements: ListingStatements,
    request: PageRequest,
    *,
    q: str | None = None,
    **params: Any,
) -> Page:
    """One page of rows (and the total) of ``statements``; ``q`` is the search text of
    statements built with ``search_in``, ``params`` the values of their other filters."""
    values = {name: value for name, value in params.items() if value is not None}
    if q:
        values["pattern"] = like_pattern(q)
    return fetch_page(
        session,
        statements.page,
        request,
        count_query=statements.count,
        scalars=False,
        params=values,
        bound_window=True,
    )
