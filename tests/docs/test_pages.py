"""The docs pages (public list, categories, search, paging, article) and the admin article
editor (list, create, edit, preview, publish, delete), through WebTest: the JSON routes'
rules and sanitiser, per-field errors keeping the input, CSRF, roles, hostile input."""

from __future__ import annotations

import datetime as dt

import pytest
from helpers.clients import logged_in, page_client
from helpers.confirm import cancel_link, confirm, confirmation_of
from helpers.docs import add_article
from helpers.html import errors_of, title_of
from helpers.notices import flashed
from sqlalchemy import func, select

from cmsshop.models import Article
from cmsshop.services.docs.markdown import render_markdown
from cmsshop.util import utcnow

HOSTILE_SCRIPT = "Hello\n\n<script>alert('x')</script>\n\n[click](javascript:alert(1))"


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
        body="## Seats\n\nOne seat per *site*.",
    )
    add_article(dbsession, "refunds", title="Refund policy", category="policies", days_ago=5)
    add_article(dbsession, "secret-draft", title="Secret draft", published=False)


@pytest.fixture
def admin_client(app, admin):
    return logged_in(app, admin.email)


def listed_slugs(response) -> list[str]:
    return [link["href"].removeprefix("/docs/") for link in response.html.select(".docs-list h2 a")]


# --- public pages -------------------------------------------------------------------------


def test_docs_list_shows_published_articles_newest_first_with_categories(app, articles):
    response = page_client(app).get("/docs")
    assert response.content_type == "text/html"
    assert title_of(response).startswith("Documentation")
    assert len(response.html.find_all("h1")) == 1
    assert listed_slugs(response) == ["licensing-faq", "refunds", "getting-started"]
    assert "Secret draft" not in response.text
    categories = response.html.find("nav", class_="docs-categories")
    hrefs = [a["href"] for a in categories.find_all("a")]
    assert hrefs == [
        "/docs",
        "/docs?category=guides",
        "/docs?category=licensing",
        "/docs?category=policies",
    ]
    assert "Seats and staging sites" in response.text
    assert not response.html.find_all("script", src=False)
    assert not response.html.find_all(style=True)


def test_docs_list_by_category(app, articles):
    response = page_client(app).get("/docs?category=licensing")
    assert listed_slugs(response) == ["licensing-faq"]
    assert response.html.h1.get_text(strip=True) == "Documentation: Licensing"
    current = response.html.find("nav", class_="docs-categories").find(
        attrs={"aria-current": "page"}
    )
    assert current["href"] == "/docs?category=licensing"
    empty = page_client(app).get("/docs?category=nothing-here")
    assert listed_slugs(empty) == []
    assert "There are no articles in this category." in empty.text


def test_docs_search(app, articles):
    client = page_client(app)
    form = client.get("/docs").forms["docs-search"]
    form["q"] = "staging"
    response = form.submit()
    assert listed_slugs(response) == ["licensing-faq"]
    assert response.html.find("input", id="docs-q")["value"] == "staging"
    # A % typed by the visitor matches itself, not everything.
    response = client.get("/docs", {"q": "%"})
    assert listed_slugs(response) == []
    assert "No articles match “%”" in response.text
    # Within a category.
    # The form's "All categories" is an empty category: any.
    assert listed_slugs(client.get("/docs", {"q": "refund", "category": ""})) == ["refunds"]
    assert listed_slugs(client.get("/docs", {"q": "refund", "category": "guides"})) == []
    assert listed_slugs(client.get("/docs", {"q": "refund", "category": "policies"})) == ["refunds"]


def test_docs_paging_keeps_the_filters(app, dbsession):
    for number in range(5):
        add_article(dbsession, f"guide-{number}", days_ago=number)
    client = page_client(app)
    first = client.get("/docs", {"perPage": "2", "category": "guides"})
    assert listed_slugs(first) == ["guide-0", "guide-1"]
    assert "Page 1 of 3" in first.text
    second = first.click(linkid=None, href=r"page=2", index=0)
    assert listed_slugs(second) == ["guide-2", "guide-3"]
    assert "category=guides" in second.request.url
    past = client.get("/docs", {"page": "9"})
    assert listed_slugs(past) == [] and "Back to the first page" in past.text


