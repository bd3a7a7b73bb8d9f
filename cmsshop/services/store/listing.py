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

from sqlalchemy import Select, bindparam, func, select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session
from sqlalchemy.sql.functions import FunctionElement

from cmsshop.content import KEPT, VERSION_SQL, kept_per_version
from cmsshop.hotsql import HotBatch, HotStatement, RawReads
from cmsshop.services.paging import Page, PageRequest
from cmsshop.services.store.text import like_pattern

# A search matches any of its columns, one pattern match per column. (Matching the
# columns joined as one text costs more on SQLite, and on PostgreSQL the planner then
# misjudges how many rows match: it sorted every match instead of walking the index.)


class contains_text(FunctionElement):  # noqa: N801 - reads as SQL, like func.*
    """``contains_text(pattern, *columns)``: any column matches ``pattern`` (ESCAPE '/')
    case-insensitively.

    PostgreSQL: ``<column>_folded LIKE lower(pattern)``, each searched column's lower()
    kept beside it (models.store.FOLDED): what ``column ILIKE pattern`` answers (ILIKE
    lowers both sides in a UTF-8 database), without lowering every value scanned.
    SQLite: ``column LIKE pattern``, which folds ASCII case exactly as SQLite's lower()
    does (SQLAlchemy's ilike there is ``lower(x) LIKE lower(y)``: two function calls a row
    for the same answer)."""

    # No Boolean type: SQLite would compare the match with ``= 1``.
    inherit_cache = True


def _any_like(pattern: str, columns) -> str:
    return "(" + " OR ".join(f"{c} LIKE {pattern} ESCAPE '/'" for c in columns) + ")"


@compiles(contains_text)
def _contains_text(element, compiler, **kw):
    pattern, *columns = element.clauses
    folded = [column.table.c[f"{column.name}_folded"] for column in columns]
    return _any_like(
        f"lower({compiler.process(pattern, **kw)})",
        [compiler.process(column, **kw) for column in folded],
    )


@compiles(contains_text, "sqlite")
def _contains_text_sqlite(element, compiler, **kw):
    pattern, *columns = (compiler.process(c, **kw) for c in element.clauses)
    return _any_like(pattern, columns)


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
        where.append(contains_text(bindparam("pattern"), *search_in))
    count = select(func.count()).select_from(model).where(*where)
    page = (
        select(*columns)
        .where(*where)
        .order_by(*order)
        .limit(bindparam("limit"))
        .offset(bindparam("offset"))
    )
    return ListingStatements(count, page)


# --- totals kept per content version (cmsshop.content) ---------------------------
#
# Counting the rows of a listing reads every matching index entry: 1 ms at 10,000 products,
# 10 ms at 100,000, on each request -- the one cost of a page that grows with the catalogue.
# An unsearched total changes only when the content does, so the total of each listing
# shape (and filter value) is kept with the content version it was counted at, and a
# request reads that one-row version instead of counting: the same number of statements,
# a constant time. Searched totals (``q``) are counted each time.


def fetch_listing(
    session: Session,
    statements: ListingStatements,
    request: PageRequest,
    *,
    q: str | None = None,
    **params: Any,
) -> Page:
    """One page of rows (and the total) of ``statements``; ``q`` is the search text of
    statements built with ``search_in``, ``params`` the values of their other filters.

    Two statements on the session's connection (plain column selects need none of the
    ORM's per-statement work): the total (kept per content version: see above), then the page. A
    page past the end is answered without asking for it (see services.paging)."""
    values = {name: value for name, value in params.items() if value is not None}
    connection = session.connection()

    def count() -> int:
        return connection.execute(statements.count, values).scalar() or 0

    if q:
        values["pattern"] = like_pattern(q)
        total = count()
    else:  # kept per content version (see above)
        total = kept_per_version(session, (id(statements), *sorted(values.items())), count)
    window = request.window(total)
    if window is None:
        return Page([], request.page, request.per_page, total)
    items = connection.execute(statements.page, {**values, **window}).all()
    return Page(items, request.page, request.per_page, total)


# --- public listings on a pooled connection ----------------------------------------------
#
# The public catalogue and docs lists are the routes the answer cache cannot always serve
# (a new search, a cold page). They read on a pooled DBAPI connection in autocommit (no
# request transaction, no ORM session, no SQLAlchemy execution context: each of those cost
# more than the statements themselves), with plain SQL written once per dialect and sent
# as one batch per step (cmsshop.hotsql: on PostgreSQL one round trip, statements
# prepared once per connection).

# PostgreSQL refuses an OFFSET beyond 64 bits; a page that far is past any end.
MAX_OFFSET = 2**62


def search_sql(dialect: str, *columns: str) -> str:
    """``columns`` (SQL: ``alias.column``) matched against ``:pattern`` as
    :class:`contains_text` does (on PostgreSQL their ``_folded`` twins)."""
    if dialect == "postgresql":
        # The pattern folded and its escape character rewritten (to LIKE's backslash) once
        # a statement, in a sub-select (an InitPlan): not at planning, so a generic plan
        # runs a search as fast as a custom one, and not for every row, which
        # ``lower(:pattern) ESCAPE '/'`` costs in a generic plan (a count of 2,000
        # articles: 0.6 ms, against 1.4 ms). The prepared searches then plan once
        # (HotListing), not on every call (a third of an article page's statement).
        pattern = "(SELECT like_escape(lower(:pattern), '/'))"
        return "(" + " OR ".join(f"{c}_folded LIKE {pattern}" for c in columns) + ")"
    return _any_like(":pattern", columns)


