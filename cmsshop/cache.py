"""The answer cache: finished public catalogue and docs answers, served above the
transaction.

A public answer (``cached_json`` in the store and docs views: no user, ETag, max-age)
is the same for every visitor, so a process keeps the finished response -- status,
headers, body. A hit skips the transaction, the session, the queries and the JSON work:
it costs little more than routing a request.

Only the routes a module declares (``config.add_cached_routes``, with the query
parameters each one's view reads) are looked up. The key is the path, the values of
those parameters as the view reads them (decoded, in a fixed order) and the
representation served -- JSON for every cached route, whatever the ``Accept`` header
says. Unknown parameters are left out of the key, so they change neither the answer
nor the number of entries (a 422 for them would have changed what existing clients
get). A query string that is not UTF-8 is not looked up (the view answers it as before).

Freshness, across several processes on one database, rests on one counter: the
``public`` row of ``content_versions``, which triggers on the content tables (products,
prices, releases, currencies, articles; migration 0017) bump on every insert, update or
delete in the writing transaction -- through the app, the ORM's bulk statements or an
operator's SQL alike.

- In the process that writes, at once: a session that wrote content empties the
  process's caches right after its commit, and the next request reads the counter (so
  what the process keeps after its write is not emptied again at its next check).
- In the other processes, within ``cmsshop.answer_cache_check_interval`` seconds (1): a
  request that finds the interval elapsed reads the counter (one primary-key read, once
  per interval per process, not per request) and empties the cache when it moved.
- An entry is fresh for ``cmsshop.answer_cache_ttl`` seconds (300), a safety net only:
  the counter already covers every write. After that, one request refreshes it through
  the app while the others keep getting the stale copy, for at most
  ``cmsshop.answer_cache_stale`` more seconds -- a popular page never stampedes.

An answer computed from a snapshot older than the latest invalidation is not stored
(generation check), so a slow request cannot put back what a write just replaced.
Bounded in memory: ``cmsshop.answer_cache_entries`` entries and
``cmsshop.answer_cache_bytes`` bytes -- body, headers and the key itself all counted --
least recently used out first. Conditional
requests are answered from the entry (304 on a matching ``If-None-Match``).
``cmsshop.answer_cache_ttl = 0`` turns the cache off. ``hits`` and ``misses`` count the
lookups (for the benchmarks and an operator's curiosity).

Anonymous HTML pages (``config.add_cached_pages``: home, product list, product pages,
docs list and articles) are kept the same way, with the same invalidation -- the version
triggers also cover what those pages read besides the catalogue (migration 0028: the
brand's settings and logo, the legal pages, the media files). A page is per visitor only
through the login session, the flash notice and the CSRF token, so:

- Only a request that is surely anonymous is looked up or stored: no session cookie or
  an anonymous visitor's (``security.surely_anonymous``: its form is never a session's),
  and no flash cookie. Any other request gets the live page, as before.
- The copy that is stored is rendered with the request's cookies removed (no session,
  no notice, no visitor token can reach it) and with a per-process placeholder for the
  CSRF token. Serving it -- to the request that rendered it too -- puts the visitor's own
  anonymous token in its place (setting the anonymous cookie when the visitor has none,
  as the live page does), and only in a page that holds a form.
- A query parameter the page does not read is not looked up (its links would carry it
  into a copy served to others); the key holds the application URL (the pages' absolute
  links name the host they were asked for).
- Stored pages answer ``Cache-Control: private, no-cache`` (the security headers tween)
  and ``Vary: Cookie``: no shared cache keeps a page that is personalised when served.
"""

from __future__ import annotations

import collections
import dataclasses
import secrets
import sys
import threading
import time
import weakref

from pyramid.csrf import get_csrf_token
from pyramid.interfaces import IRoutesMapper
from pyramid.response import Response
from sqlalchemy import event
from sqlalchemy.orm import Session