def test_docs_empty(app):
    response = page_client(app).get("/docs")
    assert "No documentation is published yet." in response.text


def test_article_page_shows_the_sanitised_body_and_its_category(app, articles, dbsession):
    add_article(dbsession, "hostile", title="Hostile", body=HOSTILE_SCRIPT, category="guides")
    client = page_client(app)
    response = client.get("/docs/licensing-faq")
    assert title_of(response).startswith("Licensing FAQ")
    assert response.html.h1.get_text(strip=True) == "Licensing FAQ"
    prose = response.html.find(class_="prose")
    assert prose.find("h2").get_text() == "Seats"
    assert prose.find("em").get_text() == "site"
    assert response.html.find("a", href="/docs?category=licensing") is not None
    assert response.html.find("time").get_text() == (utcnow() - dt.timedelta(days=2)).strftime(
        "%Y-%m-%d"
    )
    hostile = client.get("/docs/hostile")
    assert "<script>alert" not in hostile.text
    assert "&lt;script&gt;" in hostile.text  # shown as text, never run
    assert not [a for a in hostile.html.find_all("a") if "javascript" in a.get("href", "")]
    assert not hostile.html.find_all("script", src=False)


@pytest.mark.parametrize(
    "path, status",
    [
        ("/docs/secret-draft", 404),
        ("/docs/no-such-article", 404),
        ("/docs/BAD%20SLUG", 404),
        ("/docs/" + "a" * 101, 404),
        ("/docs/%00", 400),
    ],
)
def test_unpublished_or_unknown_article_is_a_404_page(app, articles, path, status):
    response = page_client(app).get(path, status=status)
    assert response.content_type == "text/html"
    assert title_of(response).startswith("Not found" if status == 404 else "Malformed")
    assert "Secret draft" not in response.text


@pytest.mark.parametrize(
    "query",
    [
        "q=%00",
        "q=" + "x" * 201,
        "q=a&q=b",
        "category=Not%20A%20Slug",
        "category=%00",
        "page=0",
        "page=abc",
        "page=",
        "perPage=1000",
        "page=1&page=2",
        "q=%FF%FE",
    ],
)
def test_hostile_docs_queries_are_a_4xx_page(app, articles, query):
    response = page_client(app).get(f"/docs?{query}", status="4*")
    assert response.content_type == "text/html"
    assert "Traceback" not in response.text


def test_huge_page_number_is_an_empty_page(app, articles):
    response = page_client(app).get("/docs?page=99999999999999999999999")
    assert listed_slugs(response) == []


# --- admin: access --------------------------------------------------------------------------

ADMIN_PAGES = [
    "/admin/articles",
    "/admin/articles/new",
    "/admin/articles/getting-started/edit",
    "/admin/articles/getting-started/delete",
]
ADMIN_POSTS = [
    "/admin/articles/new",
    "/admin/articles/getting-started/edit",
    "/admin/articles/getting-started/publish",
    "/admin/articles/getting-started/unpublish",
    "/admin/articles/getting-started/delete",
    "/admin/articles/preview",
]


def test_anonymous_visitors_are_sent_to_log_in(app, articles):
    client = page_client(app)
    for path in ADMIN_PAGES:
        response = client.get(path, status=303)
        assert "/login?next=" in response.location, path


def test_customers_get_the_403_page_everywhere(app, articles, customer, dbsession):
    client = logged_in(app, customer.email)
    token = client.get("/docs").html.find("input", attrs={"name": "csrf_token"})
    token = token["value"] if token else client.get("/login").forms[0]["csrf_token"].value
    for path in ADMIN_PAGES:
        response = client.get(path, status=403)
        assert response.content_type == "text/html", path
    for path in ADMIN_POSTS:
        fields = {"csrf_token": token, "title": "Mine", "slug": "mine", "body": "x"}
        response = client.post(path, fields, status=403)
        assert response.content_type == "text/html", path
    dbsession.rollback()
    assert dbsession.scalar(select(func.count()).select_from(Article)) == 4
    assert dbsession.scalar(select(Article.published).where(Article.slug == "getting-started"))


