"""The public catalogue: products, currencies, paging, search, ETag/304, and cost.

Everything runs through the real app (WebTest) on the real migrated database.
"""

from __future__ import annotations

import datetime as dt

import jsonschema_rs
import pytest
from helpers.store import add_currencies, add_product
from pyramid.request import Request
from sqlalchemy import event, insert, select

from cmsshop.models import Product, ProductPrice, Release, SubscriptionPlan
from cmsshop.util import utcnow
from cmsshop.views.shared.json import json_with_etag

# --- helpers -----------------------------------------------------------------------------


def add_release(dbsession, product, version, released_at):
    dbsession.add(
        Release(
            product_id=product.id,
            version=version,
            file_name=f"{product.slug}-{version}.zip",
            storage_path=f"releases/{product.id}/{version}",
            size=123,
            sha256="a" * 64,
            released_at=released_at,
        )
    )
    dbsession.commit()


@pytest.fixture
def catalogue(dbsession):
    add_currencies(dbsession)
    guard = add_product(
        dbsession,
        "site-guard",
        name="SiteGuard Pro",
        summary="A security plugin",
        prices={"EUR": 4900, "USD": 5400, "JPY": 7000, "GBP": 4100},
        licensed=True,
        max_activations=3,
        duration_days=365,
    )
    add_release(dbsession, guard, "1.0.0", utcnow() - dt.timedelta(days=30))
    add_release(dbsession, guard, "1.1.0", utcnow() - dt.timedelta(days=1))
    add_product(dbsession, "theme-pack", name="Theme Pack", summary="Twelve themes 100%")
    add_product(dbsession, "draft-thing", name="Draft Thing", published=False)
    add_product(dbsession, "old-thing", name="Old Thing", archived=True)
    return guard


def resolve_schema(doc: dict, path: str, method: str, status: int) -> jsonschema_rs.Validator:
    schema = doc["paths"][path][method]["responses"][str(status)]["content"]["application/json"][
        "schema"
    ]
    return jsonschema_rs.validator_for(
        {**schema, "components": doc["components"]}, validate_formats=True
    )


def assert_documented(testapp, path, method, status, body):
    doc = testapp.get("/api/openapi.json").json
    validator = resolve_schema(doc, path, method, status)
    errors = [e.message for e in validator.iter_errors(body)]
    assert not errors, errors


# --- products ----------------------------------------------------------------------------


def test_list_shows_published_products_only_with_prices_and_latest_release(testapp, catalogue):
    response = testapp.get("/api/store/products")
    body = response.json
    assert body["total"] == 2
    assert body["page"] == 1 and body["perPage"] == 20
    assert [p["slug"] for p in body["items"]] == ["site-guard", "theme-pack"]
    guard = body["items"][0]
    # Disabled currencies (GBP) are not on offer; JPY has no decimals.
    assert guard["prices"] == [
        {"currency": "EUR", "amount": 4900, "formatted": "€49.00"},
        {"currency": "JPY", "amount": 7000, "formatted": "¥7000"},
        {"currency": "USD", "amount": 5400, "formatted": "$54.00"},
    ]
    assert guard["licensing"] == {
        "licensed": True,
        "maxActivations": 3,
        "maxQuantity": 100,  # none set: the default of a licensed product
        "durationDays": 365,
        "features": [],
        "upgradeGroup": None,
        "tier": 0,
    }
    assert guard["latestRelease"]["version"] == "1.1.0"
    assert guard["descriptionHtml"] == "<p>About <strong>site-guard</strong></p>\n"
    assert body["items"][1]["latestRelease"] is None
    assert body["items"][1]["licensing"]["durationDays"] is None
    assert_documented(testapp, "/api/store/products", "get", 200, body)


def test_money_is_never_a_float(testapp, catalogue):
    raw = testapp.get("/api/store/products").text
    items = testapp.get("/api/store/products").json["items"]
    for item in items:
        for price in item["prices"]:
            assert type(price["amount"]) is int
    assert "49.0," not in raw and "4900.0" not in raw