from cmsshop.content import CONTENT_CHANGED, VERSION_SQL
from cmsshop.hotsql import forget_if_dropped
from cmsshop.models.store import CONTENT_TABLES
from cmsshop.security import (
    CSRF_PLACEHOLDER,
    CSRF_PLACEHOLDER_USED,
    surely_anonymous,
)
from cmsshop.web import FLASH_COOKIE

# Marks a request whose 200 answer may be kept (set by views.shared.caching.cached_json,
# and shared_page for an HTML page).
CACHEABLE = "cmsshop.answer_cacheable"
# Headers the cache never replays: per-request or per-visitor.
NOT_REPLAYED = {"set-cookie", "x-request-id", "content-length"}
# Registry key: {route name: the query parameters its view reads}, from the modules.
CACHED_ROUTES = "cmsshop.cached_routes"
# The representation every cached route serves, whatever the Accept header asks for
# (the views do not negotiate): the key holds it, never the raw header.
REPRESENTATION = "application/json"
# Registry key: {page route name: the query parameters its view reads}, from the modules.
CACHED_PAGES = "cmsshop.cached_pages"
PAGE_REPRESENTATION = "text/html"


@dataclasses.dataclass(slots=True)
class Entry:
    headerlist: list[tuple[str, str]]
    body: bytes
    etag: str | None
    fresh_until: float
    stale_until: float
    # What the cache counted for it (its size and its key's), set when it is stored.
    counted: int = 0
    # A page whose body holds the CSRF placeholder (filled in for each visitor).
    fills_csrf: bool = False

    @property
    def size(self) -> int:
        """Bytes counted against ``max_bytes``: the body, the headers, and about what
        Python's objects around them take."""
        return len(self.body) + sum(len(k) + len(v) + 130 for k, v in self.headerlist) + 400


def key_bytes(key) -> int:
    """The memory a key holds: its strings and tuples as Python sizes them (a long
    query value costs what it weighs, whatever the key is made of)."""
    if isinstance(key, tuple):
        return sys.getsizeof(key) + sum(key_bytes(part) for part in key)
    return sys.getsizeof(key)


class AnswerCache:
    """A bounded LRU of finished answers with per-key refresh and a generation counter."""

    def __init__(self, ttl: float, stale: float, max_entries: int, max_bytes: int, clock=None):
        self.ttl, self.stale = ttl, stale
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self.clock = clock or time.monotonic
        self.entries: collections.OrderedDict[tuple, Entry] = collections.OrderedDict()
        self.bytes = 0
        self.generation = 0
        self.refreshing: set[tuple] = set()
        self.hits = self.misses = 0
        self.lock = threading.Lock()
        _ALL_CACHES.add(self)

    def lookup(self, key: tuple) -> tuple[Entry | None, bool]:
        """(entry to serve or None, whether this caller must refresh the key)."""
        now = self.clock()
        with self.lock:
            entry = self.entries.get(key)
            if entry is not None and now >= entry.stale_until:
                self._drop(key)
                entry = None
            if entry is not None:
                self.entries.move_to_end(key)
                if now < entry.fresh_until or key in self.refreshing:
                    self.hits += 1
                    return entry, False
            self.misses += 1
            if key in self.refreshing:
                return None, False  # another thread computes it: compute too, store nothing
            self.refreshing.add(key)
            return None, True

    def store(self, key: tuple, generation: int, entry: Entry | None) -> None:
        """End a refresh; keep ``entry`` unless the cache was emptied since it began."""
        with self.lock:
            self.refreshing.discard(key)
            if entry is None or generation != self.generation:
                return
            size = entry.size + key_bytes(key)
            if size > self.max_bytes // 8:
                return  # one answer may not take over the cache
            if key in self.entries:
                self._drop(key)
            entry.counted = size
            self.entries[key] = entry
            self.bytes += size
            while len(self.entries) > self.max_entries or self.bytes > self.max_bytes:
                self._drop(next(iter(self.entries)))

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
            self.bytes = 0
            self.generation += 1

    def _drop(self, key: tuple) -> None:
        entry = self.entries.pop(key)
        self.bytes -= entry.counted


