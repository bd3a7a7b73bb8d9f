"""The one paging helper: every list route pages through :func:`fetch_page`.

A page past the end is answered without asking the database for it, so a huge
``page`` number never reaches it as an out-of-range OFFSET (PostgreSQL refuses an
OFFSET beyond 64 bits with an error).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

T = TypeVar("T")

DEFAULT_PER_PAGE = 20
MAX_PER_PAGE = 100


@dataclasses.dataclass(frozen=True)
class PageRequest:
    """Which page a client asked for (``page`` from 1)."""

    page: int = 1
    per_page: int = DEFAULT_PER_PAGE

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per_page

    def window(self, total: int) -> dict[str, int] | None:
        """LIMIT/OFFSET parameters, or None when the page is past the end."""
        if self.offset >= total:
            return None
        return {"limit": self.per_page, "offset": self.offset}


@dataclasses.dataclass(frozen=True)
class Page(Generic[T]):
    items: Sequence[T]
    page: int
    per_page: int
    total: int

    def map(self, convert: Callable[[T], Any]) -> Page:
        return Page([convert(item) for item in self.items], self.page, self.per_page, self.total)


def count_of(query: Select) -> Select:
    """``SELECT count(*)`` of what ``query`` would return (its ORDER BY dropped)."""
    return select(func.count()).select_from(query.order_by(None).subquery())


def fetch_page(
    session: Session,
    query: Select,
    request: PageRequest,
    *,
    count_query: Select | None = None,
    scalars: bool = True,
    params: dict[str, Any] | None = None,
    bound_window: bool = False,
) -> Page:
    """One page of ``query`` and the total (``count_query``, or the count of ``query``).

    ``scalars`` returns the first column of each row (ORM entities); otherwise rows.
    ``bound_window``: ``query`` ends in ``LIMIT :limit OFFSET :offset`` already (a statement
    built once and cached by its caller), so the window goes in as parameters instead of
    building a new statement per request.
    """
    params = params or {}
    total = session.scalar(count_query if count_query is not None else count_of(query), params)
    window = request.window(total or 0)
    if window is None:
        return Page([], request.page, request.per_page, total or 0)
    if bound_window:
        paged, params = query, {**params, **window}
    else:
        paged = query.limit(window["limit"]).offset(window["offset"])
    if scalars:
        items = session.scalars(paged, params).unique().all()
    else:
        items = session.execute(paged, params).all()
    return Page(items, request.page, request.per_page, total or 0)
