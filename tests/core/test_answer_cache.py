"""The answer cache of public catalogue and docs answers (cmsshop.cache).

Through the real app on the real database: a repeated public GET runs no statement, a
write through the app is visible at once, a write by another process is seen within the
version-check interval, one that bypasses the ORM within the TTL; the cache's own rules
(stale-while-refresh, bounds, generations) on the class with a hand-turned clock.
"""

from __future__ import annotations

import threading
import time

import pytest
from helpers.clients import new_client
from helpers.store import add_currencies, add_product
from sqlalchemy import event, text

from cmsshop.cache import AnswerCache, Entry


@pytest.fixture
def app(make_app):
    """A new process's app, not the session's: these tests count the statements of its
    first requests, and a process reads the content version once a second, counted
    from its own last check."""
    return make_app()


@pytest.fixture
def catalogue(dbsession):
    add_currencies(dbsession)
    add_product(dbsession, "site-guard", prices={"EUR": 4900})
    add_product(dbsession, "theme-pack", prices={"EUR": 1900})


def statements_during(app, call) -> tuple[int, object]:
    """How many statements the app's engine ran during ``call()``, and its result."""
    seen = []
    engine = app.registry["cmsshop.engine"]

    def count(*args):
        seen.append(1)

    event.listen(engine, "before_cursor_execute", count)
    try:
        result = call()
    finally:
        event.remove(engine, "before_cursor_execute", count)
    return len(seen), result


def warm(client, url, **kwargs):
    """The first cacheable answer of a process learns the content version and is not
    kept; the second is."""
    client.get(url, **kwargs)
    return client.get(url, **kwargs)


def test_a_repeated_public_get_runs_no_statement(app, catalogue):
    client = new_client(app)
    first = warm(client, "/api/store/products")
    count, again = statements_during(app, lambda: client.get("/api/store/products"))
    assert count == 0
    assert again.body == first.body
    assert again.headers["ETag"] == first.headers["ETag"]
    assert again.headers["Cache-Control"] == first.headers["Cache-Control"]
    assert again.content_type == "application/json"
    # Per request, never replayed: the request id.
    assert again.headers["X-Request-ID"] != first.headers["X-Request-ID"]
    # A conditional request is answered from the entry too.
    count, not_modified = statements_during(
        app,
        lambda: client.get(
            "/api/store/products", headers={"If-None-Match": first.headers["ETag"]}, status=304
        ),
    )
    assert count == 0 and not_modified.body == b""
    assert not_modified.headers["ETag"] == first.headers["ETag"]


def test_keys_are_path_and_the_parameters_the_route_reads(app, catalogue):
    client = new_client(app)
    warm(client, "/api/store/products")
    cache = app.registry["cmsshop.answer_cache"]
    count, _ = statements_during(app, lambda: client.get("/api/store/products?perPage=1"))
    assert count > 0
    # Every cached route answers JSON whatever the Accept header says: one entry.
    count, _ = statements_during(
        app, lambda: client.get("/api/store/products", headers={"Accept": "application/json"})
    )
    assert count == 0
    assert len(cache.entries) == 2


# --- junk keys: unknown parameters, long query strings, odd Accept values ----------------

ODD_ACCEPTS = ("", "*/*", "text/html", "application/json;q=0.1, text/plain;q=0.9", "x/y;;;")


def odd_accept(i: int) -> str:
    return ODD_ACCEPTS[i % len(ODD_ACCEPTS)] if i % 2 else f"application/x-junk-{i}+json"


def test_unknown_parameters_and_accept_values_share_the_known_entry(app, catalogue):
    client = new_client(app)
    first = warm(client, "/api/store/products?perPage=1")
    cache = app.registry["cmsshop.answer_cache"]

    def junk():
        for i in range(1500):
            url = f"/api/store/products?_={i}&perPage=1&utm_{i}={'x' * 2000}"
            answer = client.get(url, headers={"Accept": odd_accept(i)})
            assert answer.body == first.body
            assert answer.headers["ETag"] == first.headers["ETag"]

    count, _ = statements_during(app, junk)
    assert count == 0  # every one a hit on the known entry
    assert len(cache.entries) == 1


def real_bytes(value) -> int:
    """What the cache really holds for a key or an entry's body: every string and bytes
    object in it, at least its length (the cache must count no less)."""
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, tuple):
        return sum(real_bytes(part) for part in value)
    return 0


