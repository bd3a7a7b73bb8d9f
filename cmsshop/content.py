"""What the public content shows, kept per content version.

The database numbers every change of the public content: triggers on the content tables
(catalogue and docs, migration 0017; the pictures, 0026; the brand, the logo, the legal
pages and the stored renditions, 0028) bump the ``public`` row of ``content_versions``.
What is derived from that content -- a listing's total, the brand, the currency picker,
the footer's legal links -- is kept with the version it was read at, per engine (a
database), and read again only when the version moved: a request reads the one-row
version instead of counting or loading, the same number of statements at any size.
A session that wrote content (its version is not committed yet) reads afresh and keeps
nothing. ``KEPT.clear()`` forgets everything: the answer cache's clear_all() calls it
too (registered by modules.core), for whoever empties the tables behind the triggers'
back (the test suite does between tests, content_versions included).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

# The version's one-row read (the answer cache reads it too).
VERSION_SQL = "SELECT version FROM content_versions WHERE name = 'public'"
# The mark cmsshop.cache leaves on a session that wrote content, before it flushes: its
# version number is not committed yet, so it neither reads nor fills what is kept.
CONTENT_CHANGED = "cmsshop.public_content_changed"
MAX_KEPT = 1024  # listing shapes x filter values (a category is the client's): bounded


class KeptPerVersion:
    """The kept values, per engine: two apps of one process never share them."""

    def __init__(self):
        self.by_engine: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def of(self, engine) -> dict:
        kept = self.by_engine.get(engine)
        if kept is None:
            kept = self.by_engine.setdefault(engine, {})
        return kept

    def clear(self) -> None:
        for kept in list(self.by_engine.values()):
            kept.clear()

    def value(self, engine, key: tuple, version, read: Callable[[], Any]) -> Any:
        """The value kept for ``key`` at ``version``, or ``read()`` kept at it. The
        caller reads ``version`` first, so what ``read()`` sees is at least as new as the
        version it is kept at. ``version`` None (no row): read, keep nothing."""
        kept = self.of(engine)
        found = kept.get(key)
        if version is not None and found is not None and found[0] == version:
            return found[1]
        value = read()
        if version is not None:
            if len(kept) >= MAX_KEPT:
                kept.clear()
            kept[key] = (version, value)
        return value


KEPT = KeptPerVersion()


def untouched(session: Session) -> bool:
    """No content written by this session's transaction (its version is committed)."""
    return not (
        session.info.get(CONTENT_CHANGED) or session.new or session.dirty or session.deleted
    )


def kept_per_version(session: Session, key: tuple, read: Callable[[], Any]) -> Any:
    """``read()`` (what the public content shows: it must be immutable, and its tables
    must bump the content version), read again only when the version moved: one one-row
    read instead. A session that wrote content reads afresh, and keeps nothing."""
    if not untouched(session):
        return read()
    connection = session.connection()
    # The version is read once a transaction (a page keeps several things).
    transaction = session.get_transaction()
    seen = session.info.get(_VERSION_SEEN)
    if seen is not None and seen[0] is transaction:
        version = seen[1]
    else:
        row = connection.exec_driver_sql(VERSION_SQL).first()
        version = row[0] if row else None
        session.info[_VERSION_SEEN] = (transaction, version)
    return KEPT.value(connection.engine, key, version, read)


_VERSION_SEEN = "cmsshop.content_version_seen"  # (transaction, version) in session.info
