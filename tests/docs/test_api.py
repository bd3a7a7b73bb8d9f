"""Public documentation articles: list, search, category, detail, ETag/304, cost."""

from __future__ import annotations

import datetime as dt

import jsonschema_rs
import pytest
from helpers.docs import add_article
from sqlalchemy import event, insert, select, update

from cmsshop.models import Article
from cmsshop.util import utcnow


@pytest.fixture
def articles(dbsession):
    add_article(dbsession, "getting-started", title="Getting Started", days_ago=10)
    add_article(
        dbsession,
        "licensing-faq",
        title="Licensing FAQ",
        summary="Seats and staging sites",
        category="licensing",
        days_ago=2,
    )
    add_article(dbsession, "refunds", title="Refund policy", category="policies", days_ago=5)
    add_article(dbsession, "secret-draft", title="Secret draft", published=False)


def validator(testapp, path, status=200):
    doc = testapp.get("/api/openapi.json").json
    schema = doc["paths"][path]["get"]["responses"][str(status)]["content"]["application/json"]
    return jsonschema_rs.validator_for(
        {**schema["schema"], "components": doc["components"]}, validate_formats=True
    )


def test_list_published_newest_first(testapp, articles):
    body = testapp.get("/api/docs/articles").json
    assert [a["slug"] for a in body["items"]] == ["licensing-faq", "refunds", "getting-started"]
    assert body["total"] == 3
    first = body["items"][0]
    assert set(first) == {
        "slug",
        "title",
        "summary",
        "category",
        "body",
        "bodyHtml",
        "publishedAt",
        "updatedAt",
    }
    assert first["publishedAt"].endswith("Z")
    validator(testapp, "/api/docs/articles").validate(body)


def test_category_and_search(testapp, articles):
    def slugs(**params):
        return [a["slug"] for a in testapp.get("/api/docs/articles", params).json["items"]]

    assert slugs(category="licensing") == ["licensing-faq"]
    assert slugs(category="nothing-here") == []
    assert slugs(q="faq") == ["licensing-faq"]
    assert slugs(q="STAGING") == ["licensing-faq"]  # summary, any case
    assert slugs(q="secret") == []  # drafts are not public
    assert slugs(q="policy", category="policies") == ["refunds"]
    assert slugs(q="policy", category="guides") == []


def test_bad_query_is_422(testapp, articles):
    for params in (
        {"category": "Not A Slug"},
        {"category": "a\x00"},
        {"category": ""},
        {"category": ["a", "b"]},
        {"q": "x" * 201},
        {"q": "\x00"},
        {"page": "0"},
        {"perPage": "1000"},
    ):
        response = testapp.get("/api/docs/articles", params, status=422)
        assert response.json["code"] == "validation_failed"


def test_query_strings_that_are_not_utf8_are_400(testapp, admin_app, articles):
    for client, url in (
        (testapp, "/api/docs/articles?q=%ff"),
        (testapp, "/api/docs/articles?category=%fe"),
        (admin_app, "/api/admin/articles?q=%ff"),
        (admin_app, "/api/admin/products?q=%ff"),
    ):
        assert client.get(url, status=400).json["code"] == "malformed_query", url


def test_article_by_slug(testapp, articles):
    body = testapp.get("/api/docs/articles/licensing-faq").json
    assert body["bodyHtml"] == "<p>Body of <em>licensing-faq</em></p>\n"
    assert body["category"] == "licensing"
    validator(testapp, "/api/docs/articles/{slug}").validate(body)


def test_drafts_unknown_and_odd_slugs_are_json_404(testapp, articles):
    for slug in ("secret-draft", "nope", "UPPER", "x" * 200, "%E2%98%83", "a.b"):
        response = testapp.get(f"/api/docs/articles/{slug}", status=404)
        assert response.json["code"] in ("article_not_found", "not_found"), slug
    response = testapp.get("/api/docs/articles/%00", status=400)  # refused at the edge
    assert response.json["code"] == "malformed_request"


def test_etag_and_304(testapp, articles):
    for url in ("/api/docs/articles", "/api/docs/articles/refunds", "/api/docs/articles?q=faq"):
        first = testapp.get(url)
        assert first.headers["Cache-Control"].startswith("public")
        response = testapp.get(url, headers={"If-None-Match": first.headers["ETag"]}, status=304)
        assert response.body == b""


def test_article_list_cost_does_not_grow(app, testapp, dbsession):
    def bulk(start, count):
        now = utcnow()
        dbsession.execute(
            insert(Article),
            [
                {
                    "slug": f"a-{i:05d}",
                    "title": f"Article {i}",
                    "summary": "bulk",
                    "category": "guides",
                    "body": "x",
                    "body_html": "<p>x</p>\n",
                    "published": True,
                    "published_at": now - dt.timedelta(minutes=i),
                }
                for i in range(start, start + count)
            ],
        )
        dbsession.commit()

    def count(url):
        statements = []

        def listener(conn, cursor, statement, *args):
            statements.append(statement)

        engine = app.registry["cmsshop.engine"]
        event.listen(engine, "before_cursor_execute", listener)
        try:
            body = testapp.get(url).json
        finally:
            event.remove(engine, "before_cursor_execute", listener)
        return len(statements), body

    bulk(0, 10)
    small, body = count("/api/docs/articles?perPage=100&q=article")
    assert len(body["items"]) == 10
    bulk(10, 1000)
    large, body = count("/api/docs/articles?perPage=100&q=article")
    assert len(body["items"]) == 100
    assert body["items"][0]["slug"] == "a-00000"  # newest first
    assert small == large