def test_currency_param_filters_prices_and_rejects_unknown_or_disabled(testapp, catalogue):
    items = testapp.get("/api/store/products?currency=usd").json["items"]
    assert items[0]["prices"] == [{"currency": "USD", "amount": 5400, "formatted": "$54.00"}]
    assert items[1]["prices"] == []  # listed, but no USD price
    for bad in ("XXX", "GBP", "EU", "EURO", "€€€", "E1R", ""):
        response = testapp.get("/api/store/products", {"currency": bad}, status=422)
        assert response.json["code"] == "validation_failed"
        assert "currency" in response.json["errors"]
    response = testapp.get("/api/store/products/site-guard?currency=GBP", status=422)
    assert "currency" in response.json["errors"]
    single = testapp.get("/api/store/products/site-guard?currency=JPY").json
    assert single["prices"] == [{"currency": "JPY", "amount": 7000, "formatted": "¥7000"}]


def test_paging(testapp, catalogue):
    body = testapp.get("/api/store/products?page=2&perPage=1").json
    assert [p["slug"] for p in body["items"]] == ["theme-pack"]
    assert body == {**body, "page": 2, "perPage": 1, "total": 2}
    assert testapp.get("/api/store/products?page=3&perPage=1").json["items"] == []
    # A page far past the end is simply empty (no out-of-range OFFSET reaches the database).
    huge = testapp.get("/api/store/products", {"page": str(10**30), "perPage": "100"}).json
    assert huge["items"] == [] and huge["total"] == 2


def test_bad_paging_is_422(testapp, catalogue):
    for query in (
        "page=0",
        "page=-1",
        "page=x",
        "page=",
        "perPage=0",
        "perPage=101",
        "perPage=1.5",
        "perPage=",
        "page=1&page=2",
        "q=a&q=b",
        "currency=EUR&currency=USD",
    ):
        response = testapp.get(f"/api/store/products?{query}", status=422)
        assert response.json["code"] == "validation_failed", query
        assert response.content_type == "application/json"


def test_search_names_and_summaries_case_insensitively(testapp, catalogue):
    def slugs(q):
        return [p["slug"] for p in testapp.get("/api/store/products", {"q": q}).json["items"]]

    assert slugs("SITEGUARD") == ["site-guard"]
    assert slugs("security") == ["site-guard"]  # summary
    assert slugs("  theme  ") == ["theme-pack"]
    assert slugs("draft") == []  # unpublished
    assert slugs("old") == []  # archived
    # % and _ are literal characters, not wildcards.
    assert slugs("100%") == ["theme-pack"]
    assert slugs("%") == ["theme-pack"]
    assert slugs("_") == []
    assert testapp.get("/api/store/products", {"q": ""}).json["total"] == 2


def test_search_never_matches_across_name_and_summary(testapp, catalogue):
    # Name and summary are matched as one text with a separator no search can hold.
    items = testapp.get("/api/store/products", {"q": "SiteGuard ProA security"}).json["items"]
    assert items == []
    assert testapp.get("/api/store/products", {"q": "ProA"}).json["items"] == []


def test_total_follows_writes_made_outside_the_app(make_app, catalogue, engine):
    # The unsearched total is kept with the content version it was counted at; a write
    # by any other process (here plain SQL on another connection) moves the version.
    # The answer cache is off: every answer below is computed.
    from helpers.clients import new_client

    testapp = new_client(make_app(**{"cmsshop.answer_cache_ttl": "0"}))
    assert testapp.get("/api/store/products").json["total"] == 2
    assert testapp.get("/api/store/products?page=2").json["total"] == 2
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE products SET published = false WHERE slug = 'theme-pack'")
    body = testapp.get("/api/store/products").json
    assert body["total"] == 1 and [p["slug"] for p in body["items"]] == ["site-guard"]
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE products SET published = true WHERE slug = 'draft-thing'")
        conn.exec_driver_sql("UPDATE products SET published = true WHERE slug = 'theme-pack'")
    assert testapp.get("/api/store/products").json["total"] == 3


def test_hostile_search_is_422_not_500(testapp, catalogue):
    for q in ("a\x00b", "x" * 201, "tab\there", "\x1b[31m"):
        response = testapp.get("/api/store/products", {"q": q}, status=422)
        assert "q" in response.json["errors"]


