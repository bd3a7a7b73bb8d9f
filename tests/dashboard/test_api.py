"""Dashboard routes: orders, invoices, downloads, signed URLs and licenses, per customer."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from helpers.app import serve
from helpers.clients import new_client
from helpers.purchases import (
    add_license,
    http_login,
    make_purchase,
    openapi_validator,
    set_entitlement_status,
    write_release,
)
from pyramid.exceptions import ConfigurationError
from sqlalchemy import func, select

from cmsshop.models import Activation, Base, License
from cmsshop.util import utcnow

ODD_IDS = ["abc", "0", "-1", "1.5", "99999999999999999999", "2147483648", "%F0%9F%98%80", "1e3"]


@pytest.fixture
def purchase(dbsession, customer, storage_dir):
    return make_purchase(dbsession, customer, storage_dir)


@pytest.fixture
def other_purchase(dbsession, other_customer, storage_dir):
    return make_purchase(dbsession, other_customer, storage_dir)


# --- access ------------------------------------------------------------------------------


def test_every_route_needs_a_login(testapp):
    for method, path in [
        ("get", "/api/dashboard/orders"),
        ("get", "/api/dashboard/invoices"),
        ("get", "/api/dashboard/downloads"),
        ("get", "/api/dashboard/tickets"),
        ("post", "/api/dashboard/tickets"),
        ("post", "/api/dashboard/downloads/1/signed-url"),
        ("post", "/api/dashboard/downloads/1/license"),
    ]:
        response = getattr(testapp, method)(path, status=401)
        assert response.content_type == "application/json"
        assert response.json["code"] == "not_authenticated"


def test_posts_need_the_csrf_token(customer_app, purchase):
    for suffix in ("signed-url", "license"):
        path = f"/api/dashboard/downloads/{purchase.entitlement.id}/{suffix}"
        for token in ("", "not-the-token"):
            response = customer_app.post(path, headers={"X-CSRF-Token": token}, status=403)
            assert response.json["code"] == "csrf_failed"
        customer_app.post(path, status=200)


def test_module_disabled_answers_json_404(make_app):
    client = new_client(make_app(**{"cmsshop.modules": "store"}))
    for path in ("/api/dashboard/orders", "/api/downloads/abc", "/api/admin/tickets"):
        assert client.get(path, status=404).json["code"] == "module_disabled"


# --- orders and invoices -----------------------------------------------------------------


def test_orders_are_the_customers_own_newest_first(
    customer_app, other_customer_app, dbsession, customer, other_customer, storage_dir
):
    old = make_purchase(
        dbsession, customer, storage_dir, created_at=utcnow() - dt.timedelta(days=3), amount=100
    )
    new = make_purchase(dbsession, customer, storage_dir, amount=200)
    theirs = make_purchase(dbsession, other_customer, storage_dir, amount=300)

    body = customer_app.get("/api/dashboard/orders").json
    assert body["total"] == 2 and body["page"] == 1 and body["perPage"] == 20
    assert [o["number"] for o in body["items"]] == [new.order.number, old.order.number]
    first = body["items"][0]
    assert first == {
        "number": new.order.number,
        "status": "paid",
        "currency": "EUR",
        "total": 200,
        "discount": 0,
        "couponCode": None,
        # make_purchase writes a line as placed before quantities: one unit at its amount.
        "items": [
            {
                "product": new.product.slug,
                "name": new.product.name,
                "quantity": 1,
                "unitAmount": 200,
                "discount": 0,
                "amount": 200,
                # ... and from before taxes: all net.
                "net": 200,
                "tax": 0,
                "gross": 200,
            }
        ],
        "tax": 0,
        "taxDetails": None,
        "provider": "cardprovider",
        "createdAt": first["createdAt"],
        "paidAt": first["paidAt"],
        # No terms of sale were published: none were accepted.
        "termsVersion": None,
        "termsAcceptedAt": None,
    }
    assert first["createdAt"].endswith("Z") and first["paidAt"].endswith("Z")
    openapi_validator(customer_app, "/api/dashboard/orders", "get", "200").validate(body)

    theirs_body = other_customer_app.get("/api/dashboard/orders").json
    assert [o["number"] for o in theirs_body["items"]] == [theirs.order.number]


def test_order_and_invoice_lists_are_paged(customer_app, dbsession, customer, storage_dir):
    now = utcnow()
    for days in range(3):
        make_purchase(dbsession, customer, storage_dir, created_at=now - dt.timedelta(days=days))
    for path in ("/api/dashboard/orders", "/api/dashboard/invoices"):
        body = customer_app.get(path, params={"page": "2", "perPage": "2"}).json
        assert (body["page"], body["perPage"], body["total"], len(body["items"])) == (2, 2, 3, 1)
        assert customer_app.get(path, params={"page": "9"}).json["items"] == []
        for params in ({"page": "0"}, {"perPage": "101"}, {"page": "x"}, {"perPage": "-3"}):
            response = customer_app.get(path, params=params, status=422)
            assert response.json["code"] == "validation_failed"


def test_invoices_are_the_customers_own(
    customer_app, other_customer_app, dbsession, customer, other_customer, storage_dir
):
    mine = make_purchase(dbsession, customer, storage_dir, amount=4900)
    make_purchase(dbsession, customer, storage_dir, invoice=False)  # unpaid: no invoice
    theirs = make_purchase(dbsession, other_customer, storage_dir)

    body = customer_app.get("/api/dashboard/invoices").json
    assert body["total"] == 1
    invoice = body["items"][0]
    assert invoice == {
        "number": mine.invoice.number,
        "orderNumber": mine.order.number,
        "issuedAt": invoice["issuedAt"],
        "currency": "EUR",
        "total": 4900,
        # Stored as issued before quantities ({product, name, amount}), read as one unit,
        # and before taxes: all net at 0 %.
        "lines": [
            {
                "product": mine.product.slug,
                "name": mine.product.name,
                "quantity": 1,
                "unitAmount": 4900,
                "discount": 0,
                "net": 4900,
                "taxRate": "0",
                "tax": 0,
                "amount": 4900,
            }
        ],
        "tax": None,
    }
    assert invoice["number"].startswith(f"INV-{utcnow().year}-")
    openapi_validator(customer_app, "/api/dashboard/invoices", "get", "200").validate(body)
    other = other_customer_app.get("/api/dashboard/invoices").json
    assert [i["number"] for i in other["items"]] == [theirs.invoice.number]


# --- downloads ---------------------------------------------------------------------------


def test_downloads_list_shows_latest_release_and_flags(
    customer_app, other_customer_app, dbsession, customer, other_customer, storage_dir
):
    licensed = make_purchase(dbsession, customer, storage_dir, licensed=True)
    newer = write_release(
        dbsession,
        storage_dir,
        licensed.product,
        "1.1.0",
        b"newer build",
        released_at=utcnow() + dt.timedelta(minutes=1),
    )
    dbsession.commit()
    revoked = make_purchase(dbsession, customer, storage_dir, licensed=False)
    set_entitlement_status(dbsession, revoked, "revoked")
    no_release = make_purchase(dbsession, customer, storage_dir, content=None)
    make_purchase(dbsession, other_customer, storage_dir)

    body = customer_app.get("/api/dashboard/downloads").json
    assert body["total"] == 3
    by_id = {item["id"]: item for item in body["items"]}
    item = by_id[licensed.entitlement.id]
    assert item["product"] == licensed.product.slug
    assert item["name"] == licensed.product.name
    assert item["licensed"] is True and item["revoked"] is False and item["status"] == "active"
    assert item["latestRelease"]["version"] == "1.1.0"
    assert item["latestRelease"]["fileName"] == newer.file_name
    assert item["latestRelease"]["size"] == len(b"newer build")
    assert item["latestRelease"]["sha256"] == newer.sha256
    gone = by_id[revoked.entitlement.id]
    assert gone["revoked"] is True and gone["licensed"] is False and gone["status"] == "revoked"
    assert by_id[no_release.entitlement.id]["latestRelease"] is None
    openapi_validator(customer_app, "/api/dashboard/downloads", "get", "200").validate(body)

    assert other_customer_app.get("/api/dashboard/downloads").json["total"] == 1


def test_signed_url_is_absolute_fresh_and_short_lived(customer_app, purchase):
    path = f"/api/dashboard/downloads/{purchase.entitlement.id}/signed-url"
    before = utcnow()
    first = customer_app.post(path)
    second = customer_app.post(path).json
    assert first.headers["Cache-Control"] == "private, no-store"
    body = first.json
    assert set(body) == {"url", "expiresAt"}
    assert body["url"].startswith("http://localhost/api/downloads/")
    assert body["url"] != second["url"]  # a new nonce every call
    expires = dt.datetime.fromisoformat(body["expiresAt"].replace("Z", "+00:00"))
    assert before + dt.timedelta(seconds=590) <= expires <= utcnow() + dt.timedelta(seconds=601)
    openapi_validator(
        customer_app, "/api/dashboard/downloads/{id}/signed-url", "post", "200"
    ).validate(body)


def test_signed_url_ttl_and_base_url_come_from_settings(make_app, customer, purchase):
    client = new_client(
        make_app(
            **{"cmsshop.download_url_ttl": "60", "cmsshop.base_url": "https://shop.example.com/"}
        )
    )
    client.login(customer.email)
    body = client.post(f"/api/dashboard/downloads/{purchase.entitlement.id}/signed-url").json
    assert body["url"].startswith("https://shop.example.com/api/downloads/")
    expires = dt.datetime.fromisoformat(body["expiresAt"].replace("Z", "+00:00"))
    assert expires <= utcnow() + dt.timedelta(seconds=61)


def test_another_customers_or_unknown_download_is_404(
    customer_app, other_customer_app, purchase, other_purchase
):
    for suffix in ("signed-url", "license"):
        for client, entitlement in (
            (customer_app, other_purchase.entitlement),
            (other_customer_app, purchase.entitlement),
        ):
            path = f"/api/dashboard/downloads/{entitlement.id}/{suffix}"
            assert client.post(path, status=404).json["code"] == "download_not_found"
        for raw in [*ODD_IDS, "987654"]:
            response = customer_app.post(f"/api/dashboard/downloads/{raw}/{suffix}", status=404)
            assert response.content_type == "application/json"
            assert response.json["code"] == "download_not_found"


def test_revoked_is_410_and_on_hold_is_403(customer_app, dbsession, purchase):
    for suffix in ("signed-url", "license"):
        path = f"/api/dashboard/downloads/{purchase.entitlement.id}/{suffix}"
        set_entitlement_status(dbsession, purchase, "on_hold")
        assert customer_app.post(path, status=403).json["code"] == "download_on_hold"
        set_entitlement_status(dbsession, purchase, "revoked")
        assert customer_app.post(path, status=410).json["code"] == "download_revoked"
        set_entitlement_status(dbsession, purchase, "active")
        customer_app.post(path, status=200)


def test_signed_url_without_release_is_404(customer_app, dbsession, customer, storage_dir):
    purchase = make_purchase(dbsession, customer, storage_dir, content=None)
    response = customer_app.post(
        f"/api/dashboard/downloads/{purchase.entitlement.id}/signed-url", status=404
    )
    assert response.json["code"] == "release_not_available"


def test_signed_url_ignores_a_body_and_answers_only_post(customer_app, purchase):
    path = f"/api/dashboard/downloads/{purchase.entitlement.id}/signed-url"
    customer_app.post(path, params=b"{not json", content_type="application/json", status=200)
    response = customer_app.get(path, status=405)
    assert response.json["code"] == "method_not_allowed"
    assert "POST" in response.headers["Allow"]


# --- licenses ----------------------------------------------------------------------------


def test_license_returns_the_one_fulfilment_issued(customer_app, dbsession, purchase):
    license = add_license(dbsession, purchase)
    dbsession.add_all(
        [
            Activation(
                license_id=license.id,
                fingerprint="site-a",
                fingerprint_sha256="a" * 64,
                domain="a.example.com",
                last_validated_at=utcnow(),
            ),
            Activation(
                license_id=license.id,
                fingerprint="site-b",
                fingerprint_sha256="b" * 64,
                domain="b.example.com",
                active=False,
                deactivated_at=utcnow(),
            ),
        ]
    )
    dbsession.commit()
    path = f"/api/dashboard/downloads/{purchase.entitlement.id}/license"
    response = customer_app.post(path)
    body = response.json
    assert response.headers["Cache-Control"] == "private, no-store"
    assert body["key"] == license.key
    assert body["product"] == purchase.product.slug
    assert body["status"] == "active" and body["expiresAt"] is None
    assert body["maxActivations"] == 3
    assert [a["domain"] for a in body["activations"]] == ["a.example.com"]
    activation = body["activations"][0]
    assert activation["fingerprint"] == "site-a"
    assert activation["activatedAt"].endswith("Z") and activation["lastValidatedAt"].endswith("Z")
    openapi_validator(
        customer_app, "/api/dashboard/downloads/{id}/license", "post", "200"
    ).validate(body)
    assert customer_app.post(path).json == body


def test_license_is_issued_once_when_fulfilment_did_not(
    customer_app, dbsession, customer, storage_dir
):
    purchase = make_purchase(
        dbsession, customer, storage_dir, licensed=True, max_activations=2, duration_days=30
    )
    path = f"/api/dashboard/downloads/{purchase.entitlement.id}/license"
    first = customer_app.post(path).json
    second = customer_app.post(path).json
    assert first["key"] == second["key"]
    assert first["maxActivations"] == 2 and first["activations"] == []
    expires = dt.datetime.fromisoformat(first["expiresAt"].replace("Z", "+00:00"))
    assert utcnow() + dt.timedelta(days=29) < expires <= utcnow() + dt.timedelta(days=30)
    count = dbsession.scalar(
        select(func.count()).select_from(License).where(License.order_item_id == purchase.item.id)
    )
    assert count == 1


def test_unlicensed_product_or_unpaid_order_has_no_license(
    customer_app, dbsession, customer, storage_dir
):
    unlicensed = make_purchase(dbsession, customer, storage_dir, licensed=False)
    unpaid = make_purchase(dbsession, customer, storage_dir, order_status="pending")
    for purchase in (unlicensed, unpaid):
        response = customer_app.post(
            f"/api/dashboard/downloads/{purchase.entitlement.id}/license", status=404
        )
        assert response.json["code"] == "license_not_available"
    assert dbsession.scalar(select(func.count()).select_from(License)) == 0


def test_expired_license_reads_expired(customer_app, dbsession, purchase):
    license = add_license(dbsession, purchase)
    license.expires_at = utcnow() - dt.timedelta(days=1)
    dbsession.commit()
    body = customer_app.post(f"/api/dashboard/downloads/{purchase.entitlement.id}/license").json
    assert body["status"] == "expired"


def test_racing_license_requests_issue_exactly_one(app, dbsession, customer, storage_dir):
    """Threads against a real server: every request answers the same single license."""
    purchases = [make_purchase(dbsession, customer, storage_dir) for _ in range(3)]
    with serve(app) as base_url:
        clients = [http_login(base_url, customer.email) for _ in range(4)]
        for purchase in purchases:
            url = f"{base_url}/api/dashboard/downloads/{purchase.entitlement.id}/license"
            barrier = threading.Barrier(len(clients))
            results: list = [None] * len(clients)

            def race(index, client, url=url, barrier=barrier, results=results):
                barrier.wait()
                results[index] = client.post(url, timeout=60)

            threads = [threading.Thread(target=race, args=(i, c)) for i, c in enumerate(clients)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert [r.status_code for r in results] == [200] * len(clients), [
                r.text for r in results
            ]
            assert len({r.json()["key"] for r in results}) == 1
        for client in clients:
            client.close()
    dbsession.commit()
    for purchase in purchases:
        count = dbsession.scalar(
            select(func.count())
            .select_from(License)
            .where(License.order_item_id == purchase.item.id)
        )
        assert count == 1


# --- configuration, schema ---------------------------------------------------------------


def test_bad_settings_stop_start_up(make_app):
    for name, value in [
        ("cmsshop.download_delivery", "sendfile"),
        ("cmsshop.download_url_ttl", "0"),
        ("cmsshop.download_url_ttl", "ten"),
        ("cmsshop.tickets_per_hour", "0"),
        ("cmsshop.ticket_replies_per_hour", "0"),
    ]:
        with pytest.raises(ConfigurationError, match=name):
            make_app(**{name: value})


def test_openapi_documents_every_dashboard_route(testapp):
    paths = testapp.get("/api/openapi.json").json["paths"]
    expected = {
        "/api/dashboard/orders": {"get"},
        "/api/dashboard/invoices": {"get"},
        "/api/dashboard/downloads": {"get"},
        "/api/dashboard/downloads/{id}/signed-url": {"post"},
        "/api/dashboard/downloads/{id}/license": {"post"},
        "/api/dashboard/tickets": {"get", "post"},
        "/api/dashboard/tickets/{id}": {"get"},
        "/api/dashboard/tickets/{id}/messages": {"post"},
        "/api/downloads/{token}": {"get"},
        "/api/admin/tickets": {"get"},
        "/api/admin/tickets/{id}": {"get", "patch"},
        "/api/admin/tickets/{id}/messages": {"post"},
    }
    for path, methods in expected.items():
        assert set(paths[path]) == methods, path


def test_migration_matches_the_dashboard_models(engine):
    tables = {"support_tickets", "download_logs"}
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        diffs = compare_metadata(context, Base.metadata)

    def touches(diff) -> bool:
        text = repr(diff)
        return any(table in text for table in tables)

    assert [d for d in diffs if touches(d)] == []
