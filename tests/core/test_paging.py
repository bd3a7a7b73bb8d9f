"""Every list route pages the same way: found from the OpenAPI document (every GET with a
``page`` query parameter), each is asked for absurd pages and bad paging parameters.

A page past the end is an empty page (200), however large its number: the schema gives
``page`` no maximum, and the paging helper answers such a page without sending an
out-of-range OFFSET to the database (PostgreSQL refuses OFFSETs beyond 64 bits, SQLite
integers beyond 64 bits). Bad ``page``/``perPage`` values are a 422 JSON error.
"""

from __future__ import annotations

import hashlib

import pytest
from helpers.account_data import activate
from helpers.purchases import make_purchase
from helpers.store import create_published
from sqlalchemy import select

from cmsshop.models import Coupon, CouponRedemption, License, PaymentEvent, Subscription
from cmsshop.services.mail.outbox import enqueue
from cmsshop.services.paging import MAX_PER_PAGE, Page, PageRequest, fetch_page

# Every list route of the app; the first test keeps this in step with the document.
LIST_ROUTES = [
    "/api/store/products",
    "/api/docs/articles",
    "/api/admin/products",
    "/api/admin/articles",
    "/api/admin/tickets",
    "/api/admin/payment-events",
    "/api/admin/licenses",
    "/api/admin/mail",
    "/api/admin/coupons",
    "/api/admin/coupons/{code}/redemptions",
    "/api/admin/audit",
    "/api/admin/subscriptions",
    "/api/admin/webhooks/{id}/deliveries",
    "/api/dashboard/orders",
    "/api/dashboard/invoices",
    "/api/dashboard/downloads",
    "/api/dashboard/tickets",
    "/api/dashboard/licenses/{key}/activations",
]
HUGE_PAGES = [str(10**30), str(2**63), str(2**63 - 1), str(2**64), "9" * 200]
BAD_PAGING = [
    "perPage=0",
    f"perPage={MAX_PER_PAGE + 1}",
    "perPage=x",
    "perPage=",
    "perPage=-1",
    "perPage=1.5",
    "perPage=1&perPage=2",
    "page=0",
    "page=-1",
    "page=x",
    "page=",
    "page=1e3",
    "page=1&page=2",
    "page=%C2%B2",  # a superscript two
    "page=" + "9" * 5000,  # beyond Python's int() digit limit
]


def list_paths(testapp) -> list[str]:
    document = testapp.get("/api/openapi.json").json
    return sorted(
        path
        for path, item in document["paths"].items()
        if any(p.get("name") == "page" for p in item.get("get", {}).get("parameters", []))
    )


@pytest.fixture
def clients(app, testapp, admin_app, customer_app, customer, dbsession, storage_dir):
    """A client allowed on each prefix, and at least one item in every list."""
    create_published(admin_app, dbsession, {"slug": "paged", "name": "Paged"})
    admin_app.post_json(
        "/api/admin/articles", {"slug": "paged", "title": "Paged", "published": True}
    )
    purchase = make_purchase(dbsession, customer, storage_dir)
    license = customer_app.post(f"/api/dashboard/downloads/{purchase.entitlement.id}/license").json
    activate(app, license["key"], "paged.example.com", "install-paged-01", purchase.product.slug)
    admin_app.post_json(
        "/api/admin/coupons", {"code": "PAGED", "kind": "percent", "percentOff": 10}
    )
    dbsession.commit()  # a fresh snapshot: the app wrote since this session last read
    dbsession.add(
        CouponRedemption(
            coupon_id=dbsession.scalar(select(Coupon.id).where(Coupon.code == "PAGED")),
            order_id=purchase.order.id,
            user_id=customer.id,
            status="redeemed",
            discount=0,
            currency=purchase.order.currency,
        )
    )
    dbsession.commit()
    dbsession.add(
        Subscription(
            provider="cardprovider",
            provider_subscription_id="sub_paging",
            user_id=customer.id,
            order_id=purchase.order.id,
            license_id=dbsession.scalar(select(License.id).where(License.key == license["key"])),
            status="active",
            cancel_at_period_end=False,
        )
    )
    dbsession.commit()
    customer_app.post_json("/api/dashboard/tickets", {"subject": "Paging", "body": "Hello"})
    payload = '{"id": "evt_paging"}'
    dbsession.add(
        PaymentEvent(
            provider="cardprovider",
            event_id="evt_paging",
            event_type="charge.succeeded",
            payload_sha256=hashlib.sha256(payload.encode()).hexdigest(),
            payload=payload,
            status="processed",
        )
    )
    enqueue(
        dbsession,
        {"cmsshop.base_url": "http://localhost"},
        kind="account_exists",
        to="paged@example.com",
        subject="Paged",
        template="account_exists",
        context={},
        dedupe_key="paging:1",
    )
    dbsession.commit()
    endpoint = admin_app.post_json(
        "/api/admin/webhooks",
        {"url": "http://127.0.0.1:9/hook", "eventTypes": ["order.paid"]},
        status=201,
    ).json["id"]
    admin_app.post(f"/api/admin/webhooks/{endpoint}/test", status=202)  # one delivery
    clients = Clients({"/api/admin/": admin_app, "/api/dashboard/": customer_app, "/api/": testapp})
    clients.license_key = license["key"]
    clients.coupon_code = "PAGED"
    clients.endpoint_id = str(endpoint)
    return clients


