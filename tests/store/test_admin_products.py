"""Content management of products and release uploads (admin role, CSRF token)."""

from __future__ import annotations

import hashlib
import os
import threading

import pytest
from helpers.app import requires_postgresql
from helpers.clients import call_with_body, new_client
from helpers.store import create_published
from sqlalchemy import func, select

from cmsshop.models import Currency, License, Order, OrderItem, Product, Release

# Any edit: an unauthorised caller is answered before its body is looked at.
EDIT = {"name": "x"}


BOUNDARY = "cmsshop-test-boundary-7d1a"


@pytest.fixture
def currencies(dbsession):
    dbsession.add_all(
        [
            Currency(
                code="EUR", name="Euro", symbol="€", decimals=2, enabled=True, is_default=True
            ),
            Currency(code="USD", name="US Dollar", symbol="$", decimals=2, enabled=True),
            Currency(code="KWD", name="Dinar", symbol="KD", decimals=3, enabled=True),
        ]
    )
    dbsession.commit()


def product_body(**overrides):
    body = {
        "slug": "site-guard",
        "name": "SiteGuard",
        "summary": "Security",
        "description": "# SiteGuard\n\n<script>alert(1)</script> **bold**",
        # A new product is a draft: it is published once it has a release.
        "published": False,
        "licensing": {"licensed": True, "maxActivations": 3, "durationDays": 365},
        "prices": [{"currency": "EUR", "amount": 4900}, {"currency": "USD", "amount": 5400}],
    }
    body.update(overrides)
    return body


@pytest.fixture
def product(admin_app, currencies, dbsession):
    """SiteGuard, published (so with a stable release, 0.0.1, that has no file)."""
    return create_published(admin_app, dbsession, product_body(), version="0.0.1").json


def multipart_body(parts, boundary=BOUNDARY) -> bytes:
    """``parts``: (name, filename or None, content bytes); header values raw, unescaped."""
    out = b""
    for name, filename, content in parts:
        disposition = b'form-data; name="' + name.encode() + b'"'
        if filename is not None:
            raw = filename if isinstance(filename, bytes) else filename.encode("utf-8")
            disposition += b'; filename="' + raw + b'"'
        out += b"--" + boundary.encode() + b"\r\nContent-Disposition: " + disposition + b"\r\n"
        if filename is not None:
            out += b"Content-Type: application/octet-stream\r\n"
        out += b"\r\n" + content + b"\r\n"
    return out + b"--" + boundary.encode() + b"--\r\n"


def upload(client, slug, parts, status=201, boundary=BOUNDARY, **kwargs):
    return post_multipart(
        client,
        f"/api/admin/products/{slug}/releases",
        multipart_body(parts, boundary),
        status,
        boundary=boundary,
        **kwargs,
    )


def post_multipart(client, url, raw: bytes, status=201, boundary=BOUNDARY, **kwargs):
    """POST ``raw`` as it is (webtest's post() would re-encode a multipart body)."""
    content_type = kwargs.pop("content_type", f"multipart/form-data; boundary={boundary}")
    if kwargs.pop("expect_errors", False):
        status = None
        kwargs["expect_errors"] = True
    return client.request(
        url, method="POST", body=raw, content_type=content_type, status=status, **kwargs
    )


def files_under(root) -> set[str]:
    found = set()
    for folder, _, names in os.walk(root):
        for name in names:
            found.add(os.path.relpath(os.path.join(folder, name), root))
    return found


def race_admins(app, user, request, clients: int = 3) -> list:
    """Run ``request(client)`` from ``clients`` threads at once, each its own session."""
    logged_in = []
    for _ in range(clients):
        client = new_client(app)
        client.login(user.email)
        logged_in.append(client)
    barrier = threading.Barrier(clients)
    responses = []

    def run(client):
        barrier.wait()
        responses.append(request(client))

    threads = [threading.Thread(target=run, args=(c,)) for c in logged_in]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return responses


# --- access ------------------------------------------------------------------------------