def test_query_strings_that_are_not_utf8_are_400(testapp, catalogue):
    for url in (
        "/api/store/products?q=%ff",
        "/api/store/products?currency=%ff%fe%fd",
        "/api/store/products/site-guard?currency=%c3",
        "/api/store/products?page=%80",
    ):
        response = testapp.get(url, status=400)
        assert response.json["code"] == "malformed_query", url


def test_search_with_quotes_and_unicode(testapp, catalogue):
    for q in ("' OR 1=1 --", '"; DROP TABLE products; --', "Ünïcödé ☃", "\\"):
        assert testapp.get("/api/store/products", {"q": q}).json["items"] == []


def test_product_by_slug(testapp, catalogue):
    body = testapp.get("/api/store/products/site-guard").json
    assert body["slug"] == "site-guard"
    assert body["latestRelease"]["version"] == "1.1.0"
    assert len(body["prices"]) == 3
    assert_documented(testapp, "/api/store/products/{slug}", "get", 200, body)


ODD_SLUGS = [
    "draft-thing",
    "old-thing",
    "nope",
    "Site-Guard",
    "site guard",
    "..",
    "%2e%2e",
    "x" * 300,
    "%E2%98%83",
    "%F0%9F%98%80",
]


def test_unknown_unpublished_archived_or_odd_slugs_are_json_404(testapp, catalogue):
    for slug in ODD_SLUGS:
        response = testapp.get(f"/api/store/products/{slug}", status=404)
        assert response.content_type == "application/json"
        assert response.json["code"] in ("product_not_found", "not_found"), slug


def test_slugs_with_control_characters_are_refused_at_the_edge(testapp, catalogue):
    for slug in ("%00", "a%00b", "a%0ab", "%7f"):
        response = testapp.get(f"/api/store/products/{slug}", status=400)
        assert response.json["code"] == "malformed_request", slug


def test_etag_cache_control_and_304(testapp, catalogue):
    first = testapp.get("/api/store/products")
    etag = first.headers["ETag"]
    assert "max-age=60" in first.headers["Cache-Control"]
    again = testapp.get("/api/store/products", headers={"If-None-Match": etag}, status=304)
    assert again.body == b""
    assert again.headers["ETag"] == etag
    testapp.get("/api/store/products", headers={"If-None-Match": '"other"'}, status=200)
    detail = testapp.get("/api/store/products/site-guard")
    testapp.get(
        "/api/store/products/site-guard",
        headers={"If-None-Match": detail.headers["ETag"]},
        status=304,
    )
    currencies = testapp.get("/api/store/currencies")
    testapp.get(
        "/api/store/currencies", headers={"If-None-Match": currencies.headers["ETag"]}, status=304
    )


def test_a_response_a_view_prepared_gets_the_same_etag_answer(app):
    """json_with_etag on a response someone touched first (a cookie set) answers as on a
    new one, 200 and 304 alike, with the cookie kept and no header twice."""

    def answer(prepared: bool, if_none_match: str | None = None):
        request = Request.blank("/api/store/products")
        request.registry = app.registry
        if if_none_match:
            request.headers["If-None-Match"] = if_none_match
        if prepared:
            request.response.set_cookie("seen", "1")
        return json_with_etag(request, {"items": ["it's"]})

    def without_cookie(response):
        return sorted(pair for pair in response.headerlist if pair[0] != "Set-Cookie")

    fresh, prepared = answer(False), answer(True)
    assert (prepared.status_int, prepared.body) == (200, fresh.body)
    assert without_cookie(prepared) == without_cookie(fresh)
    assert len({name for name, _ in fresh.headerlist}) == len(fresh.headerlist)
    assert prepared.headers["Set-Cookie"].startswith("seen=1")

    etag = fresh.headers["ETag"]
    fresh, prepared = answer(False, etag), answer(True, etag)
    for response in fresh, prepared:
        assert (response.status_int, response.body) == (304, b"")
        # A 304 names no type and no length of its own (the length would be the 200's).
        assert "Content-Type" not in response.headers
        assert "Content-Length" not in response.headers
    assert without_cookie(prepared) == without_cookie(fresh)
    assert prepared.headers["Set-Cookie"].startswith("seen=1")