_ALL_CACHES: weakref.WeakSet[AnswerCache] = weakref.WeakSet()


def clear_all() -> None:
    """Empty every answer cache of this process (after a content write commits), and
    whatever else was registered with :func:`clear_with_answers`."""
    for cache in list(_ALL_CACHES):
        cache.clear()


def clear_with_answers(kept) -> None:
    """Have :func:`clear_all` empty ``kept`` too (anything with a ``clear()``, kept for
    this process's life): values kept per content version, such as the catalogue's
    totals, go when the answers do."""
    _ALL_CACHES.add(kept)


# --- invalidation: the content_versions counter -------------------------------------------

CHANGED = CONTENT_CHANGED  # cmsshop.content
# The counter itself is bumped by the database: triggers on the content tables
# (migration 0017), for every write, whoever makes it. The session only notes that this
# process wrote content, so that it empties its own caches right after the commit.
READ_SQL = VERSION_SQL


def _touches_content(session: Session) -> bool:
    return any(
        getattr(type(obj), "__tablename__", None) in CONTENT_TABLES
        for obj in (*session.new, *session.dirty, *session.deleted)
    )


@event.listens_for(Session, "before_flush")
def _note_content_flush(session, flush_context, instances):
    if not session.info.get(CHANGED) and _touches_content(session):
        session.info[CHANGED] = True


@event.listens_for(Session, "do_orm_execute")
def _note_content_statement(state):
    # Bulk ORM statements (update(Product)..., insert(Product) executemany) skip the flush.
    if not (state.is_insert or state.is_update or state.is_delete):
        return
    table = getattr(getattr(state.statement, "table", None), "name", None)
    if table in CONTENT_TABLES:
        state.session.info[CHANGED] = True


@event.listens_for(Session, "after_commit")
def _clear_after_commit(session):
    if session.info.pop(CHANGED, None):
        clear_all()


@event.listens_for(Session, "after_rollback")
def _forget_on_rollback(session):
    session.info.pop(CHANGED, None)


# --- the tween ----------------------------------------------------------------------------


class VersionWatch:
    """Reads the content version at most once per ``interval`` seconds (one thread at a
    time); empties ``cache`` when another process moved it."""

    def __init__(self, engine, cache: AnswerCache, interval: float, clock=None):
        self.engine, self.cache, self.interval = engine, cache, interval
        self.clock = clock or time.monotonic
        self.seen: int | None = None
        self.due = 0.0
        self.lock = threading.Lock()
        clear_with_answers(self)

    def clear(self) -> None:
        """Read the version at the next request (:func:`clear_all` calls this after this
        process wrote content): the process learns the new version before it keeps
        anything again, instead of emptying the cache a second time, and for nothing, at
        its next check."""
        self.due = 0.0

    def check(self) -> None:
        if self.clock() < self.due or not self.lock.acquire(blocking=False):
            return
        try:
            self.due = self.clock() + self.interval
            pooled = self.engine.raw_connection()
            try:
                cursor = pooled.driver_connection.cursor()
                if self.engine.dialect.name == "postgresql":
                    # The request that checks must not wait long on a locked table.
                    cursor.execute("SET LOCAL statement_timeout = 250")
                cursor.execute(READ_SQL)
                row = cursor.fetchone()
                cursor.close()
            except Exception as exc:
                forget_if_dropped(self.engine, pooled, exc)
                raise
            finally:
                pooled.close()  # rolls back (the pool's reset on return)
            version = row[0] if row else 0
            if version != self.seen:
                if self.seen is not None or self.cache.entries:
                    self.cache.clear()  # what is cached predates this version
                self.seen = version
        except Exception:  # noqa: BLE001 - a database hiccup: serve on, the TTL still applies
            self.cache.clear()
        finally:
            self.lock.release()