def test_the_counted_bytes_bound_the_cache_whatever_the_keys(make_app, catalogue):
    bound = 96 * 1024
    app = make_app(**{"cmsshop.answer_cache_bytes": str(bound)})
    client = new_client(app)
    cache = app.registry["cmsshop.answer_cache"]
    warm(client, "/api/store/products")
    highest = 0
    for i in range(2000):
        # Distinct known values (each a real answer, each kept) under kilobytes of junk.
        url = f"/api/store/products?q=w{i:04d}{'y' * 150}&pad{i}={'z' * (i % 7) * 3000}"
        client.get(url, headers={"Accept": odd_accept(i)})
        held = sum(real_bytes(key) + len(e.body) for key, e in cache.entries.items())
        assert held <= cache.bytes <= bound, (i, held, cache.bytes)
        highest = max(highest, cache.bytes)
        assert len(cache.entries) <= bound // 400
    assert highest > bound // 2  # the cache was filled, and stayed within its bound


def test_known_parameters_still_choose_and_cache_the_answer(app, catalogue):
    client = new_client(app)
    cache = app.registry["cmsshop.answer_cache"]
    client.get("/api/store/products")  # the process learns the content version
    site = client.get("/api/store/products?q=site&junk=1").json
    theme = client.get("/api/store/products?q=theme&junk=2").json
    assert [p["slug"] for p in site["items"]] == ["site-guard"]
    assert [p["slug"] for p in theme["items"]] == ["theme-pack"]
    # Each cached under its known parameters: other junk, a percent-encoded spelling
    # and another parameter order are hits.
    count, again = statements_during(
        app, lambda: client.get("/api/store/products?other=x&q=%73ite", headers={"Accept": "*/*"})
    )
    assert count == 0 and again.json == site
    count, again = statements_during(app, lambda: client.get("/api/store/products?q=theme"))
    assert count == 0 and again.json == theme
    # A product in a currency, and without one.
    eur = client.get("/api/store/products/site-guard?currency=EUR&x=1").json
    plain = client.get("/api/store/products/site-guard?y=2").json
    assert [p["currency"] for p in eur["prices"]] == ["EUR"]
    count, again = statements_during(
        app, lambda: client.get("/api/store/products/site-guard?currency=EUR&z=3")
    )
    assert count == 0 and again.json == eur
    count, again = statements_during(app, lambda: client.get("/api/store/products/site-guard"))
    assert count == 0 and again.json == plain
    # Bad or repeated known values are still refused, and nothing is kept for them.
    entries = len(cache.entries)
    assert client.get("/api/store/products?q=a&q=b", status=422).json["code"]
    assert client.get("/api/store/products?currency=XXX&junk=1", status=422).json["code"]
    response = client.get("/api/store/products?junk=%FF", status=400)
    assert response.json["code"] == "malformed_query"
    assert len(cache.entries) == entries
    # A route that reads no parameter answers as before, whatever the query string.
    assert client.get("/api/store/currencies?junk=%FF").json["items"]
    # The docs routes too.
    client.get("/api/docs/articles?perPage=5&junk=1")
    count, _ = statements_during(app, lambda: client.get("/api/docs/articles?perPage=5&j=2"))
    assert count == 0


def test_cached_routes_declare_what_their_openapi_operation_documents(app):
    """The key's parameters are the route's documented query parameters, and the routes
    whose answers the cache may keep are those documented with a 304."""
    from cmsshop.cache import CACHED_ROUTES
    from cmsshop.openapi import build_document

    declared = app.registry[CACHED_ROUTES]
    introspector = app.registry.introspector
    patterns = {name: introspector.get("routes", name)["pattern"] for name in declared}
    document = build_document(app.registry)
    with_304 = {
        path
        for path, ops in document["paths"].items()
        if "304" in ops.get("get", {}).get("responses", {})
    }
    assert set(patterns.values()) == with_304
    for name, params in declared.items():
        operation = document["paths"][patterns[name]]["get"]
        documented = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
        assert set(params) == documented, name


def test_errors_and_private_answers_are_not_kept(app, catalogue, customer):
    client = new_client(app)
    client.get("/api/store/products?currency=XXX", status=422)
    client.get("/api/store/products/nope", status=404)
    client.get("/api/auth/session")
    assert not app.registry["cmsshop.answer_cache"].entries


def test_a_hit_with_control_characters_in_a_header_is_still_refused(app, catalogue):
    client = new_client(app)
    warm(client, "/api/store/products")
    response = client.get(
        "/api/store/products", headers={"X-Note": "a\x01b"}, status=400, expect_errors=True
    )
    assert response.json["code"] == "malformed_request"