def test_etag_changes_when_the_catalogue_changes(testapp, catalogue, dbsession):
    etag = testapp.get("/api/store/products").headers["ETag"]
    product = dbsession.scalar(select(Product).where(Product.slug == "theme-pack"))
    product.name = "Theme Pack 2"
    dbsession.commit()
    response = testapp.get("/api/store/products", headers={"If-None-Match": etag}, status=200)
    assert response.headers["ETag"] != etag


def test_cache_max_age_is_a_setting(make_app, catalogue):
    from helpers.clients import new_client

    client = new_client(make_app(**{"cmsshop.public_max_age": "300"}))
    assert "max-age=300" in client.get("/api/store/products").headers["Cache-Control"]


def test_latest_release_is_the_newest_by_date_not_by_insertion(testapp, dbsession):
    add_currencies(dbsession)
    product = add_product(dbsession, "app")
    now = utcnow()
    add_release(dbsession, product, "2.0.0", now - dt.timedelta(days=1))
    add_release(dbsession, product, "1.9.9-backport", now - dt.timedelta(days=5))
    body = testapp.get("/api/store/products/app").json
    assert body["latestRelease"]["version"] == "2.0.0"


# --- currencies --------------------------------------------------------------------------


def test_currencies_lists_enabled_default_first(testapp, catalogue):
    body = testapp.get("/api/store/currencies").json
    assert [c["code"] for c in body["items"]] == ["EUR", "JPY", "USD"]
    assert body["items"][0] == {
        "code": "EUR",
        "name": "Euro",
        "symbol": "€",
        "decimals": 2,
        "default": True,
    }
    assert_documented(testapp, "/api/store/currencies", "get", 200, body)


def test_public_routes_refuse_unsafe_methods(testapp, catalogue):
    response = testapp.post_json("/api/store/products", {}, status=405)
    assert "GET" in response.headers["Allow"]
    testapp.delete("/api/store/products/site-guard", status=405)


# --- cost does not grow with the catalogue -----------------------------------------------


class StatementCounter:
    """Counts SQL statements sent on the app's own engine."""

    def __init__(self, engine):
        self.engine = engine
        self.statements: list[str] = []

    def _count(self, conn, cursor, statement, parameters, context, executemany):
        self.statements.append(statement)

    def __enter__(self):
        event.listen(self.engine, "before_cursor_execute", self._count)
        return self

    def __exit__(self, *exc):
        event.remove(self.engine, "before_cursor_execute", self._count)


def bulk_products(dbsession, start: int, count: int) -> None:
    """``count`` published products, each with two prices and two releases."""
    now = utcnow()
    rows = [
        {
            "slug": f"bulk-{i:05d}",
            "name": f"Bulk product {i:05d}",
            "summary": "bulk",
            "description": "Plain",
            "description_html": "<p>Plain</p>\n",
            "published": True,
            "archived": False,
            "licensed": bool(i % 2),
        }
        for i in range(start, start + count)
    ]
    dbsession.execute(insert(Product), rows)
    ids = dbsession.scalars(
        select(Product.id).where(Product.slug.in_([r["slug"] for r in rows]))
    ).all()
    dbsession.execute(
        insert(ProductPrice),
        [
            {"product_id": pid, "currency": c, "amount": 1000 + pid}
            for pid in ids
            for c in ("EUR", "USD")
        ],
    )
    dbsession.execute(
        insert(Release),
        [
            {
                "product_id": pid,
                "version": version,
                "file_name": "f.zip",
                "storage_path": f"releases/{pid}/{version}",
                "size": 1,
                "sha256": "b" * 64,
                "released_at": now - dt.timedelta(days=days),
            }
            for pid in ids
            for version, days in (("1.0", 10), ("2.0", 1))
        ],
    )
    # Every third sold as a subscription (one in six stopped selling so).
    dbsession.execute(
        insert(SubscriptionPlan),
        [
            {
                "product_id": pid,
                "interval": "month",
                "interval_count": 1 + pid % 2,
                "active": bool(pid % 2),
            }
            for pid in ids
            if pid % 3 == 0
        ],
    )
    dbsession.commit()


def count_statements(app, client, url):
    with StatementCounter(app.registry["cmsshop.engine"]) as counter:
        response = client.get(url)
    return len(counter.statements), response.json