def answer_cache_tween_factory(handler, registry):
    settings = registry.settings
    ttl = settings["cmsshop.answer_cache_ttl"]
    if ttl <= 0:
        return handler
    cache = AnswerCache(
        ttl=ttl,
        stale=settings["cmsshop.answer_cache_stale"],
        max_entries=settings["cmsshop.answer_cache_entries"],
        max_bytes=settings["cmsshop.answer_cache_bytes"],
    )
    registry["cmsshop.answer_cache"] = cache
    declared: dict[str, tuple[str, ...]] = registry.get(CACHED_ROUTES, {})
    pages: dict[str, tuple[str, ...]] = registry.get(CACHED_PAGES, {})
    mapper = registry.queryUtility(IRoutesMapper)
    # A path that cannot be a declared route's skips the route match here (the router
    # matches it anyway): the static part of each pattern, before its first placeholder.
    prefixes = tuple({mapper.get_route(name).pattern.split("{")[0] for name in (*declared, *pages)})
    # What a stored page holds where each visitor's CSRF token goes: random per process,
    # so no text of the content can name it.
    placeholder = "csrf-placeholder-" + secrets.token_hex(16)
    watch = VersionWatch(
        registry["cmsshop.engine"], cache, settings["cmsshop.answer_cache_check_interval"]
    )
    from cmsshop.tweens import headers_are_safe  # the edge check's rule for headers

    def answer_cache_tween(request):
        environ = request.environ
        path = environ.get("PATH_INFO", "")
        if environ["REQUEST_METHOD"] != "GET" or not path.startswith(prefixes):
            return handler(request)
        route = mapper(request)["route"]
        if route is None:
            return handler(request)
        params = declared.get(route.name)
        page = params is None
        if page:
            params = pages.get(route.name)
            if params is None or not shared_page_request(request, params):
                return handler(request)
            key = page_key(request, path, params)
        else:
            key = cache_key(request, path, params)
        if key is None:
            return handler(request)
        if cache.entries:  # nothing cached, nothing to invalidate: no database read
            watch.check()
        entry, refresh = cache.lookup(key)
        if entry is not None and headers_are_safe(request):
            response = replay(request, entry)
            return fill_csrf(request, response, placeholder) if entry.fills_csrf else response
        if not refresh:
            return handler(request)
        generation = cache.generation
        stored = None
        try:
            if page:
                response, fills_csrf = render_shared(handler, request, placeholder)
                if response.status_code == 200 and environ.get(CACHEABLE):
                    if watch.seen is None:
                        watch.check()  # as below: the first answer learns the version
                    else:
                        stored = keep(response, cache, fills_csrf=fills_csrf)
                return fill_csrf(request, response, placeholder) if fills_csrf else response
            response = handler(request)
            if response.status_code == 200 and environ.get(CACHEABLE):
                if watch.seen is None:
                    # The first answer of the process: learn the version now and keep
                    # the next answer, which is computed after it (one read, once).
                    watch.check()
                else:
                    stored = keep(response, cache)
            return response
        finally:
            cache.store(key, generation, stored)

    return answer_cache_tween


def cache_key(request, path: str, params: tuple[str, ...]) -> tuple | None:
    """(path, the values of each parameter the route reads, the representation), or
    None for a query string that is not UTF-8 (not looked up: the view answers it)."""
    if not params or not request.environ.get("QUERY_STRING"):
        return (path, ((),) * len(params), REPRESENTATION)
    try:
        query = request.GET
    except UnicodeDecodeError:
        return None
    return (path, tuple(tuple(query.getall(name)) for name in params), REPRESENTATION)


def keep(response, cache: AnswerCache, fills_csrf: bool = False) -> Entry | None:
    if "Set-Cookie" in response.headers:
        return None
    now = cache.clock()
    return Entry(
        headerlist=[(k, v) for k, v in response.headerlist if k.lower() not in NOT_REPLAYED],
        body=response.body,
        etag=response.headers.get("ETag"),
        fresh_until=now + cache.ttl,
        stale_until=now + cache.ttl + cache.stale,
        fills_csrf=fills_csrf,
    )


# --- anonymous pages ------------------------------------------------------------------------