def test_forms_without_the_csrf_token_are_refused(app, articles, admin_client, dbsession):
    for path in ADMIN_POSTS:
        fields = {"title": "Forged", "slug": "forged", "body": "x"}
        response = admin_client.post(path, fields, status=403)
        assert response.content_type == "text/html", path
        response = admin_client.post(path, {**fields, "csrf_token": "forged"}, status=403)
    dbsession.rollback()
    assert dbsession.scalar(select(func.count()).select_from(Article)) == 4
    assert dbsession.scalar(select(Article.published).where(Article.slug == "getting-started"))


# --- admin: list ----------------------------------------------------------------------------


def test_admin_list_shows_drafts_too_with_search_and_paging(app, articles, admin_client):
    response = admin_client.get("/admin/articles")
    assert title_of(response).startswith("Articles")
    assert response.html.find("a", attrs={"aria-current": "page"})["href"] == "/admin/articles"
    rows = response.html.select("tbody tr")
    titles = [row.find("a").get_text(strip=True) for row in rows]
    assert titles == ["Getting Started", "Licensing FAQ", "Refund policy", "Secret draft"]
    assert rows[3].find(class_="status").get_text() == "Draft"
    assert rows[0].find("a")["href"] == "/admin/articles/getting-started/edit"
    assert response.html.find("a", string="New article")["href"] == "/admin/articles/new"
    form = response.forms["articles-search"]
    form["q"] = "secret"
    found = form.submit()
    assert [r.find("a").get_text(strip=True) for r in found.html.select("tbody tr")] == [
        "Secret draft"
    ]
    paged = admin_client.get("/admin/articles?perPage=3&page=2")
    assert [r.find("a").get_text(strip=True) for r in paged.html.select("tbody tr")] == [
        "Secret draft"
    ]
    assert "Page 2 of 2" in paged.text
    none = admin_client.get("/admin/articles?q=zzz")
    assert "No article matches" in none.text


@pytest.mark.parametrize("query", ["q=%00", "category=BAD", "page=x", "perPage=0", "q=%FF"])
def test_admin_list_hostile_queries_are_a_4xx_page(app, admin_client, query):
    response = admin_client.get(f"/admin/articles?{query}", status="4*")
    assert response.content_type == "text/html"


# --- admin: editor --------------------------------------------------------------------------


def test_create_an_article_then_publish_it_onto_the_docs(app, admin_client, dbsession):
    page = admin_client.get("/admin/articles/new")
    assert title_of(page).startswith("New article")
    form = page.forms["article-form"]
    assert form["category"].value == "general"
    form["title"] = "Install guide"
    form["slug"] = "install-guide"
    form["category"] = "getting-started"
    form["summary"] = "From zip to running"
    form["body"] = "## Steps\n\n1. Unzip\n2. Run"
    response = form.submit("action", value="save", status=303)
    assert response.location.endswith("/admin/articles/install-guide/edit")
    assert flashed(response) == "article_created"
    edit = response.follow()
    assert "The article is saved." in edit.text
    assert edit.html.find(class_="status").get_text() == "Draft"
    # A draft is not on the site.
    page_client(app).get("/docs/install-guide", status=404)
    assert "Install guide" not in page_client(app).get("/docs").text
    publish = next(f for f in edit.forms.values() if f.action.endswith("/publish"))
    published = publish.submit(status=303).follow()
    assert "The article is published." in published.text
    docs = page_client(app).get("/docs?category=getting-started")
    assert listed_slugs(docs) == ["install-guide"]
    article = page_client(app).get("/docs/install-guide")
    assert article.html.find(class_="prose").find("ol") is not None
    dbsession.rollback()
    stored = dbsession.scalar(select(Article).where(Article.slug == "install-guide"))
    assert stored.published and stored.published_at is not None
    assert stored.body_html == render_markdown(stored.body)