COUNTED_URLS = [
    "/api/store/products?perPage=100",
    "/api/store/products?perPage=100&currency=USD",
    "/api/store/products?perPage=100&q=bulk",
    "/api/admin/products?perPage=100",
]


def test_list_costs_the_same_statements_for_10_and_1010_products(app, admin_app, dbsession):
    add_currencies(dbsession)
    bulk_products(dbsession, 0, 10)
    small = {}
    for url in COUNTED_URLS:
        small[url], body = count_statements(app, admin_app, url)
        assert len(body["items"]) == 10
        assert all(item["latestRelease"]["version"] == "2.0" for item in body["items"])
        assert all(item["prices"] for item in body["items"])

    bulk_products(dbsession, 10, 1000)
    for url in COUNTED_URLS:
        count, body = count_statements(app, admin_app, url)
        assert len(body["items"]) == 100 and body["total"] == 1010
        assert all(item["latestRelease"]["version"] == "2.0" for item in body["items"])
        assert all(item["prices"] for item in body["items"])
        plans = [item["subscription"] for item in body["items"]]
        assert {"interval": "month", "intervalCount": 2} in plans and None in plans
        # Lazy loading would cost one or more statements per product on the page.
        assert count == small[url], url
        assert count <= 12, url


def test_product_detail_costs_the_same_for_1_and_60_releases(app, testapp, dbsession):
    add_currencies(dbsession)
    few = add_product(dbsession, "few")
    many = add_product(dbsession, "many", prices={"EUR": 1, "USD": 2, "JPY": 3})
    add_release(dbsession, few, "1", utcnow())
    for i in range(60):
        add_release(dbsession, many, f"1.{i}", utcnow() - dt.timedelta(hours=i))
    few_count, _ = count_statements(app, testapp, "/api/store/products/few")
    many_count, body = count_statements(app, testapp, "/api/store/products/many")
    assert body["latestRelease"]["version"] == "1.0"
    assert few_count == many_count