ADMIN_CALLS = [
    ("get", "/api/admin/products"),
    ("post", "/api/admin/products"),
    ("get", "/api/admin/products/site-guard"),
    ("patch", "/api/admin/products/site-guard"),
    ("delete", "/api/admin/products/site-guard"),
    ("post", "/api/admin/products/site-guard/releases"),
]


def test_anonymous_gets_401_and_customer_403(testapp, customer_app, other_customer_app, product):
    for method, url in ADMIN_CALLS:
        response = call_with_body(testapp, method, url, EDIT, status=401)
        assert response.json["code"] == "not_authenticated", (method, url)
        for client in (customer_app, other_customer_app):
            response = call_with_body(client, method, url, EDIT, status=403)
            assert response.json["code"] == "forbidden", (method, url)


def test_csrf_token_is_required_on_unsafe_methods(admin_app, product):
    for method, url in ADMIN_CALLS:
        if method == "get":
            continue
        for token in ("", "wrong-token"):
            response = call_with_body(
                admin_app, method, url, EDIT, headers={"X-CSRF-Token": token}, status=403
            )
            assert response.json["code"] == "csrf_failed", (method, url, token)
    # Nothing changed.
    assert admin_app.get("/api/admin/products/site-guard").json["name"] == "SiteGuard"


# --- create ------------------------------------------------------------------------------


def test_create_renders_sanitised_markdown_and_formats_prices(admin_app, testapp, product):
    assert product["slug"] == "site-guard"
    assert product["published"] is True and product["archived"] is False
    assert "<script>" not in product["descriptionHtml"]
    assert "&lt;script&gt;" in product["descriptionHtml"]
    assert "<strong>bold</strong>" in product["descriptionHtml"]
    assert product["prices"] == [
        {"currency": "EUR", "amount": 4900, "formatted": "€49.00"},
        {"currency": "USD", "amount": 5400, "formatted": "$54.00"},
    ]
    assert product["licensing"] == {
        "licensed": True,
        "maxActivations": 3,
        "maxQuantity": None,
        "durationDays": 365,
        "features": [],
        "upgradeGroup": None,
        "tier": 0,
    }
    public = testapp.get("/api/store/products/site-guard").json
    assert public["descriptionHtml"] == product["descriptionHtml"]


def test_create_with_only_required_fields_is_an_unpublished_draft(admin_app, testapp, currencies):
    body = admin_app.post_json(
        "/api/admin/products", {"slug": "d", "name": "Draft"}, status=201
    ).json
    assert body["published"] is False
    assert body["prices"] == [] and body["latestRelease"] is None
    assert body["licensing"] == {
        "licensed": False,
        "maxActivations": None,
        "maxQuantity": None,
        "durationDays": None,
        "features": [],
        "upgradeGroup": None,
        "tier": 0,
    }
    testapp.get("/api/store/products/d", status=404)
    assert admin_app.get("/api/admin/products/d").json["slug"] == "d"


def test_three_decimal_currency_is_formatted_with_integer_arithmetic(admin_app, currencies):
    body = admin_app.post_json(
        "/api/admin/products",
        product_body(
            prices=[{"currency": "KWD", "amount": 1005}, {"currency": "EUR", "amount": 5}]
        ),
        status=201,
    ).json
    assert [p["formatted"] for p in body["prices"]] == ["€0.05", "KD1.005"]


