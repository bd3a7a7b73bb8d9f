"""Caching and sniffing headers on every answer: an answer shaped by the caller's session
(the user, a CSRF token, an account's or the admin's data, a 401 saying there is none)
is ``Cache-Control: private, no-store``; public catalogue and docs answers keep their
public caching; and every answer, JSON, page or error, says ``nosniff``."""

from __future__ import annotations

import re

import pytest
from helpers.clients import logged_in, new_client, page_client
from helpers.coupons import make_coupon
from helpers.docs import add_article
from helpers.support import open_ticket

from cmsshop.models import ErrorRecord, Subscription, SubscriptionPlan
from cmsshop.services.support.codes import new_support_code

# Routes that answer about the caller, whatever the OpenAPI document says of them.
SESSION_PREFIXES = ("/api/admin/", "/api/dashboard/", "/api/auth/session", "/api/bootstrap")
PARAMETER = re.compile(r"\{([^}]+)\}")


def assert_nosniff(response) -> None:
    assert response.headers.get("X-Content-Type-Options") == "nosniff", (
        response.request.path_qs,
        response.status,
    )


def assert_private(response) -> None:
    assert response.headers.get("Cache-Control") == "private, no-store", (
        response.request.path_qs,
        response.status,
        response.headers.get("Cache-Control"),
    )


def get_routes(client) -> list[str]:
    document = client.get("/api/openapi.json").json
    return [path for path, item in document["paths"].items() if "get" in item]


def filled(path: str, values: dict[str, str]) -> str:
    """``path`` with its parameters: this path's own value, else the name's, else junk."""
    return PARAMETER.sub(lambda m: values.get(f"{path}:{m[1]}", values.get(m[1], "0")), path)


@pytest.fixture
def real_parameters(account, customer_app, admin_app, dbsession) -> dict[str, str]:
    """Path parameters that name real rows: the customer's license and ticket, a draft
    article, a product, an error record, a webhook endpoint."""
    add_article(dbsession, "getting-started", published=False)
    record = ErrorRecord(
        support_code=new_support_code(),
        method="GET",
        path="/api/x",
        status=500,
        error_code="internal_error",
    )
    dbsession.add(record)
    dbsession.commit()
    ticket = open_ticket(customer_app)["id"]
    make_coupon(dbsession, "PRIVATE")
    dbsession.add(SubscriptionPlan(product_id=account.license.product_id, interval="year"))
    subscription = Subscription(
        provider="cardprovider",
        provider_subscription_id="sub_private",
        user_id=account.order.user_id,
        order_id=account.order.id,
        license_id=account.license.id,
        status="active",
        cancel_at_period_end=False,
    )
    dbsession.add(subscription)
    dbsession.commit()
    endpoint = admin_app.post_json(
        "/api/admin/webhooks",
        {"url": "http://127.0.0.1:9/hook", "eventTypes": ["order.paid"]},
        status=201,
    ).json["id"]
    return {
        "/api/admin/webhooks/{id}:id": str(endpoint),
        "/api/admin/webhooks/{id}/deliveries:id": str(endpoint),
        "/api/admin/subscriptions/{id}:id": str(subscription.id),
        "code": "PRIVATE",
        "key": account.license.key,
        "id": str(ticket),
        "/api/admin/articles/{slug}:slug": "getting-started",
        "slug": account.licensed.product.slug,
        "support_code": record.support_code,
        "number": account.order.number,
        "kind": "terms",
    }


def test_every_answer_about_the_caller_is_private_and_no_store(
    app, customer_app, admin_app, real_parameters
):
    """Walks the OpenAPI document: each GET route is asked anonymously; one that answers
    about the caller (by its path, or because it asks anyone anonymous to log in) is asked again
    as its user (the admin under /api/admin) with real path parameters, and with junk
    ones, and every answer is checked."""
    anonymous = new_client(app)
    checked = {}
    for path in get_routes(anonymous):
        url = filled(path, real_parameters)
        refused = anonymous.get(url, expect_errors=True)
        assert_nosniff(refused)
        if not (path.startswith(SESSION_PREFIXES) or refused.status_int == 401):
            continue
        assert_private(refused)
        client = admin_app if path.startswith("/api/admin/") else customer_app
        answers = [client.get(url, expect_errors=True)]
        if PARAMETER.search(path):
            answers.append(client.get(filled(path, {}), expect_errors=True))
        for response in answers:
            assert response.status_int < 500, (url, response.status, response.text[:300])
            assert_nosniff(response)
            assert_private(response)
        checked[path] = answers[0].status_int
    # Every such route was reached, and with real parameters each answered 200 (a
    # payment event is the only row not arranged here).
    assert {"/api/auth/session", "/api/bootstrap", "/api/dashboard/orders"} <= set(checked)
    assert len([p for p in checked if p.startswith("/api/admin/")]) >= 10
    not_found = {path for path, status in checked.items() if status != 200}
    assert not_found == {"/api/admin/payment-events/{id}"}, checked


def test_public_answers_keep_their_public_caching(app, customer_app, dbsession):
    add_article(dbsession, "getting-started")
    anonymous = new_client(app)
    for client in (anonymous, customer_app, anonymous):  # a miss, then hits of the cache
        for url in ("/api/store/products", "/api/docs/articles", "/api/license/jwks.json"):
            response = client.get(url)
            assert response.headers["Cache-Control"].startswith("public, max-age="), url
            assert response.headers["ETag"]
            assert_nosniff(response)


def test_nosniff_on_errors_pages_and_api_answers(app):
    client = page_client(app)
    missing_json = client.get("/api/no-such-thing", status=404)
    assert missing_json.content_type == "application/json"
    missing_page = client.get("/no-such-page", status=404)
    assert missing_page.content_type == "text/html"
    refused = client.post_json("/api/auth/login", {}, status=403)  # no CSRF token
    for response in (
        missing_json,
        missing_page,
        refused,
        client.get("/"),
        client.get("/api/health"),
        client.get("/api/openapi.json"),
    ):
        assert_nosniff(response)


def test_pages_of_a_logged_in_visitor_are_private_and_no_store(app, customer, account):
    anonymous = page_client(app)
    # An anonymous page holds only the visitor's CSRF token: private, but the browser may
    # keep it.
    assert anonymous.get("/products").headers["Cache-Control"] == "private, no-cache"
    client = logged_in(app, customer)
    for url in ("/", "/products", "/account", "/account/licenses", "/account/orders"):
        response = client.get(url)
        assert_nosniff(response)
        assert_private(response)
    # The login's own redirect carries the new session cookie.
    form = page_client(app).get("/login").forms[0]
    form["email"] = customer.email
    form["password"] = "correct horse battery"
    assert_private(form.submit(status=303))