def test_the_public_sql_reads_give_what_the_orm_reads_give(dbsession, engine):
    """The public reads the database builds (services.store.products: the HTML list's
    cards, public_products, and the API's bodies, written as JSON by the database,
    public_product_bodies and public_product_body) against the ORM's
    list_products/load_cards and views.store.api.product_body, field for field:
    products inserted out of name order, prices out of currency order (a disabled
    currency, one with no decimals and one with three among them), a product without a
    price or a release, one with its own quantity limit, a beta newer than the stable
    release, with and without a currency and a search."""
    import orjson

    from cmsshop.models import Currency
    from cmsshop.services.paging import PageRequest
    from cmsshop.services.store import products
    from cmsshop.views.shared.json import page_json, page_json_bytes
    from cmsshop.views.store.api import product_body

    add_currencies(dbsession)
    dbsession.add(Currency(code="KWD", name="Dinar", symbol="KD ", decimals=3, enabled=True))
    dbsession.commit()
    when = utcnow().replace(microsecond=250000)
    for slug, prices, fields in [
        ("zeta-tool", {"USD": 1999, "JPY": 2500, "EUR": 1799, "GBP": 1500, "KWD": 5}, {}),
        ("alpha-tool", {"JPY": 100, "KWD": 12345}, {"max_quantity": 7}),
        ("mid-tool", {}, {"licensed": False}),
        ("beta-tool", {"USD": 5, "EUR": 400000}, {"features": ["pro", "x"], "tier": 2}),
    ]:
        product = add_product(
            dbsession, slug, prices=prices, **{"licensed": True, "max_activations": 3, **fields}
        )
        if slug == "mid-tool":
            product.prices = []  # (add_product gives a product without prices one)
            dbsession.commit()
        else:
            add_release(dbsession, product, "1.0.0", when - dt.timedelta(days=2))
        plan = {"zeta-tool": ("month", 1, True), "alpha-tool": ("week", 3, True)}.get(
            slug, ("year", 1, False) if slug == "beta-tool" else None
        )  # beta-tool's is no longer sold
        if plan is not None:
            interval, count, active = plan
            dbsession.add(
                SubscriptionPlan(
                    product_id=product.id, interval=interval, interval_count=count, active=active
                )
            )
            dbsession.commit()
    zeta = dbsession.scalar(select(Product).where(Product.slug == "zeta-tool"))
    dbsession.add(
        Release(
            product_id=zeta.id, version="2.0.0-beta", file_name="z.zip", storage_path="z/2",
            size=7, sha256="b" * 64, released_at=when, channel="beta",
        )
    )  # fmt: skip
    dbsession.commit()

    for q, currency in [(None, None), (None, "JPY"), ("tool", None), ("ZETA", "USD")]:
        for per_page in (2, 10):
            for page in (1, 2, 3):
                request = PageRequest(page, per_page)
                expected = products.list_products(dbsession, request, q=q, currency=currency)
                cards = products.public_products(engine, request, q=q, currency=currency)
                assert cards.total == expected.total
                assert [product_body(c) for c in cards.items] == [
                    product_body(c) for c in expected.items
                ], (q, currency, per_page, page)
                found, items = products.public_product_bodies(
                    engine, request, q=q, currency=currency
                )
                assert orjson.loads(page_json_bytes(found, items)) == page_json(
                    expected, product_body
                ), (q, currency, per_page, page)
    listed = products.list_products(dbsession, PageRequest(1, 10)).items
    assert [c.product.slug for c in listed] == ["alpha-tool", "beta-tool", "mid-tool", "zeta-tool"]
    assert [p.currency for p in listed[3].prices] == ["EUR", "JPY", "KWD", "USD"]
    bodies = {b["slug"]: b for b in map(product_body, listed)}
    assert [p["formatted"] for p in bodies["zeta-tool"]["prices"]] == [
        "€17.99", "¥2500", "KD 0.005", "$19.99",
    ]  # fmt: skip
    assert bodies["alpha-tool"]["licensing"]["maxQuantity"] == 7
    assert bodies["mid-tool"]["licensing"]["maxQuantity"] == 1
    assert bodies["beta-tool"]["prices"][1]["formatted"] == "$0.05"
    assert bodies["mid-tool"]["latestRelease"] is None and bodies["mid-tool"]["prices"] == []
    assert bodies["zeta-tool"]["subscription"] == {"interval": "month", "intervalCount": 1}
    assert bodies["alpha-tool"]["subscription"] == {"interval": "week", "intervalCount": 3}
    assert bodies["beta-tool"]["subscription"] is None  # its plan is inactive
    assert bodies["mid-tool"]["subscription"] is None
    for card in listed:
        for currency in (None, "EUR", "KWD"):
            expected = product_body(
                products.load_cards(dbsession, [card.product], currency=currency)[0]
            )
            body = products.public_product_body(engine, card.product.slug, currency=currency)
            assert orjson.loads(body) == expected


def test_a_search_folds_case_as_the_database_does_on_every_path(
    testapp, dbsession, engine, database_url
):
    """A search matches ``<column>_folded LIKE lower(pattern)`` on PostgreSQL (what
    ILIKE answers, every script folded; migration 0029 keeps the lowered columns) and
    LIKE on SQLite (ASCII only): the public API, the public SQL reads and the ORM's
    list (the admin's) agree, for products and articles, and the folded columns follow
    an update."""
    import orjson

    from cmsshop.models import Article
    from cmsshop.services.docs import articles
    from cmsshop.services.paging import PageRequest
    from cmsshop.services.store import products

    add_currencies(dbsession)
    add_product(dbsession, "editeur", name="ÉDITEUR Pro", summary="Straße TOOLS")
    add_product(dbsession, "plain", name="Plain", summary="nothing")
    dbsession.add(
        Article(slug="guide", title="ÉTÉ Guide", summary="Über SEARCH", published=True,
                published_at=utcnow())
    )  # fmt: skip
    dbsession.commit()
    every_script = database_url.startswith("postgresql")

    def product_slugs(q):
        api = [p["slug"] for p in testapp.get("/api/store/products", {"q": q}).json["items"]]
        by_sql = products.public_products(engine, PageRequest(1, 20), q=q).items
        by_orm = products.list_products(dbsession, PageRequest(1, 20), q=q, public=False).items
        assert [c.product.slug for c in by_sql] == api
        assert [c.product.slug for c in by_orm] == api
        return api

    def article_slugs(q):
        api = [a["slug"] for a in testapp.get("/api/docs/articles", {"q": q}).json["items"]]
        _, by_sql = articles.public_article_bodies(engine, PageRequest(1, 20), q=q)
        assert [a["slug"] for a in orjson.loads(by_sql)] == api
        by_orm = articles.list_articles(dbsession, PageRequest(1, 20), q=q, public=False).items
        assert [a.slug for a in by_orm] == api
        return api

    assert product_slugs("tools") == ["editeur"]  # ASCII: every database
    assert product_slugs("PLAIN") == ["plain"]
    assert product_slugs("éditeur") == (["editeur"] if every_script else [])
    assert product_slugs("STRASSE") == []  # lower(), not a full case fold
    assert article_slugs("search") == ["guide"]
    assert article_slugs("été") == (["guide"] if every_script else [])
    assert article_slugs("über") == (["guide"] if every_script else [])

    product = dbsession.scalar(select(Product).where(Product.slug == "plain"))
    product.name = "RENAMED Ärger"
    dbsession.commit()
    assert product_slugs("renamed") == ["plain"]
    assert product_slugs("ärger") == (["plain"] if every_script else [])
    assert product_slugs("PLAIN") == []


