"""Guest checkout: paying with an e-mail address alone. The order belongs to that
address's account, new or existing, and the answer never says which; the browser that
placed it sees that order's status and nothing else of the account."""

from __future__ import annotations

import re

import pytest
from fakes.shop import make_catalogue
from helpers.checkout import BILLING, delivered, visitor_with_cart
from helpers.clients import client_from, new_client
from helpers.payments import deliver, paid_at_the_provider
from helpers.purchases import openapi_validator
from sqlalchemy import select

from cmsshop.models import Order, User


@pytest.fixture
def shop(dbsession):
    return make_catalogue(dbsession)


def place_as_guest(app, email: str, lines=None, ip: str = "127.0.0.1", **extra):
    client, cart = visitor_with_cart(app, lines or {"site-guard": 2, "themes": 1}, ip)
    response = client.post_json(
        f"/api/store/carts/{cart['id']}/checkout",
        {"billing": BILLING, "email": email, **extra},
        status=201,
    )
    return client, cart, response.json


def comparable(body: dict) -> dict:
    """An answer with what differs between any two orders (numbers, times) masked."""
    text = re.sub(r"ORD-[A-Z0-9]{5}-[A-Z0-9]{5}", "ORD", repr(body))
    return re.sub(r"\d{4}-\d\d-\d\dT[0-9:.]+Z", "T", text)


def test_guest_order_for_a_new_address(app, shop, dbsession):
    client, cart, body = place_as_guest(app, "New.Buyer@Example.com", name="New Buyer")
    order = body["order"]
    assert order["status"] == "pending" and order["total"] == 2 * 4900 + 1900
    assert [(i["product"], i["quantity"]) for i in order["items"]] == [
        ("site-guard", 2),
        ("themes", 1),
    ]
    assert body["sandbox"] is True and body["free"] is False
    stored = dbsession.scalar(select(Order).where(Order.number == order["number"]))
    owner = dbsession.get(User, stored.user_id)
    assert stored.guest is True and owner.email == "new.buyer@example.com"
    assert owner.name == "New Buyer" and owner.password_hash == ""
    assert owner.email_verified_at is None
    # The cart was emptied with the order.
    assert client.get(f"/api/store/carts/{cart['id']}").json["lines"] == []
    # This browser sees the order's status; another one does not.
    page = client.get(f"/checkout/success?order={order['number']}")
    assert order["number"] in page.text and "SiteGuard" in page.text
    other = client_from(app, "127.0.0.9").get(f"/checkout/success?order={order['number']}")
    assert other.status_code == 303 and "/login?next=" in other.location
    # The account cannot be logged into without setting a password first.
    login = new_client(app)
    login.refresh_csrf()
    login.post_json(
        "/api/auth/login", {"email": "new.buyer@example.com", "password": ""}, status=422
    )
    refused = login.post_json(
        "/api/auth/login", {"email": "new.buyer@example.com", "password": "x" * 12}, status=401
    )
    assert refused.json["code"] == "invalid_credentials"


def test_an_existing_account_gets_the_order_and_the_answer_says_nothing(
    app, shop, customer, dbsession
):
    _, _, new = place_as_guest(app, "nobody-yet@example.com", ip="127.0.0.3")
    client, _, existing = place_as_guest(app, customer.email, ip="127.0.0.4")
    assert comparable(new) == comparable(existing)
    stored = dbsession.scalar(select(Order).where(Order.number == existing["order"]["number"]))
    assert stored.user_id == customer.id and stored.guest is True
    # The guest browser sees this order, not the account's pages or other orders.
    client.get(f"/checkout/success?order={stored.number}", status=200)
    client.get("/account/orders", status=303)
    client.get("/api/dashboard/orders", status=401)
    # The account owner sees it among their orders once logged in.
    owner = new_client(app)
    owner.login(customer.email)
    numbers = [o["number"] for o in owner.get("/api/dashboard/orders").json["items"]]
    assert stored.number in numbers


def test_guest_order_is_paid_by_the_signed_webhook_once(card_app, fake_stripe, shop, dbsession):
    _, _, body = place_as_guest(card_app, "payer@example.com")
    order = body["order"]
    completed = paid_at_the_provider(fake_stripe, body["redirectUrl"])
    first = deliver(card_app, completed, status=200).json
    again = deliver(card_app, completed, status=200).json
    assert first["status"] == "processed" and again["status"] == "duplicate"
    assert delivered(dbsession, order["number"]) == {
        "fulfilments": 1,
        "invoices": 1,
        "entitlements": 2,
        "licenses": 1,
        "receipts": 1,
    }


def test_guest_checkout_needs_a_valid_address(app, shop, dbsession):
    client, cart = visitor_with_cart(app, {"themes": 1})
    url = f"/api/store/carts/{cart['id']}/checkout"
    for body in (
        {},
        {"email": "not-an-address"},
        {"email": "a@b@c"},
        {"email": 5},
        {"email": "x" * 400 + "@example.com"},
    ):
        error = client.post_json(url, {"billing": BILLING, **body}, status=422).json
        assert "email" in error["errors"], body
    assert dbsession.scalar(select(Order.id)) is None


def test_guest_checkout_is_rate_limited_like_registration(make_app, shop):
    app = make_app(**{"cmsshop.register_max_per_ip": "2"})
    for _ in range(2):
        place_as_guest(app, "limited@example.com", {"themes": 1}, ip="10.9.9.9")
    client, cart = visitor_with_cart(app, {"themes": 1}, "10.9.9.9")
    refused = client.post_json(
        f"/api/store/carts/{cart['id']}/checkout",
        {"billing": BILLING, "email": "other@example.com"},
        status=429,
    )
    assert refused.json["code"] == "rate_limited" and refused.headers["Retry-After"]


def test_checkout_answer_matches_the_openapi_document(app, shop):
    client, cart = visitor_with_cart(app, {"site-guard": 1})
    validate = openapi_validator(client, "/api/store/carts/{cart}", "get", "200")
    validate.validate(client.get(f"/api/store/carts/{cart['id']}").json)
    response = client.post_json(
        f"/api/store/carts/{cart['id']}/checkout",
        {"billing": BILLING, "email": "doc@example.com"},
        status=201,
    )
    openapi_validator(client, "/api/store/carts/{cart}/checkout", "post", "201").validate(
        response.json
    )