BAD_BODIES = [
    ({"descriptionHtml": "<b>x</b>"}, "body"),  # HTML is never accepted
    ({"unknown": 1}, "body"),
    ({"slug": "Has Capitals"}, "slug"),
    ({"slug": "a/b"}, "slug"),
    ({"slug": ""}, "slug"),
    ({"slug": "x" * 101}, "slug"),
    ({"slug": "ok\n"}, "slug"),
    ({"slug": 5}, "slug"),
    ({"name": ""}, "name"),
    ({"name": 123}, "name"),
    ({"name": "x" * 201}, "name"),
    ({"name": "nul\x00byte"}, "name"),
    ({"name": "line\nbreak"}, "name"),
    ({"name": "\ud800"}, "name"),
    ({"summary": None}, "summary"),
    ({"description": "a\x00b"}, "description"),
    ({"description": "x" * 64_001}, "description"),
    ({"published": "yes"}, "published"),
    ({"published": 1}, "published"),
    ({"licensing": []}, "licensing"),
    ({"licensing": {"licensed": True, "extra": 1}}, "licensing"),
    ({"licensing": {"maxActivations": -1}}, "licensing.maxActivations"),
    ({"licensing": {"maxActivations": 10**12}}, "licensing.maxActivations"),
    ({"licensing": {"durationDays": 0}}, "licensing.durationDays"),
    ({"licensing": {"durationDays": 10**9}}, "licensing.durationDays"),
    ({"licensing": {"durationDays": 1.5}}, "licensing.durationDays"),
    ({"prices": {"EUR": 1}}, "prices"),
    ({"prices": [{"currency": "EUR", "amount": 49.0}]}, "prices.0.amount"),
    ({"prices": [{"currency": "EUR", "amount": "4900"}]}, "prices.0.amount"),
    ({"prices": [{"currency": "EUR", "amount": -1}]}, "prices.0.amount"),
    ({"prices": [{"currency": "EUR", "amount": True}]}, "prices.0.amount"),
    ({"prices": [{"currency": "EUR", "amount": 10**20}]}, "prices.0.amount"),
    ({"prices": [{"currency": "eur", "amount": 1}]}, "prices.0.currency"),
    ({"prices": [{"currency": "EUR"}]}, "prices.0.amount"),
    ({"prices": [{"currency": "EUR", "amount": 1}, {"currency": "EUR", "amount": 2}]}, "prices"),
    ({"prices": [{"currency": "XXX", "amount": 1}]}, "prices.0.currency"),  # unknown currency
]


def test_invalid_bodies_are_422_with_the_field_named(admin_app, currencies):
    for overrides, field in BAD_BODIES:
        response = admin_app.post_json("/api/admin/products", product_body(**overrides), status=422)
        assert response.json["code"] == "validation_failed"
        assert any(key == field or key.startswith(field) for key in response.json["errors"]), (
            overrides,
            response.json["errors"],
        )
    assert admin_app.get("/api/admin/products").json["total"] == 0


def test_malformed_json_wrong_type_and_huge_bodies(admin_app, currencies):
    url = "/api/admin/products"
    for raw in (b"{", b'{"slug": "a",', b"\xff\xfe", b"[]", b"null", b'"text"', b"NaN"):
        response = admin_app.post(url, raw, content_type="application/json", expect_errors=True)
        assert response.status_int in (400, 422), raw
    admin_app.post(url, b"slug=a", content_type="application/x-www-form-urlencoded", status=415)
    huge = b'{"slug": "a", "name": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    admin_app.post(url, huge, content_type="application/json", status=413)


def test_duplicate_slug_is_409_on_create_and_patch(admin_app, product):
    response = admin_app.post_json("/api/admin/products", product_body(), status=409)
    assert response.json["code"] == "slug_taken"
    admin_app.post_json("/api/admin/products", product_body(slug="other"), status=201)
    response = admin_app.patch_json("/api/admin/products/other", {"slug": "site-guard"}, status=409)
    assert response.json["code"] == "slug_taken"
    # Keeping one's own slug is not a clash.
    admin_app.patch_json("/api/admin/products/other", {"slug": "other"}, status=200)


@requires_postgresql  # see test_racing_default_switches_leave_exactly_one_default
def test_racing_creates_of_one_slug_give_one_201_and_one_409(app, admin, currencies):
    statuses = race_admins(
        app,
        admin,
        lambda client: client.post_json(
            "/api/admin/products", product_body(slug="racer"), expect_errors=True
        ),
    )
    assert sorted(r.status_int for r in statuses) == [201, 409, 409], statuses
    assert all(r.json["code"] == "slug_taken" for r in statuses if r.status_int == 409)


# --- read and update ---------------------------------------------------------------------