def test_create_with_the_published_box_ticked(app, admin_client, admin_app):
    form = admin_client.get("/admin/articles/new").forms["article-form"]
    form["title"] = "Live at once"
    form["slug"] = "live"
    form["published"] = True
    form.submit("action", value="save", status=303)
    assert listed_slugs(page_client(app).get("/docs")) == ["live"]
    # The page's checkbox reading leaves the JSON route's strict boolean alone.
    admin_app.post_json("/api/admin/articles", {"slug": "json", "title": "J", "published": True})
    admin_app.post_json(
        "/api/admin/articles", {"slug": "j2", "title": "J", "published": "true"}, status=422
    )


def test_validation_errors_are_per_field_and_keep_the_input(app, admin_client, dbsession):
    form = admin_client.get("/admin/articles/new").forms["article-form"]
    form["title"] = ""
    form["slug"] = "Not A Slug"
    form["category"] = "Bad Category"
    form["summary"] = "s" * 501
    form["body"] = "Keep *this* body"
    form["published"] = True
    response = form.submit("action", value="save", status=422)
    errors = errors_of(response)
    assert set(errors) == {"title", "slug", "category", "summary"}
    assert response.html.find("input", id="f-slug")["value"] == "Not A Slug"
    assert response.html.find("input", id="f-slug")["aria-invalid"] == "true"
    assert response.html.find("textarea", id="f-body").get_text() == "Keep *this* body"
    assert response.html.find("input", id="f-published").has_attr("checked")
    assert response.html.find(class_="form-errors") is not None
    # Control characters are refused as the JSON API refuses them.
    form = response.forms["article-form"]
    form["title"] = "Fine"
    form["slug"] = "fine"
    form["category"] = "general"
    form["summary"] = "ok"
    form["body"] = "bad \x01 char"
    response = form.submit("action", value="save", status=422)
    assert set(errors_of(response)) == {"body"}
    dbsession.rollback()
    assert dbsession.scalar(select(func.count()).select_from(Article)) == 0


def test_a_taken_slug_is_an_error_on_the_slug_field(app, articles, admin_client, dbsession):
    form = admin_client.get("/admin/articles/new").forms["article-form"]
    form["title"] = "Duplicate"
    form["slug"] = "refunds"
    response = form.submit("action", value="save", status=409)
    assert "refunds" in errors_of(response)["slug"]
    assert response.html.find("input", id="f-title")["value"] == "Duplicate"
    # Renaming onto another's slug too.
    form = admin_client.get("/admin/articles/licensing-faq/edit").forms["article-form"]
    form["slug"] = "refunds"
    response = form.submit("action", value="save", status=409)
    assert "slug" in errors_of(response)
    dbsession.rollback()
    assert dbsession.scalar(select(func.count()).select_from(Article)) == 4


def test_edit_an_article_and_rename_it(app, articles, admin_client, dbsession):
    page = admin_client.get("/admin/articles/licensing-faq/edit")
    assert title_of(page).startswith("Edit Licensing FAQ")
    form = page.forms["article-form"]
    assert form["title"].value == "Licensing FAQ"
    assert form["body"].value == "## Seats\n\nOne seat per *site*."
    assert form["published"].checked
    form["title"] = "Licensing questions"
    form["slug"] = "licensing-questions"
    form["body"] = "New **body**"
    response = form.submit("action", value="save", status=303)
    assert response.location.endswith("/admin/articles/licensing-questions/edit")
    assert flashed(response) == "article_saved"
    assert "Your changes are saved." in response.follow().text
    public = page_client(app).get("/docs/licensing-questions")
    assert public.html.h1.get_text(strip=True) == "Licensing questions"
    assert public.html.find(class_="prose").find("strong").get_text() == "body"
    page_client(app).get("/docs/licensing-faq", status=404)
    # Unticking the box unpublishes (absent checkbox = false).
    form = admin_client.get("/admin/articles/licensing-questions/edit").forms["article-form"]
    form["published"] = False
    form["summary"] = "Kept through the confirm step"
    asked = form.submit("action", value="save", status=200)
    text = confirmation_of(asked)
    assert "Save the article “Licensing questions” as a draft" in text
    assert "its URL /docs/licensing-questions will answer 404" in text
    page_client(app).get("/docs/licensing-questions", status=200)  # nothing changed yet
    carried = asked.forms["confirm-form"]
    assert carried["action"].value == "save" and "published" not in carried.fields
    confirm(asked)
    page_client(app).get("/docs/licensing-questions", status=404)
    dbsession.rollback()
    assert dbsession.scalar(
        select(Article.summary).where(Article.slug == "licensing-questions")
    ) == ("Kept through the confirm step")