def shared_page_request(request, params: tuple[str, ...]) -> bool:
    """Whether the page may come from (and go to) the cache: surely anonymous, no flash
    notice waiting, and no query parameter the page does not read (page_url carries
    every parameter into the page's links)."""
    if "HTTP_COOKIE" in request.environ and (
        not surely_anonymous(request) or FLASH_COOKIE in request.cookies
    ):
        return False
    if request.environ.get("QUERY_STRING"):
        try:
            names = request.GET.keys()
        except UnicodeDecodeError:
            return False
        if not set(names) <= set(params):
            return False
    return True


def page_key(request, path: str, params: tuple[str, ...]) -> tuple | None:
    key = cache_key(request, path, params)
    if key is None:
        return None
    # The page's absolute links (static files, og:image) name the host it was asked for
    # (what webob's application_url is made of, read from the environ: it runs per hit).
    environ = request.environ
    origin = (
        environ["wsgi.url_scheme"],
        environ.get("HTTP_HOST") or f"{environ['SERVER_NAME']}:{environ['SERVER_PORT']}",
        environ.get("SCRIPT_NAME", ""),
    )
    return (*key[:-1], PAGE_REPRESENTATION, origin)


def render_shared(handler, request, placeholder: str):
    """The page as any anonymous visitor sees it: rendered without the request's cookies
    (no session, notice or visitor token can reach it), with ``placeholder`` for the
    CSRF token. (response, whether the body holds the placeholder)."""
    environ = request.environ
    cookie = environ.pop("HTTP_COOKIE", None)
    environ[CSRF_PLACEHOLDER] = placeholder
    try:
        response = handler(request)
    finally:
        del environ[CSRF_PLACEHOLDER]
        if cookie is not None:
            environ["HTTP_COOKIE"] = cookie
    fills_csrf = bool(environ.pop(CSRF_PLACEHOLDER_USED, False))
    if response.content_type == PAGE_REPRESENTATION:
        vary = list(response.vary or ())
        if "Cookie" not in vary:
            response.vary = (*vary, "Cookie")
    return response, fills_csrf


def fill_csrf(request, response, placeholder: str):
    """The visitor's own CSRF token in place of the placeholder (the anonymous cookie is
    set by the token's response callback when the visitor has none, as on a live page)."""
    token = get_csrf_token(request)
    response.body = response.body.replace(placeholder.encode(), token.encode())
    return response


def replay(request, entry: Entry) -> Response:
    if entry.etag and request.if_none_match and entry.etag.strip('"') in request.if_none_match:
        response = Response(status=304, headerlist=list(entry.headerlist))
        response.content_type = None
        return response
    return Response(body=entry.body, headerlist=list(entry.headerlist))


def add_cached_routes(config, routes: dict[str, tuple[str, ...]]) -> None:
    """Declare routes whose public answers (``cached_json``) the cache may keep, each
    with the query parameters its view reads -- all of them: the key holds those and
    nothing else (a test checks them against the routes' OpenAPI parameters)."""
    config.registry.setdefault(CACHED_ROUTES, {}).update(routes)


def add_cached_pages(config, routes: dict[str, tuple[str, ...]]) -> None:
    """Declare HTML page routes the cache may keep for anonymous visitors, each with the
    query parameters its view reads (a request with any other is not looked up). The
    view says a page is the same for every anonymous visitor with
    ``views.shared.caching.shared_page``."""
    config.registry.setdefault(CACHED_PAGES, {}).update(routes)


def includeme(config) -> None:
    config.add_directive("add_cached_routes", add_cached_routes)
    config.add_directive("add_cached_pages", add_cached_pages)
    # Under the request log (hits are logged and get their X-Request-ID), over pyramid_tm
    # (a hit opens no transaction and checks out no connection).
    config.add_tween(
        "cmsshop.cache.answer_cache_tween_factory",
        under="cmsshop.tweens.request_log_tween_factory",
        over="pyramid_tm.tm_tween_factory",
    )