def test_admin_list_has_drafts_and_archived_and_is_never_cached(admin_app, dbsession, product):
    admin_app.post_json(
        "/api/admin/products", product_body(slug="draft", name="A draft", published=False)
    )
    admin_app.post_json("/api/admin/products", product_body(slug="gone", name="B gone"))
    admin_app.patch_json("/api/admin/products/gone", {"archived": True})
    response = admin_app.get("/api/admin/products")
    assert response.headers["Cache-Control"] == "private, no-store"
    assert [p["slug"] for p in response.json["items"]] == ["draft", "gone", "site-guard"]
    assert response.json["items"][1]["archived"] is True
    assert [p["slug"] for p in admin_app.get("/api/admin/products?q=DRAFT").json["items"]] == [
        "draft"
    ]
    assert admin_app.get("/api/admin/products?perPage=1&page=3").json["items"][0]["slug"] == (
        "site-guard"
    )
    admin_app.get("/api/admin/products", {"q": "a\x00"}, status=422)
    admin_app.get("/api/admin/products", {"perPage": "0"}, status=422)


def test_patch_changes_only_what_is_sent(admin_app, testapp, product):
    body = admin_app.patch_json("/api/admin/products/site-guard", {"name": "New name"}).json
    assert body["name"] == "New name"
    assert body["prices"] == product["prices"]
    assert body["licensing"] == product["licensing"]
    assert body["description"] == product["description"]

    body = admin_app.patch_json(
        "/api/admin/products/site-guard",
        {"licensing": {"durationDays": None}, "description": "*new*"},
    ).json
    assert body["licensing"] == {
        "licensed": True,
        "maxActivations": 3,
        "maxQuantity": None,
        "durationDays": None,
        "features": [],
        "upgradeGroup": None,
        "tier": 0,
    }
    assert body["descriptionHtml"] == "<p><em>new</em></p>\n"

    body = admin_app.patch_json("/api/admin/products/site-guard", {}).json
    assert body["name"] == "New name"


def test_patch_prices_replaces_the_list_in_place(admin_app, testapp, product):
    # EUR changes, USD goes, KWD arrives -- in one request.
    body = admin_app.patch_json(
        "/api/admin/products/site-guard",
        {"prices": [{"currency": "KWD", "amount": 15000}, {"currency": "EUR", "amount": 3900}]},
    ).json
    assert body["prices"] == [
        {"currency": "EUR", "amount": 3900, "formatted": "€39.00"},
        {"currency": "KWD", "amount": 15000, "formatted": "KD15.000"},
    ]
    response = admin_app.patch_json(
        "/api/admin/products/site-guard",
        {"prices": [{"currency": "ZZZ", "amount": 1}]},
        status=422,
    )
    assert "prices.0.currency" in response.json["errors"]
    # A failed request changes nothing.
    assert len(admin_app.get("/api/admin/products/site-guard").json["prices"]) == 2
    assert (
        admin_app.patch_json("/api/admin/products/site-guard", {"prices": []}).json["prices"] == []
    )


def test_patch_rejects_html_unknown_fields_and_bad_values(admin_app, product):
    for body in (
        {"descriptionHtml": "<script>"},
        {"latestRelease": None},
        {"updatedAt": "2020-01-01T00:00:00Z"},
        {"name": None},
        {"archived": "no"},
        {"licensing": {"maxActivations": "3"}},
        [],
    ):
        admin_app.patch_json("/api/admin/products/site-guard", body, status=422)


def test_unpublish_and_archive_hide_the_product(admin_app, testapp, product):
    admin_app.patch_json("/api/admin/products/site-guard", {"published": False})
    testapp.get("/api/store/products/site-guard", status=404)
    admin_app.patch_json("/api/admin/products/site-guard", {"published": True, "archived": True})
    testapp.get("/api/store/products/site-guard", status=404)
    assert testapp.get("/api/store/products").json["total"] == 0
    admin_app.patch_json("/api/admin/products/site-guard", {"archived": False})
    testapp.get("/api/store/products/site-guard", status=200)