def test_the_database_writes_the_bodies_article_body_writes(engine, dbsession):
    """The public list's items, written as JSON by the database
    (services.docs.articles.public_article_bodies), against views.docs.api.article_body
    of the ORM's articles, field for field: text JSON must escape (quotes, backslashes,
    control characters, non-ASCII and a character outside the BMP, HTML), times with
    microseconds and two in the same second, a published article without a publication
    time (an operator's SQL can leave one), every page, with and without a search and
    a category."""
    import orjson

    from cmsshop.services.docs import articles as service
    from cmsshop.services.paging import PageRequest
    from cmsshop.views.docs.api import article_body
    from cmsshop.views.shared.json import page_json, page_json_bytes

    now = utcnow().replace(microsecond=999_999)
    texts = ['He said "hi" \\ bye', "tab\tnew\nline\x01\x1f end", "Éé ü 日本 🚀", "<b>&amp;</b>"]
    for i, title in enumerate(texts * 2):
        add_article(
            dbsession, f"tricky-{i}", title=f"{title} {i}", summary=title, body=f"{title}\n\n*x*",
            category="odd" if i % 2 else "guides",
        )  # fmt: skip
        article = dbsession.scalar(select(Article).where(Article.slug == f"tricky-{i}"))
        article.published_at = now - dt.timedelta(seconds=i // 2, microseconds=i)
    dbsession.commit()
    dbsession.execute(update(Article).where(Article.slug == "tricky-3").values(published_at=None))
    add_article(dbsession, "draft", published=False)
    dbsession.commit()
    bodies = orjson.loads(service.public_article_bodies(engine, PageRequest(1, 20))[1])
    assert {b["slug"] for b in bodies} == {f"tricky-{i}" for i in range(8)}
    assert next(b for b in bodies if b["slug"] == "tricky-3")["publishedAt"] is None
    for q, category in [(None, None), ("É", None), ('"hi" \\', None), (None, "odd")]:
        for per_page, page in [(3, 1), (3, 2), (3, 3), (3, 4), (20, 1)]:
            request = PageRequest(page, per_page)
            expected = service.list_articles(dbsession, request, q=q, category=category)
            assert expected.total == (8 if (q, category) == (None, None) else 2 if q else 4)
            found, items = service.public_article_bodies(engine, request, q=q, category=category)
            assert orjson.loads(page_json_bytes(found, items)) == page_json(
                expected, article_body
            ), (q, category, per_page, page)


def test_each_module_works_without_the_other(make_app, articles):
    from helpers.clients import new_client

    docs_only = new_client(make_app(**{"cmsshop.modules": "docs"}))
    assert docs_only.get("/api/docs/articles").json["total"] == 3
    response = docs_only.get("/api/store/products", status=404)
    assert response.json["code"] == "module_disabled"
    docs_only.get("/api/admin/products", status=404)

    store_only = new_client(make_app(**{"cmsshop.modules": "store"}))
    assert store_only.get("/api/store/products").json["total"] == 0
    assert store_only.get("/api/docs/articles", status=404).json["code"] == "module_disabled"
    assert store_only.get("/api/admin/articles", status=404).json["code"] == "module_disabled"
    paths = store_only.get("/api/openapi.json").json["paths"]
    assert "/api/store/products" in paths and "/api/docs/articles" not in paths


def test_the_pages_written_by_the_database_keep_the_lists_order(engine, dbsession):
    """Newest first, whatever order the articles were added in: every page the database
    writes (its JSON array built over the page's ordered rows) lists them as the ORM's
    query does, with and without a search."""
    import random

    import orjson

    from cmsshop.services.docs import articles as service
    from cmsshop.services.paging import PageRequest

    now = utcnow()
    ages = list(range(30))
    random.Random(4).shuffle(ages)  # ids ascending, publication times in no order
    for i, age in enumerate(ages):
        article = add_article(dbsession, f"a-{i:02d}", summary="odd" if i % 3 else "even")
        article.published_at = now - dt.timedelta(hours=age)
    dbsession.commit()
    for q in (None, "odd"):
        for page in (1, 2, 3, 4, 5):
            request = PageRequest(page, 7)
            expected = service.list_articles(dbsession, request, q=q)
            _, items = service.public_article_bodies(engine, request, q=q)
            found = [body["slug"] for body in orjson.loads(items)]
            assert found == [a.slug for a in expected.items], (q, page)
    newest = sorted(range(30), key=lambda i: ages[i])[:7]
    assert [b["slug"] for b in orjson.loads(service.public_article_bodies(
        engine, PageRequest(1, 7))[1])] == [f"a-{i:02d}" for i in newest]  # fmt: skip