def test_edit_errors_keep_the_input(app, articles, admin_client, dbsession):
    form = admin_client.get("/admin/articles/refunds/edit").forms["article-form"]
    form["title"] = "x" * 201
    form["body"] = "Typed body"
    response = form.submit("action", value="save", status=422)
    assert set(errors_of(response)) == {"title"}
    assert response.html.find("textarea", id="f-body").get_text() == "Typed body"
    # The form still posts to the article's (unchanged) address.
    assert response.forms["article-form"].action == "/admin/articles/refunds/edit"
    dbsession.rollback()
    assert dbsession.scalar(select(Article.title).where(Article.slug == "refunds")) == (
        "Refund policy"
    )


def test_preview_renders_the_sanitised_body_without_saving(app, articles, admin_client, dbsession):
    form = admin_client.get("/admin/articles/new").forms["article-form"]
    form["title"] = ""  # a preview does not need the other fields yet
    form["slug"] = "preview-me"
    form["body"] = "## Hello\n\n**bold**\n\n" + HOSTILE_SCRIPT
    response = form.submit("action", value="preview", status=200)
    assert title_of(response).startswith("Preview")
    section = response.html.find(id="article-preview")
    assert not section.has_attr("hidden")
    body = section.find(id="article-preview-body")
    assert body.find("h2").get_text() == "Hello"
    assert body.find("strong").get_text() == "bold"
    assert body.find("script") is None
    assert not [a for a in body.find_all("a") if "javascript" in a.get("href", "")]
    assert "<script>alert" not in response.text
    assert not response.html.find_all("script", src=False)
    assert errors_of(response) == {}
    # The form keeps what was typed, and nothing was saved.
    assert response.html.find("input", id="f-slug")["value"] == "preview-me"
    assert "<script>alert('x')</script>" in response.html.find("textarea", id="f-body").get_text()
    # The same on an existing article's editor.
    form = admin_client.get("/admin/articles/refunds/edit").forms["article-form"]
    form["body"] = "*changed*"
    response = form.submit("action", value="preview", status=200)
    assert response.html.find(id="article-preview-body").find("em").get_text() == "changed"
    dbsession.rollback()
    assert dbsession.scalar(select(func.count()).select_from(Article)) == 4
    assert dbsession.scalar(select(Article.body).where(Article.slug == "refunds")) != "*changed*"


def test_preview_of_a_bad_body_is_a_field_error(app, admin_client):
    form = admin_client.get("/admin/articles/new").forms["article-form"]
    form["body"] = "nul \x00 here"
    response = form.submit("action", value="preview", status=422)
    assert "body" in errors_of(response)
    assert response.html.find(id="article-preview").has_attr("hidden")


def test_live_preview_endpoint_returns_the_same_sanitised_html(app, admin_client):
    token = admin_client.get("/admin/articles/new").forms["article-form"]["csrf_token"].value
    response = admin_client.post(
        "/admin/articles/preview", {"csrf_token": token, "body": HOSTILE_SCRIPT}
    )
    assert response.content_type == "text/html"
    assert response.text == render_markdown(HOSTILE_SCRIPT)
    assert "<script>" not in response.text
    response = admin_client.post(
        "/admin/articles/preview", {"csrf_token": token, "body": "x" * 64_001}, status=422
    )