def test_a_write_through_the_app_is_visible_at_once(admin_app, app, catalogue):
    public = new_client(app)
    before = warm(public, "/api/store/products/site-guard").json
    admin_app.patch_json("/api/admin/products/site-guard", {"name": "Site Guard 2"})
    after = public.get("/api/store/products/site-guard").json
    assert before["name"] != "Site Guard 2" and after["name"] == "Site Guard 2"


def test_another_process_write_is_seen_within_the_check_interval(make_app, catalogue, engine):
    # Two apps are two processes' caches; a write by "the other process" is plain SQL
    # (as an operator's would be): the database's triggers move the version counter.
    app = make_app(**{"cmsshop.answer_cache_check_interval": "0"})
    client = new_client(app)
    assert warm(client, "/api/store/products/site-guard").json["name"] == "Site Guard"
    count, _ = statements_during(app, lambda: client.get("/api/store/products/site-guard"))
    assert count == 0  # a hit (its version check reads on the DBAPI cursor, uncounted)
    with engine.begin() as conn:
        conn.execute(text("UPDATE products SET name = 'Renamed' WHERE slug = 'site-guard'"))
    assert client.get("/api/store/products/site-guard").json["name"] == "Renamed"


def test_the_writing_process_learns_the_new_version_before_keeping_again(
    make_app, catalogue, dbsession
):
    """A content write committed in this process empties its caches and has the next
    request read the version at once: what is kept after the write is kept under the
    new version, so the next periodic check finds nothing moved and keeps it (it used to
    empty the cache a second time, 0-1 s after every write of the process's own)."""
    from cmsshop.models import Product

    interval = 0.3
    app = make_app(**{"cmsshop.answer_cache_check_interval": str(interval)})
    client = new_client(app)
    url = "/api/store/products/site-guard"
    warm(client, url)
    product = dbsession.query(Product).filter_by(slug="site-guard").one()
    product.name = "Renamed"
    dbsession.commit()
    assert warm(client, url).json["name"] == "Renamed"
    time.sleep(interval * 1.5)  # the next request checks the version again
    count, again = statements_during(app, lambda: client.get(url))
    assert (count, again.json["name"]) == (0, "Renamed")  # still kept


def test_any_write_to_public_content_bumps_the_version(engine, catalogue):
    """The triggers of migration 0017, table by table and event by event (a later
    migration that recreates one of the tables must create them again)."""

    def version(conn):
        return conn.execute(text("SELECT version FROM content_versions")).scalar_one()

    writes = (
        "INSERT INTO currencies (code, name, symbol, decimals, enabled, is_default) "
        "VALUES ('CHF', 'Swiss franc', 'Fr.', 2, true, false)",
        "UPDATE currencies SET name = 'Franc' WHERE code = 'CHF'",
        "DELETE FROM currencies WHERE code = 'CHF'",
        "UPDATE products SET summary = 'x' WHERE slug = 'theme-pack'",
        "UPDATE product_prices SET amount = amount + 1",
        "DELETE FROM product_prices",
    )
    from cmsshop.models.store import CONTENT_TABLES

    with engine.begin() as conn:
        assert version(conn) > 0  # the fixture's products and prices moved it
        for sql in writes:
            before = version(conn)
            conn.execute(text(sql))
            assert version(conn) > before, sql
    # Every content table has all three triggers (the statements above sample them), and
    # on PostgreSQL a TRUNCATE bumps too.
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            before = version(conn)
            conn.execute(text("TRUNCATE product_prices"))
            assert version(conn) > before
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            rows = conn.execute(
                text(
                    "SELECT event_object_table, event_manipulation "
                    "FROM information_schema.triggers "
                    "WHERE trigger_name LIKE '%bumps_content_version'"
                )
            ).all()
            found = {(table, event.lower()) for table, event in rows}
        else:
            rows = conn.execute(
                text("SELECT tbl_name, name FROM sqlite_master WHERE type = 'trigger'")
            ).all()
            found = {
                (table, name.removeprefix(table + "_").split("_")[0])
                for table, name in rows
                if name.endswith("bumps_content_version")
            }
    assert found == {(t, e) for t in CONTENT_TABLES for e in ("insert", "update", "delete")}


def test_orm_writes_bump_the_version_in_their_transaction(dbsession, catalogue):
    def version():
        return dbsession.execute(text("SELECT version FROM content_versions")).scalar_one()

    start = version()
    add_product(dbsession, "third")
    moved = version()
    assert moved > start
    dbsession.rollback()
    from cmsshop.models import User

    dbsession.add(User(email="x@example.com", name="x", password_hash="x", role="customer"))
    dbsession.commit()
    assert version() == moved  # not content