def test_unknown_and_odd_slugs_are_404(admin_app, product):
    for method in ("get", "delete"):  # control characters: refused at the edge
        response = getattr(admin_app, method)("/api/admin/products/%00", status=400)
        assert response.json["code"] == "malformed_request"
    for slug in ("nope", "UPPER", "x" * 150, "%E2%98%83"):
        for method in ("get", "delete"):
            response = getattr(admin_app, method)(f"/api/admin/products/{slug}", status=404)
            assert response.json["code"] == "product_not_found"
        admin_app.patch_json(f"/api/admin/products/{slug}", {"name": "x"}, status=404)
        upload(admin_app, slug, [("version", None, b"1"), ("file", "a", b"x")], status=404)


# --- delete ------------------------------------------------------------------------------


def test_delete_without_orders_deletes_product_and_release_files(
    admin_app, testapp, product, storage_dir, dbsession
):
    upload(admin_app, "site-guard", [("version", None, b"1.0"), ("file", "a.zip", b"A" * 10)])
    upload(admin_app, "site-guard", [("version", None, b"2.0"), ("file", "b.zip", b"B" * 10)])
    assert len(files_under(storage_dir / "releases")) == 2
    body = admin_app.delete("/api/admin/products/site-guard").json
    assert body["deleted"] is True and body["archived"] is False
    admin_app.get("/api/admin/products/site-guard", status=404)
    testapp.get("/api/store/products/site-guard", status=404)
    assert files_under(storage_dir / "releases") == set()
    assert dbsession.scalar(select(Release.id)) is None


def test_delete_with_orders_archives_instead(admin_app, testapp, product, customer, dbsession):
    product_id = dbsession.scalar(select(Product.id).where(Product.slug == "site-guard"))
    order = Order(number="ORD-1", user_id=customer.id, currency="EUR", total=4900, provider="x")
    order.items = [
        OrderItem(product_id=product_id, product_slug="site-guard", name="SiteGuard", amount=4900)
    ]
    dbsession.add(order)
    dbsession.commit()

    body = admin_app.delete("/api/admin/products/site-guard").json
    assert body == {**body, "deleted": False, "archived": True}
    assert "archived" in body["message"]
    admin_body = admin_app.get("/api/admin/products/site-guard").json
    assert admin_body["archived"] is True and admin_body["published"] is False
    testapp.get("/api/store/products/site-guard", status=404)
    assert testapp.get("/api/store/products").json["total"] == 0
    # Deleting again keeps answering "archived" and never breaks the order.
    assert admin_app.delete("/api/admin/products/site-guard").json["archived"] is True
    assert dbsession.scalar(select(OrderItem.product_id)) == product_id


def test_delete_with_a_hand_issued_license_archives_instead(admin_app, product, dbsession):
    product_id = dbsession.scalar(select(Product.id).where(Product.slug == "site-guard"))
    dbsession.add(License(key="K-1", product_id=product_id, status="active", max_activations=1))
    dbsession.commit()
    assert admin_app.delete("/api/admin/products/site-guard").json["archived"] is True


# --- release upload ----------------------------------------------------------------------


def test_upload_stores_the_file_with_sha256_and_size(
    admin_app, testapp, product, storage_dir, dbsession
):
    content = os.urandom(300_000)
    body = upload(
        admin_app,
        "site-guard",
        [("version", None, b"1.4.2"), ("file", "siteguard-1.4.2.zip", content)],
    ).json
    assert body["version"] == "1.4.2"
    assert body["fileName"] == "siteguard-1.4.2.zip"
    assert body["size"] == len(content)
    assert body["sha256"] == hashlib.sha256(content).hexdigest()
    release = dbsession.scalar(select(Release).where(Release.version == "1.4.2"))
    path = storage_dir / release.storage_path
    assert path.read_bytes() == content
    product_id = dbsession.scalar(select(Product.id))
    assert release.storage_path.startswith(f"releases/{product_id}/")
    assert testapp.get("/api/store/products/site-guard").json["latestRelease"] == body
    # No temporary file is left behind.
    assert files_under(storage_dir) == {release.storage_path}


HOSTILE_NAMES = [
    "../../etc/passwd",
    "/etc/passwd",
    "..\\..\\windows\\system32\\evil.dll",
    "C:\\Users\\x\\evil.exe",
    "..",
    ".",
    ".htaccess",
    "",
    "a\x00b.zip",
    "line\r\nbreak.zip",
    "x" * 5000 + ".zip",
    "répertoire/été 2024.tar.gz",
    "<script>alert(1)</script>.zip",
    "%2e%2e%2fetc%2fpasswd",
    "con.zip",
]


