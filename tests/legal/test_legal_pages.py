"""The legal pages through WebTest: the console publishes versions (never editing one),
the public /legal/{kind} page shows the newest, a kind never published answers a 404
page, the footer's ``legal_links`` lists only published kinds, and the admin JSON API
with its roles, CSRF and validation."""

from __future__ import annotations

import pytest
from helpers.clients import call_with_body, logged_in, page_client
from helpers.html import assert_error_page, errors_of, h1_of
from helpers.legal import publish_legal
from sqlalchemy import select

from cmsshop.models import AuditEntry, LegalDocument

HOSTILE = "## Hello\n\n<script>alert(1)</script>\n\n[x](javascript:alert(1))"


def form_to(page, action: str):
    return next(form for form in page.forms.values() if form.action == action)


def test_unpublished_kinds_are_404_pages_and_unknown_kinds_too(app):
    client = page_client(app)
    for path in ("/legal/terms", "/legal/privacy", "/legal/nonsense"):
        assert_error_page(client.get(path, status=404), 404)


def test_the_console_publishes_versions_and_the_public_page_shows_the_newest(app, admin, dbsession):
    client = logged_in(app, admin)
    listing = client.get("/admin/legal")
    assert h1_of(listing) == "Legal pages"
    assert [a["href"] for a in listing.html.select("tbody tr td:first-child a")] == [
        "/admin/legal/terms",
        "/admin/legal/privacy",
        "/admin/legal/imprint",
        "/admin/legal/refunds",
    ]
    editor = client.get("/admin/legal/terms")
    form = form_to(editor, "/admin/legal/terms")
    assert form["title"].value == "Terms of sale"
    form["body"] = HOSTILE
    preview = form.submit("action", value="preview", status=200)
    assert "<h2>Hello</h2>" in preview.text and "<script>alert" not in preview.text
    assert dbsession.scalar(select(LegalDocument)) is None  # a preview publishes nothing
    published = form_to(preview, "/admin/legal/terms").submit("action", value="publish")
    assert published.status_int == 303
    assert published.location.endswith("/admin/legal/terms")
    page = client.get("/legal/terms")
    assert h1_of(page) == "Terms of sale"
    assert "Version 1" in page.text
    assert "<script>alert" not in page.text and 'href="javascript:' not in page.text

    second = form_to(client.get("/admin/legal/terms"), "/admin/legal/terms")
    assert second["body"].value == HOSTILE  # the editor starts from the current text
    second["title"] = "Terms and conditions"
    second["body"] = "## Scope\n\nEvery order."
    second.submit("action", value="publish", status=303)
    page = page_client(app).get("/legal/terms")
    assert h1_of(page) == "Terms and conditions" and "Version 2" in page.text
    dbsession.commit()  # end the read snapshot of the check above
    versions = dbsession.scalars(select(LegalDocument).order_by(LegalDocument.version)).all()
    assert [(d.version, d.title) for d in versions] == [
        (1, "Terms of sale"),
        (2, "Terms and conditions"),
    ]
    assert versions[0].body == HOSTILE  # an older version is never changed
    assert versions[1].published_by == admin.id
    old = client.get("/admin/legal/terms/versions/1")
    assert "Version 1" in old.text or "version 1" in old.text
    assert "<h2>Hello</h2>" in old.text
    client.get("/admin/legal/terms/versions/9", status=404)
    client.get("/admin/legal/terms/versions/x", status=404)
    audit = dbsession.scalars(
        select(AuditEntry).where(AuditEntry.action == "legal.publish").order_by(AuditEntry.id)
    ).all()
    assert [entry.summary["version"] for entry in audit] == [1, 2]


def test_a_blank_form_is_refused_beside_its_fields(app, admin, dbsession):
    client = logged_in(app, admin)
    form = form_to(client.get("/admin/legal/privacy"), "/admin/legal/privacy")
    form["title"] = ""
    form["body"] = ""
    refused = form.submit("action", value="publish", status=422)
    assert set(errors_of(refused)) >= {"title", "body"}
    assert dbsession.scalar(select(LegalDocument)) is None


def test_only_admins_reach_the_console(app, customer):
    page_client(app).get("/admin/legal", status=303)
    client = logged_in(app, customer)
    client.get("/admin/legal", status=403)
    client.get("/admin/legal/terms", status=403)