# --- JSON written by the database (the public product and article lists and bodies) ------

EVERY_ROW = "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"


def ordered_json_array(
    dialect: str, value: str, order: str, source: str, *, page: bool = False
) -> str:
    """SQL of one JSON array of ``value`` over the rows of ``source`` (FROM ...) in
    ``order``, or NULL for no row. SQLite 3.40 has no ORDER BY inside an aggregate, so
    there json_group_array runs as a window over the ordered rows (one row kept).

    ``page``: ``source`` is a subquery already in ``order`` with a LIMIT (a list's
    page). SQLite keeps such a subquery's order for the aggregate around it (the rule
    HotStatement's ``json_rows`` relies on), so the plain aggregate does, without the
    window's sort and frame: a third of an article page's statement. Its array of no
    row is ``[]``, which the callers read as none, as they read NULL."""
    if dialect == "sqlite":
        if page:
            return f"SELECT json_group_array({value}) {source}"
        return (
            f"SELECT json_group_array({value}) OVER (ORDER BY {order} {EVERY_ROW}) {source} LIMIT 1"
        )
    return f"SELECT json_agg({value} ORDER BY {order}) {source}"


def json_text(dialect: str, json_value: str) -> str:
    """JSON as text: PostgreSQL's json would be parsed by psycopg."""
    return json_value if dialect == "sqlite" else f"CAST({json_value} AS text)"


def json_select_text(dialect: str, select: str) -> str:
    """The JSON value ``select`` gives, as text."""
    return select if dialect == "sqlite" else f"SELECT {json_text(dialect, f'({select})')}"


def utc_seconds_sql(dialect: str, column: str) -> str:
    """util.isoformat_z of a stored time, in SQL."""
    if dialect == "sqlite":
        return f"strftime('%Y-%m-%dT%H:%M:%SZ', {column})"
    # (no colon before a letter: hotsql would read it as a parameter)
    utc = f"{column} AT TIME ZONE 'UTC'"
    return f"""translate(to_char({utc}, 'YYYY-MM-DD"T"HH24_MI_SS"Z"'), '_', ':')"""


class HotListing:
    """The count and page SQL of one public listing shape, per dialect (``:pattern``,
    ``:limit``, ``:offset`` and the shape's own parameters)."""

    def __init__(
        self,
        shape: str,
        count: dict[str, str],
        page: dict[str, str | HotStatement],
        searched: bool,
    ):
        self.shape, self.searched = shape, searched
        first = {d: HotStatement(sql, scalar=True) for d, sql in count.items()}
        if not searched:
            first = {d: HotStatement(VERSION_SQL, scalar=True) for d in count}
        self.count = {
            d: HotBatch(HotStatement(sql), generic_plans=True) for d, sql in count.items()
        }
        self.first = {d: HotBatch(first[d], generic_plans=True) for d in count}
        # A page given as SQL: its rows in one step on SQLite (hotsql.HotStatement; its
        # ORDER BY has a LIMIT, so the order holds).
        # On PostgreSQL's generic plans (hotsql.HotBatch: planned once, not on every
        # call), as every read of a thread's connection is (no SET between two of them);
        # a search's pattern is a parameter the plan does not depend on (search_sql).
        self.first_and_page = {
            d: HotBatch(
                first[d],
                sql if isinstance(sql, HotStatement) else HotStatement(sql, json_rows=True),
                generic_plans=True,
            )
            for d, sql in page.items()
        }


def fetch_hot_listing(
    conn: RawReads, listing: HotListing, request: PageRequest, params: dict
) -> Page:
    """One page of rows of ``listing`` and its total, in one batch: the searched total or
    the content version (then the total kept for it, as :func:`fetch_listing` keeps its) with
    the page; a second batch only to count a total not kept yet."""
    dialect = conn.dialect_name
    window = {"limit": request.per_page, "offset": request.offset}
    values = {**params, **window}
    if request.offset < MAX_OFFSET:
        first, rows = listing.first_and_page[dialect].run(conn, values)
    else:
        (first,), rows = listing.first[dialect].run(conn, values), []
    if listing.searched:
        total = first[0][0]
    else:
        total = _kept_total(conn, listing, first[0][0] if first else None, values)
    if request.offset >= total:
        rows = []
    return Page(rows, request.page, request.per_page, total)


def _kept_total(conn: RawReads, listing: HotListing, version, values: dict) -> int:
    def count() -> int:
        (rows,) = listing.count[conn.dialect_name].run(conn, values)
        return rows[0][0]

    key = (listing.shape, *sorted((k, v) for k, v in values.items() if k not in WINDOW))
    return KEPT.value(conn.engine, key, version, count)


WINDOW = ("limit", "offset")