class Clients(dict):
    """URL prefix -> the client allowed there; and the license key, coupon code and
    webhook endpoint list paths name."""

    license_key: str
    coupon_code: str
    endpoint_id: str


def client_for(clients, path):
    """The client allowed on ``path``, and the path with its ``{key}``, ``{code}`` and
    ``{id}`` filled in."""
    client = next(client for prefix, client in clients.items() if path.startswith(prefix))
    for name, value in (
        ("{key}", clients.license_key),
        ("{code}", clients.coupon_code),
        ("{id}", clients.endpoint_id),
    ):
        path = path.replace(name, value)
    return client, path


def test_the_document_lists_exactly_these_list_routes(testapp):
    names = {p if isinstance(p, str) else p.values[0] for p in LIST_ROUTES}
    assert set(list_paths(testapp)) == names


@pytest.mark.parametrize("path", LIST_ROUTES)
def test_every_list_has_items_on_its_first_page(clients, path):
    client, path = client_for(clients, path)
    body = client.get(path, status=200).json
    assert set(body) == {"items", "page", "perPage", "total"}
    assert (body["page"], body["perPage"]) == (1, 20)
    assert body["total"] >= 1 and len(body["items"]) == body["total"]
    one = client.get(path, {"page": "1", "perPage": "1"}).json
    assert len(one["items"]) == 1 and one["perPage"] == 1


@pytest.mark.parametrize("path", LIST_ROUTES)
def test_a_huge_page_is_an_empty_page_never_a_500(clients, path):
    client, path = client_for(clients, path)
    for page in HUGE_PAGES:
        for per_page in ("1", str(MAX_PER_PAGE)):
            body = client.get(path, {"page": page, "perPage": per_page}, status=200).json
            assert set(body) == {"items", "page", "perPage", "total"}
            assert body["items"] == [], page
            assert (body["page"], body["perPage"]) == (int(page), int(per_page))
            assert body["total"] >= 1, page


@pytest.mark.parametrize("path", LIST_ROUTES)
def test_bad_paging_parameters_are_422_json(clients, path):
    client, path = client_for(clients, path)
    for query in BAD_PAGING:
        response = client.get(f"{path}?{query}", status=422)
        assert response.content_type == "application/json", query
        assert response.json["code"] == "validation_failed", query
        assert set(response.json["errors"]) & {"page", "perPage"}, query


@pytest.mark.parametrize("path", LIST_ROUTES)
def test_a_query_string_that_is_not_utf8_is_400_json(clients, path):
    client, path = client_for(clients, path)
    response = client.get(f"{path}?page=%80", status=400)
    assert response.content_type == "application/json"
    assert response.json["code"] in {"malformed_query", "malformed_request"}


def test_fetch_page_stops_before_the_database_past_the_end(dbsession):
    """The helper itself: past the end, no OFFSET is ever sent."""
    from sqlalchemy import event, select

    from cmsshop.models import Product

    statements = []
    engine = dbsession.get_bind()
    record = lambda *args: statements.append(args[2])  # noqa: E731 - a listener
    event.listen(engine, "before_cursor_execute", record)
    try:
        page = fetch_page(dbsession, select(Product), PageRequest(2**63, MAX_PER_PAGE))
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert page == Page([], 2**63, MAX_PER_PAGE, 0)
    sent = [statement for statement in statements if statement.upper() != "BEGIN"]
    assert len(sent) == 1 and "OFFSET" not in sent[0].upper()
