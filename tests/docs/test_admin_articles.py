"""Content management of documentation articles (admin role, CSRF token)."""

from __future__ import annotations

import pytest
from helpers.clients import call_with_body

# Any edit: an unauthorised caller is answered before its body is looked at.
EDIT = {"title": "x"}


def article(**overrides):
    body = {
        "slug": "getting-started",
        "title": "Getting started",
        "summary": "Buy, download, activate",
        "category": "guides",
        "body": "## Buy\n\n[pay](javascript:alert(1)) <img src=x onerror=alert(1)>",
        "published": True,
    }
    body.update(overrides)
    return body


@pytest.fixture
def created(admin_app):
    return admin_app.post_json("/api/admin/articles", article(), status=201).json


CALLS = [
    ("get", "/api/admin/articles"),
    ("post", "/api/admin/articles"),
    ("get", "/api/admin/articles/getting-started"),
    ("patch", "/api/admin/articles/getting-started"),
    ("delete", "/api/admin/articles/getting-started"),
]


def test_access_rules(testapp, customer_app, other_customer_app, admin_app, created):
    for method, url in CALLS:
        assert (
            call_with_body(testapp, method, url, EDIT, status=401).json["code"]
            == "not_authenticated"
        )
        for client in (customer_app, other_customer_app):
            assert call_with_body(client, method, url, EDIT, status=403).json["code"] == "forbidden"
        if method != "get":
            response = call_with_body(
                admin_app, method, url, EDIT, headers={"X-CSRF-Token": "x"}, status=403
            )
            assert response.json["code"] == "csrf_failed"
    assert admin_app.get("/api/admin/articles/getting-started").json["title"] == "Getting started"


def test_create_renders_sanitised_html_and_sets_published_at(created, testapp):
    assert created["published"] is True and created["publishedAt"].endswith("Z")
    html = created["bodyHtml"]
    assert "<h2>Buy</h2>" in html
    assert "javascript:" not in html.replace("[pay](javascript:alert(1))", "")
    assert "<img" not in html and "&lt;img" in html
    public = testapp.get("/api/docs/articles/getting-started").json
    assert public["bodyHtml"] == html
    assert "published" not in public


def test_defaults_draft_general_category(admin_app, testapp):
    body = admin_app.post_json("/api/admin/articles", {"slug": "d", "title": "D"}, status=201).json
    assert body["category"] == "general"
    assert body["published"] is False and body["publishedAt"] is None
    assert body["body"] == "" and body["bodyHtml"] == ""
    testapp.get("/api/docs/articles/d", status=404)


def test_publishing_keeps_the_first_publication_date(admin_app, testapp, created):
    first = created["publishedAt"]
    admin_app.patch_json("/api/admin/articles/getting-started", {"published": False})
    testapp.get("/api/docs/articles/getting-started", status=404)
    assert testapp.get("/api/docs/articles").json["total"] == 0
    body = admin_app.patch_json("/api/admin/articles/getting-started", {"published": True}).json
    assert body["publishedAt"] == first
    testapp.get("/api/docs/articles/getting-started", status=200)


def test_patch_changes_only_what_is_sent(admin_app, created):
    body = admin_app.patch_json("/api/admin/articles/getting-started", {"body": "*new*"}).json
    assert body["bodyHtml"] == "<p><em>new</em></p>\n"
    assert body["title"] == created["title"] and body["category"] == "guides"
    body = admin_app.patch_json(
        "/api/admin/articles/getting-started", {"slug": "start", "category": "basics"}
    ).json
    assert body["slug"] == "start" and body["category"] == "basics"
    admin_app.get("/api/admin/articles/getting-started", status=404)
    admin_app.get("/api/admin/articles/start", status=200)


def test_validation(admin_app, created):
    for overrides in (
        {"bodyHtml": "<p>x</p>"},
        {"publishedAt": "2020-01-01T00:00:00Z"},
        {"slug": "Bad Slug"},
        {"category": "Not a slug"},
        {"category": ""},
        {"title": ""},
        {"title": "x" * 201},
        {"title": ["x"]},
        {"body": "\x00"},
        {"body": "x" * 64_001},
        {"summary": "\x07bell"},
        {"published": "true"},
    ):
        response = admin_app.post_json("/api/admin/articles", article(**overrides), status=422)
        assert response.json["code"] == "validation_failed", overrides
    for body in ({"bodyHtml": "x"}, {"title": None}, {"updatedAt": "x"}):
        admin_app.patch_json("/api/admin/articles/getting-started", body, status=422)
    admin_app.post("/api/admin/articles", b"{not json", content_type="application/json", status=400)


def test_multiline_text_keeps_tabs_and_line_breaks(admin_app):
    body = admin_app.post_json(
        "/api/admin/articles",
        article(slug="code", body="```\n\tindented\r\n```\n"),
        status=201,
    ).json
    assert "\tindented" in body["body"]


def test_duplicate_slug_is_409(admin_app, created):
    response = admin_app.post_json("/api/admin/articles", article(), status=409)
    assert response.json["code"] == "slug_taken"
    admin_app.post_json("/api/admin/articles", article(slug="other"), status=201)
    response = admin_app.patch_json(
        "/api/admin/articles/other", {"slug": "getting-started"}, status=409
    )
    assert response.json["code"] == "slug_taken"


def test_admin_list_has_drafts_and_filters(admin_app, created):
    admin_app.post_json(
        "/api/admin/articles",
        article(slug="draft", title="A draft", category="misc", published=False),
    )
    response = admin_app.get("/api/admin/articles")
    assert response.headers["Cache-Control"] == "private, no-store"
    assert [a["slug"] for a in response.json["items"]] == ["draft", "getting-started"]
    assert [
        a["slug"] for a in admin_app.get("/api/admin/articles?category=misc").json["items"]
    ] == ["draft"]
    assert admin_app.get("/api/admin/articles?q=DRAFT").json["total"] == 1
    admin_app.get("/api/admin/articles?category=A%20B", status=422)


def test_delete(admin_app, testapp, created):
    assert admin_app.delete("/api/admin/articles/getting-started").json == {
        "slug": "getting-started",
        "deleted": True,
    }
    admin_app.get("/api/admin/articles/getting-started", status=404)
    testapp.get("/api/docs/articles/getting-started", status=404)
    response = admin_app.delete("/api/admin/articles/getting-started", status=404)
    assert response.json["code"] == "article_not_found"
    for slug in ("UP", "x" * 200):
        admin_app.delete(f"/api/admin/articles/{slug}", status=404)
    # Control characters are refused at the edge, before the route.
    response = admin_app.delete("/api/admin/articles/%00", status=400)
    assert response.json["code"] == "malformed_request"


def test_the_longest_allowed_body_fits_the_body_limit_even_fully_escaped(admin_app):
    # 64,000 astral characters sent as \ud83d\ude00 escapes: 12 bytes each, ~768 kB.
    response = admin_app.post_json(
        "/api/admin/articles", article(slug="long", body="😀" * 64_000), status=201
    )
    assert len(response.json["body"]) == 64_000