def test_the_plan_a_product_is_sold_on_shows_at_the_next_request(testapp, admin_app, catalogue):
    """A product sold as a subscription says so in its JSON (the list and by slug), and a
    change of its plan shows at the next request: writes to subscription_plans bump the
    content version the answer cache checks (migration 0031)."""
    url, listed = "/api/store/products/site-guard", "/api/store/products"
    first = testapp.get(url)
    assert first.json["subscription"] is None
    assert [item["subscription"] for item in testapp.get(listed).json["items"]] == [None, None]
    put = "/api/admin/products/site-guard/subscription"
    admin_app.put_json(put, {"interval": "month", "intervalCount": 1}, status=201)
    body = testapp.get(url, headers={"If-None-Match": first.headers["ETag"]}, status=200).json
    assert body["subscription"] == {"interval": "month", "intervalCount": 1}
    assert_documented(testapp, "/api/store/products/{slug}", "get", 200, body)
    admin_app.put_json(put, {"interval": "year", "intervalCount": 1}, status=200)
    page = testapp.get(listed).json
    assert page["items"][0]["subscription"] == {"interval": "year", "intervalCount": 1}
    assert page["items"][1]["subscription"] is None  # theme-pack is bought once
    assert_documented(testapp, listed, "get", 200, page)
    assert admin_app.get("/api/admin/products/site-guard").json["subscription"] == {
        "interval": "year",
        "intervalCount": 1,
    }
    admin_app.put_json(put, {"interval": "year", "active": False}, status=200)
    assert testapp.get(url).json["subscription"] is None
    assert testapp.get(f"{url}?currency=EUR").json["subscription"] is None


def test_the_pages_written_by_the_database_keep_the_lists_order(engine, dbsession, testapp):
    """By name, whatever order the products were added in: every page of the API's list
    and of the HTML list's cards, as the database writes them, is in the ORM's order."""
    import random

    add_currencies(dbsession)
    names = [f"Product {i:02d}" for i in range(30)]
    random.Random(5).shuffle(names)  # ids ascending, names in no order
    for i, name in enumerate(names):
        add_product(dbsession, f"p-{i:02d}", name=name, summary="odd" if i % 3 else "even")
    by_name = [f"p-{names.index(f'Product {n:02d}'):02d}" for n in range(30)]
    seen = []
    for page in (1, 2, 3, 4, 5):
        body = testapp.get(f"/api/store/products?perPage=7&page={page}").json
        seen += [p["slug"] for p in body["items"]]
        html = testapp.get(f"/products?perPage=7&page={page}").text
        slugs = [s for s in by_name if f'href="/products/{s}"' in html]
        assert (
            sorted(slugs, key=lambda s: html.index(f'href="/products/{s}"'))
            == (by_name[(page - 1) * 7 : page * 7])
        )
    assert seen == by_name
    odd = [s for s in by_name if int(s[2:]) % 3]
    searched = testapp.get("/api/store/products?perPage=100&q=odd").json["items"]
    assert [p["slug"] for p in searched] == odd