def test_hostile_file_names_never_steer_the_storage_path(admin_app, product, storage_dir):
    before = files_under(storage_dir.parent)
    for index, name in enumerate(HOSTILE_NAMES):
        response = upload(
            admin_app,
            "site-guard",
            [("version", None, f"1.{index}".encode()), ("file", name, b"payload")],
            expect_errors=True,
        )
        assert response.status_int in (201, 400), (name, response.status_int)
        if response.status_int == 400:
            assert response.json["code"] == "malformed_multipart"
            continue
        file_name = response.json["fileName"]
        assert 0 < len(file_name) <= 255
        assert "/" not in file_name and "\\" not in file_name, file_name
        assert not file_name.startswith("."), file_name
        assert not any(ord(c) < 32 for c in file_name), file_name
        assert "<" not in file_name and ">" not in file_name
    added = files_under(storage_dir.parent) - before
    assert added, "some uploads must have been stored"
    for path in added:
        parts = path.split(os.sep)
        assert parts[:2] == ["files", "releases"] and len(parts) == 4, path
        assert len(parts[3]) == 32  # random hex chosen by the server
    with open("/etc/passwd", "rb") as handle:
        assert handle.read() != b"payload"


def test_display_names_are_tidy(admin_app, product):
    names = {}
    for index, name in enumerate(["../../etc/passwd", "", "x" * 300 + ".tar.gz", "été.zip"]):
        body = upload(
            admin_app,
            "site-guard",
            [("version", None, f"9.{index}".encode()), ("file", name, b"1")],
        ).json
        names[name] = body["fileName"]
    assert names["../../etc/passwd"] == "passwd"
    assert names[""] == "site-guard-9.1"
    assert len(names["x" * 300 + ".tar.gz"]) == 255 and names["x" * 300 + ".tar.gz"].endswith(".gz")
    assert names["été.zip"] == "été.zip"


def test_duplicate_version_is_409_and_leaves_no_file(admin_app, product, storage_dir):
    upload(admin_app, "site-guard", [("version", None, b"1.0"), ("file", "a", b"first")])
    stored = files_under(storage_dir)
    # Version before the file: refused before any byte is stored.
    response = upload(
        admin_app, "site-guard", [("version", None, b"1.0"), ("file", "a", b"x")], status=409
    )
    assert response.json["code"] == "version_exists"
    # File before the version: the bytes are streamed, then thrown away.
    response = upload(
        admin_app, "site-guard", [("file", "a", b"x" * 1000), ("version", None, b"1.0")], status=409
    )
    assert response.json["code"] == "version_exists"
    assert files_under(storage_dir) == stored


@requires_postgresql  # see test_racing_default_switches_leave_exactly_one_default
def test_racing_uploads_of_one_version_store_one_file(app, admin, product, storage_dir):
    def send(client):
        body = multipart_body([("version", None, b"7.0"), ("file", "f", os.urandom(50_000))])
        return post_multipart(
            client, "/api/admin/products/site-guard/releases", body, expect_errors=True
        )

    responses = race_admins(app, admin, send)
    assert sorted(r.status_int for r in responses) == [201, 409, 409]
    assert len(files_under(storage_dir)) == 1


def test_upload_validation(admin_app, product, storage_dir):
    def refused(parts, field):
        response = upload(admin_app, "site-guard", parts, status=422)
        assert field in response.json["errors"], response.json

    refused([("file", "a.zip", b"x")], "version")
    refused([("version", None, b"1.0")], "file")
    refused([("version", None, b"1.0"), ("file", "a.zip", b"")], "file")
    for version in (b"", b"../1", b"1/2", b"-1", b"x" * 51, b"1.0\x00", b"1 0", b"\xff\xfe"):
        refused([("version", None, version), ("file", "a.zip", b"x")], "version")
    refused(
        [("version", None, b"1"), ("file", "a", b"x"), ("file", "b", b"y")],
        "file",
    )
    refused([("version", None, b"1"), ("other", None, b"x"), ("file", "b", b"y")], "other")
    assert files_under(storage_dir) == set()