def test_hits_and_misses_are_counted(app, catalogue):
    client = new_client(app)
    cache = app.registry["cmsshop.answer_cache"]
    warm(client, "/api/store/products")
    hits, misses = cache.hits, cache.misses
    client.get("/api/store/products")
    client.get("/api/store/products/site-guard")
    assert (cache.hits, cache.misses) == (hits + 1, misses + 1)


def test_ttl_zero_turns_the_cache_off(make_app, catalogue):
    app = make_app(**{"cmsshop.answer_cache_ttl": "0"})
    client = new_client(app)
    warm(client, "/api/store/products")
    count, _ = statements_during(app, lambda: client.get("/api/store/products"))
    assert count > 0
    assert "cmsshop.answer_cache" not in app.registry


# --- the class's rules, with a hand-turned clock -----------------------------------------


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def entry(cache, body=b"x"):
    now = cache.clock()
    return Entry([("Content-Type", "application/json")], body, '"e"', now + cache.ttl,
                 now + cache.ttl + cache.stale)  # fmt: skip


def test_one_caller_refreshes_an_expired_entry_while_the_others_get_it_stale():
    clock = Clock()
    cache = AnswerCache(ttl=10, stale=30, max_entries=10, max_bytes=10_000, clock=clock)
    key = ("/api/x", "", None)
    assert cache.lookup(key) == (None, True)
    cache.store(key, cache.generation, entry(cache, b"old"))
    assert cache.lookup(key)[0].body == b"old"
    clock.now += 11  # expired, within the stale window
    assert cache.lookup(key) == (None, True)  # this caller refreshes
    stale, refresh = cache.lookup(key)  # the others are served the old answer
    assert stale.body == b"old" and not refresh
    cache.store(key, cache.generation, entry(cache, b"new"))
    assert cache.lookup(key)[0].body == b"new"
    clock.now += 41  # past the stale window: never served
    assert cache.lookup(key) == (None, True)


def test_an_answer_computed_before_a_clear_is_not_stored():
    cache = AnswerCache(ttl=10, stale=30, max_entries=10, max_bytes=10_000, clock=Clock())
    key = ("/api/x", "", None)
    assert cache.lookup(key) == (None, True)
    generation = cache.generation
    cache.clear()  # a write committed while the answer was being computed
    cache.store(key, generation, entry(cache))
    assert not cache.entries and not cache.refreshing


def test_bounded_by_entries_and_bytes_least_recently_used_first():
    cache = AnswerCache(ttl=10, stale=30, max_entries=3, max_bytes=100_000, clock=Clock())
    for i in range(5):
        key = (f"/api/{i}", "", None)
        cache.lookup(key)
        cache.store(key, cache.generation, entry(cache))
        cache.lookup(("/api/0", "", None))  # keep 0 recently used
    assert list(cache.entries) == [("/api/3", "", None), ("/api/4", "", None), ("/api/0", "", None)]
    small = AnswerCache(ttl=10, stale=30, max_entries=100, max_bytes=8 * 1300, clock=Clock())
    for i in range(20):
        key = (f"/api/{i}", "", None)
        small.lookup(key)
        small.store(key, small.generation, entry(small, b"y" * 1000))
    assert small.bytes <= small.max_bytes and len(small.entries) < 20
    huge = ("/api/huge", "", None)
    small.lookup(huge)
    small.store(huge, small.generation, entry(small, b"z" * 2000))  # over an eighth
    assert huge not in small.entries


def test_the_key_is_counted_against_the_bytes():
    cache = AnswerCache(ttl=10, stale=30, max_entries=100, max_bytes=80_000, clock=Clock())
    for i in range(50):
        key = (f"/api/{i}", "q" * 9000, None)
        cache.lookup(key)
        cache.store(key, cache.generation, entry(cache))
        assert sum(len(k[1]) for k in cache.entries) <= cache.bytes <= cache.max_bytes
    assert 0 < len(cache.entries) < 10


def test_concurrent_lookups_elect_one_refresher():
    cache = AnswerCache(ttl=10, stale=30, max_entries=10, max_bytes=10_000, clock=Clock())
    key = ("/api/x", "", None)
    cache.lookup(key)
    cache.store(key, cache.generation, entry(cache))
    cache.clock.now += 11
    results = []
    barrier = threading.Barrier(8)

    def look():
        barrier.wait()
        results.append(cache.lookup(key)[1])

    threads = [threading.Thread(target=look) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False] * 7 + [True]