def test_the_footer_links_only_published_pages(app, dbsession):
    def footer_links():
        footer = page_client(app).get("/").html.find("footer")
        return [a["href"] for a in footer.find_all("a") if a["href"].startswith("/legal/")]

    publish_legal(dbsession, "refunds", title="Refund policy", body="Within 14 days.")
    publish_legal(dbsession, "terms")
    assert footer_links() == ["/legal/terms", "/legal/refunds"]


# --- the admin JSON API ---------------------------------------------------------------------

CALLS = [
    ("get", "/api/admin/legal"),
    ("get", "/api/admin/legal/terms"),
    ("post", "/api/admin/legal/terms"),
]


def test_api_access_rules(testapp, customer_app, admin_app):
    body = {"title": "x", "body": "y"}
    for method, url in CALLS:
        assert call_with_body(testapp, method, url, body, status=401).json["code"] == (
            "not_authenticated"
        )
        assert call_with_body(customer_app, method, url, body, status=403).json["code"] == (
            "forbidden"
        )
    refused = admin_app.post_json(
        "/api/admin/legal/terms", body, headers={"X-CSRF-Token": "x"}, status=403
    )
    assert refused.json["code"] == "csrf_failed"


def test_api_publishes_and_lists_versions(admin_app, testapp):
    listed = admin_app.get("/api/admin/legal").json["items"]
    assert [(i["kind"], i["current"]) for i in listed] == [
        ("terms", None),
        ("privacy", None),
        ("imprint", None),
        ("refunds", None),
    ]
    first = admin_app.post_json(
        "/api/admin/legal/privacy", {"title": "Privacy", "body": HOSTILE}, status=201
    ).json
    assert first["version"] == 1 and first["url"] == "/legal/privacy"
    assert "<script>" not in first["bodyHtml"] and first["publishedAt"].endswith("Z")
    admin_app.post_json(
        "/api/admin/legal/privacy", {"title": "Privacy policy", "body": "New."}, status=201
    )
    shown = admin_app.get("/api/admin/legal/privacy").json
    assert shown["current"]["version"] == 2 and shown["current"]["title"] == "Privacy policy"
    assert [v["version"] for v in shown["versions"]] == [2, 1]
    assert testapp.get("/legal/privacy").status_int == 200


@pytest.mark.parametrize(
    "body",
    [
        {"title": "", "body": "x"},
        {"title": "x", "body": ""},
        {"title": "x"},
        {"title": "x", "body": "y", "extra": 1},
        {"title": 5, "body": "y"},
        {"title": "a\nb", "body": "y"},
    ],
)
def test_api_refuses_bad_bodies(admin_app, body):
    refused = admin_app.post_json("/api/admin/legal/terms", body, status=422)
    assert refused.json["code"] == "validation_failed" and refused.json["errors"]


def test_api_unknown_kind(admin_app):
    for method in ("get", "post"):
        answer = call_with_body(
            admin_app, method, "/api/admin/legal/cookies", {"title": "x", "body": "y"}, status=404
        )
        assert answer.json["code"] == "legal_page_not_found"


def test_the_demo_data_publishes_every_legal_page_once(dbsession):
    from cmsshop.services.legal.demo import seed_demo_legal

    assert len(seed_demo_legal(dbsession)) == 4
    assert seed_demo_legal(dbsession) == []
    dbsession.commit()
    from cmsshop.services.legal import documents

    links = documents.published_links(dbsession)
    assert [link.url for link in links] == [
        "/legal/terms",
        "/legal/privacy",
        "/legal/imprint",
        "/legal/refunds",
    ]
    assert "placeholder" in documents.latest(dbsession, "terms").body_html


def test_publishing_the_same_text_again_is_refused(app, admin, admin_app, dbsession):
    publish_legal(dbsession, "refunds", title="Refund policy", body="Within 14 days.")
    client = logged_in(app, admin)
    form = form_to(client.get("/admin/legal/refunds"), "/admin/legal/refunds")
    refused = form.submit("action", value="publish", status=422)
    assert "version 1" in refused.html.find(class_="form-errors").get_text()
    same = {"title": "Refund policy", "body": "Within 14 days."}
    answer = admin_app.post_json("/api/admin/legal/refunds", same, status=422).json
    assert "version 1" in answer["errors"]["body"]
    dbsession.commit()
    assert [d.version for d in dbsession.scalars(select(LegalDocument))] == [1]