def test_upload_needs_multipart(admin_app, product):
    url = "/api/admin/products/site-guard/releases"
    response = admin_app.post_json(url, {"version": "1", "file": "x"}, status=415)
    assert response.json["code"] == "unsupported_media_type"
    response = post_multipart(admin_app, url, b"x", 400, content_type="multipart/form-data")
    assert response.json["code"] == "malformed_multipart"
    for raw in (
        b"garbage",
        multipart_body([("version", None, b"1"), ("file", "a", b"x")])[:-20],  # truncated
        b"--" + BOUNDARY.encode() + b"\r\nNo-Colon-Header\r\n\r\nx\r\n--" + BOUNDARY.encode(),
        b"--" + BOUNDARY.encode() + b"\r\nContent-Disposition: form-data; name=\xff\r\n\r\n",
    ):
        response = post_multipart(admin_app, url, raw, 400)
        assert response.json["code"] == "malformed_multipart"


def test_upload_size_limit(make_app, admin, currencies, storage_dir):
    app = make_app(**{"cmsshop.max_upload_bytes": "4096"})
    client = new_client(app)
    client.login(admin.email)
    client.post_json("/api/admin/products", product_body(), status=201)
    response = upload(
        client,
        "site-guard",
        [("version", None, b"1"), ("file", "big.zip", b"x" * 5000)],
        status=413,
    )
    assert response.json["code"] == "payload_too_large"
    upload(client, "site-guard", [("version", None, b"1"), ("file", "ok.zip", b"x" * 3000)])
    assert len(files_under(storage_dir)) == 1


def test_release_writer_stops_at_the_limit_and_cleans_up(storage_dir):
    from cmsshop.errors import PayloadTooLarge
    from cmsshop.services.store.releases import ReleaseWriter

    writer = ReleaseWriter(str(storage_dir), max_bytes=10)
    writer.write(b"12345")
    with pytest.raises(PayloadTooLarge):
        writer.write(b"678901")
    writer.discard()
    assert files_under(storage_dir) == set()


def test_release_channel_and_changelog(admin_app, testapp, product, dbsession):
    """A release has a channel (stable by default) and a Markdown changelog rendered
    through the docs sanitiser; the store's latest release is the newest stable one."""
    stable = upload(
        admin_app,
        "site-guard",
        [
            ("version", None, b"1.0.0"),
            ("changelog", None, b"## Fixed\n\n- login <script>alert(1)</script>"),
            ("file", "a.zip", b"one"),
        ],
    ).json
    assert stable["channel"] == "stable"
    assert "<h2>Fixed</h2>" in stable["changelogHtml"]
    assert "<script>" not in stable["changelogHtml"]
    beta = upload(
        admin_app,
        "site-guard",
        [("version", None, b"2.0.0b1"), ("channel", None, b"beta"), ("file", "b.zip", b"two")],
    ).json
    assert beta["channel"] == "beta" and beta["changelogHtml"] == ""
    # The newer beta is not the store's latest release.
    latest = testapp.get("/api/store/products/site-guard").json["latestRelease"]
    assert latest["version"] == "1.0.0"


@pytest.mark.parametrize(
    "parts, field",
    [
        ([("channel", None, b"nightly")], "channel"),
        ([("changelog", None, b"a\x00b")], "changelog"),
        ([("changelog", None, b"x" * 20_001)], "changelog"),
        ([("changelog", None, b"\xff\xfe")], "changelog"),
        ([("channel", None, b"beta"), ("channel", None, b"beta")], "channel"),
    ],
)
def test_bad_channel_or_changelog_is_refused(admin_app, product, dbsession, parts, field):
    response = upload(
        admin_app,
        "site-guard",
        [("version", None, b"1.0.0"), *parts, ("file", "a.zip", b"one")],
        status=422,
    )
    assert field in response.json["errors"]
    # Only the fixture's release (the one it was published with).
    assert dbsession.scalar(select(func.count()).select_from(Release)) == 1