def test_unpublish_and_delete_with_confirmation(app, articles, admin_client, dbsession):
    edit = admin_client.get("/admin/articles/refunds/edit")
    unpublish = next(f for f in edit.forms.values() if f.action.endswith("/unpublish"))
    asked = unpublish.submit(status=200)
    text = confirmation_of(asked)
    assert "Unpublish the article “Refund policy”" in text
    assert "its URL /docs/refunds will answer 404" in text
    assert cancel_link(asked) == "/admin/articles/refunds/edit"
    # The first post changed nothing: the page is still there.
    page_client(app).get("/docs/refunds", status=200)
    response = confirm(asked).follow()
    assert "it is a draft again" in response.text
    page_client(app).get("/docs/refunds", status=404)
    asked = response.click(description="Delete this article")
    assert title_of(asked).startswith("Delete “Refund policy”?")
    assert asked.html.h1.get_text(strip=True) == "Delete “Refund policy”?"
    text = confirmation_of(asked)
    assert "Delete the article “Refund policy” (refunds) for good" in text
    assert "it is a draft, so no page on the site changes" in text and "cannot be undone" in text
    # Nothing is deleted by looking at the confirmation page, nor by a post without confirm=1.
    token = asked.forms["confirm-form"]["csrf_token"].value
    again = admin_client.post("/admin/articles/refunds/delete", {"csrf_token": token})
    assert "cannot be undone" in confirmation_of(again)
    dbsession.rollback()
    assert dbsession.scalar(select(func.count()).select_from(Article)) == 4
    admin_client.get(cancel_link(asked), status=200)
    done = confirm(asked)
    assert done.location.endswith("/admin/articles")
    assert flashed(done) == "article_deleted"
    assert "The article is deleted." in done.follow().text
    dbsession.rollback()
    assert dbsession.scalar(select(Article).where(Article.slug == "refunds")) is None


def test_deleting_a_published_article_names_its_url(app, articles, admin_client, dbsession):
    asked = admin_client.get("/admin/articles/getting-started/delete")
    text = confirmation_of(asked)
    assert "its URL /docs/getting-started will answer 404" in text
    assert "unpublish it instead" in text
    form = asked.forms["confirm-form"]
    fields = {name: form[name].value for name in form.fields if name != "csrf_token"}
    admin_client.post(form.action, fields, status=403)
    page_client(app).get("/docs/getting-started", status=200)
    confirm(asked)
    page_client(app).get("/docs/getting-started", status=404)


@pytest.mark.parametrize("slug", ["no-such", "BAD", "a" * 101])
def test_admin_pages_of_unknown_articles_are_404(app, articles, admin_client, slug):
    token = admin_client.get("/admin/articles/new").forms["article-form"]["csrf_token"].value
    for suffix in ("edit", "delete"):
        response = admin_client.get(f"/admin/articles/{slug}/{suffix}", status=404)
        assert response.content_type == "text/html"
    for suffix in ("edit", "publish", "unpublish", "delete"):
        admin_client.post(f"/admin/articles/{slug}/{suffix}", {"csrf_token": token}, status=404)


def test_hostile_editor_input_is_refused_without_a_500(app, admin_client, dbsession):
    form = admin_client.get("/admin/articles/new").forms["article-form"]
    token = form["csrf_token"].value
    cases = [
        {"title": "a\x00b", "slug": "nul"},
        {"title": "T", "slug": "s", "published": "yes"},
        {"title": "T", "slug": "s", "body": "x" * 64_001},
    ]
    for fields in cases:
        response = admin_client.post(
            "/admin/articles/new", {"csrf_token": token, "action": "save", **fields}, status=422
        )
        assert response.content_type == "text/html"
    dbsession.rollback()
    assert dbsession.scalar(select(func.count()).select_from(Article)) == 0
    # Bytes that are not UTF-8: WebOb decodes a form body with replacement characters,
    # so this is stored as such, never a 500.
    response = admin_client.post(
        "/admin/articles/new",
        b"csrf_token=" + token.encode() + b"&title=%FF%FE&slug=x",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status_int < 500
