"""POST /api/store/checkout: prices from the database, the order committed as pending
before the provider is asked, the sandbox without credentials, hostile input."""

from __future__ import annotations

import pytest
from fakes.shop import counts, order_status
from fakes.stripe_api import closed_port_url
from helpers.checkout import BILLING
from helpers.clients import new_client
from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import Order


@pytest.fixture
def buyer(card_app, customer, catalogue):
    """A logged-in customer of the app that talks to the fake provider API."""
    client = new_client(card_app)
    client.login(customer.email)
    return client


def test_checkout_commits_the_order_before_asking_the_provider(
    buyer, fake_stripe, engine, dbsession
):
    seen = {}

    def on_create(params):
        # Runs inside the provider call: the order must already be committed.
        with Session(engine) as session:
            seen["status"] = session.scalar(
                select(Order.status).where(Order.number == params["client_reference_id"])
            )

    fake_stripe.on_create = on_create
    response = buyer.post_json(
        "/api/store/checkout",
        {
            "billing": BILLING,
            "items": [{"product": "site-guard"}, {"product": "themes"}],
            "currency": "EUR",
            "provider": "cardprovider",
        },
        status=201,
    )
    body = response.json
    assert seen["status"] == "pending"
    order = body["order"]
    assert order["status"] == "pending" and order["total"] == 4900 + 1900
    assert order["currency"] == "EUR" and order["provider"] == "cardprovider"
    assert [i["product"] for i in order["items"]] == ["site-guard", "themes"]
    assert order["paidAt"] is None and order["createdAt"].endswith("Z")
    assert body["sandbox"] is False
    assert body["redirectUrl"].startswith("https://checkout.stripe.test/c/pay/cs_test_")
    created = fake_stripe.created[0]
    assert created["client_reference_id"] == order["number"]
    assert created["metadata"] == {"orderNumber": order["number"]}
    assert created["payment_intent_data"] == {"metadata": {"orderNumber": order["number"]}}
    assert created["customer_email"] == "alice@example.com"
    assert [li["price_data"]["unit_amount"] for li in created["line_items"]] == ["4900", "1900"]
    assert created["success_url"] == f"http://localhost/checkout/success?order={order['number']}"
    session_id = body["redirectUrl"].rsplit("/", 1)[1]
    dbsession.commit()
    stored = dbsession.scalar(select(Order).where(Order.number == order["number"]))
    assert stored.provider_checkout_id == session_id


def test_default_currency_and_provider(buyer):
    body = buyer.post_json(
        "/api/store/checkout", {"billing": BILLING, "items": [{"product": "themes"}]}, status=201
    ).json
    assert body["order"]["currency"] == "EUR" and body["order"]["provider"] == "cardprovider"
    usd = buyer.post_json(
        "/api/store/checkout",
        {"billing": BILLING, "items": [{"product": "themes"}], "currency": "USD"},
        status=201,
    ).json
    assert usd["order"]["total"] == 2100


def test_client_cannot_set_a_price(buyer, dbsession):
    response = buyer.post_json(
        "/api/store/checkout",
        {"billing": BILLING, "items": [{"product": "site-guard", "amount": 1}], "currency": "EUR"},
        status=422,
    )
    assert "items.0" in response.json["errors"]
    body = {"items": [{"product": "site-guard"}], "total": 1}
    assert buyer.post_json("/api/store/checkout", body, status=422).json["errors"]
    assert counts(dbsession)["events"] == 0
    dbsession.commit()
    assert dbsession.scalar(select(Order)) is None


@pytest.mark.parametrize(
    "body, field",
    [
        ({"items": []}, "items"),
        ({"items": [{"product": "nope"}]}, "items.0.product"),
        ({"items": [{"product": "draft"}]}, "items.0.product"),
        ({"items": [{"product": "pixel-forge"}], "currency": "USD"}, "items.0.product"),
        ({"items": [{"product": "themes"}], "currency": "GBP"}, "currency"),
        ({"items": [{"product": "themes"}], "currency": "XXX"}, "currency"),
        ({"items": [{"product": "themes"}], "currency": "eur"}, "currency"),
        ({"items": [{"product": "themes"}, {"product": "themes"}]}, "items.1.product"),
        ({"items": [{"product": "themes"}] * 21}, "items"),
        ({"items": [{"product": 5}]}, "items.0.product"),
        ({"items": "themes"}, "items"),
        ({"items": [{"product": "themes"}], "provider": "bank"}, "provider"),
        ({"items": [{"product": "themes"}], "provider": 1}, "provider"),
        ({}, "items"),
    ],
)
def test_invalid_checkouts_are_refused(buyer, dbsession, body, field):
    response = buyer.post_json("/api/store/checkout", {"billing": BILLING, **body}, status=422)
    assert field in response.json["errors"], response.json
    dbsession.commit()
    assert dbsession.scalar(select(Order)) is None


def test_hostile_bodies(buyer):
    headers = {"Content-Type": "application/json"}
    assert buyer.post("/api/store/checkout", b"{", headers=headers, status=400).json["code"] == (
        "malformed_json"
    )
    assert buyer.post("/api/store/checkout", b"[1]", headers=headers, status=422)
    assert buyer.post(
        "/api/store/checkout", b"x", headers={"Content-Type": "text/plain"}, status=415
    )
    big = b'{"items": [' + b'{"product": "themes"},' * 60000 + b"]}"
    assert buyer.post("/api/store/checkout", big, headers=headers, status=413)


def test_checkout_needs_login_and_csrf(card_app, catalogue, customer):
    anonymous = new_client(card_app)
    anonymous.refresh_csrf()
    anonymous.post_json(
        "/api/store/checkout", {"billing": BILLING, "items": [{"product": "themes"}]}, status=401
    )
    client = new_client(card_app)
    client.login(customer.email)
    response = client.post_json(
        "/api/store/checkout",
        {"billing": BILLING, "items": [{"product": "themes"}]},
        headers={"X-CSRF-Token": "wrong"},
        status=403,
    )
    assert response.json["code"] == "csrf_failed"


def test_without_api_credentials_checkout_gives_the_sandbox(app, customer, catalogue, dbsession):
    client = new_client(app)
    client.login(customer.email)
    body = client.post_json(
        "/api/store/checkout", {"billing": BILLING, "items": [{"product": "themes"}]}, status=201
    ).json
    number = body["order"]["number"]
    assert body["sandbox"] is True
    assert body["redirectUrl"] == f"http://localhost/api/store/checkout/sandbox/{number}"
    page = client.get(f"/api/store/checkout/sandbox/{number}").json
    assert page["order"]["status"] == "pending"
    assert page["command"] == (
        f"cmsshop-admin development.ini simulate-payment {number} --provider cardprovider"
    )
    assert order_status(dbsession, number) == "pending"


def test_sandbox_shows_only_your_own_orders(app, customer, other_customer, catalogue):
    client = new_client(app)
    client.login(customer.email)
    number = client.post_json(
        "/api/store/checkout", {"billing": BILLING, "items": [{"product": "themes"}]}, status=201
    ).json["order"]["number"]
    other = new_client(app)
    other.login(other_customer.email)
    assert other.get(f"/api/store/checkout/sandbox/{number}", status=404).json["code"] == (
        "order_not_found"
    )
    # Anonymous: a guest sees only the orders this browser placed.
    anonymous = new_client(app).get(f"/api/store/checkout/sandbox/{number}", status=404)
    assert anonymous.json["code"] == "order_not_found"


def test_provider_down_cancels_the_order(make_app, card_settings, customer, catalogue, dbsession):
    app = make_app(**{**card_settings, "cmsshop.cardprovider.api_base": closed_port_url()})
    client = new_client(app)
    client.login(customer.email)
    response = client.post_json(
        "/api/store/checkout", {"billing": BILLING, "items": [{"product": "themes"}]}, status=503
    )
    assert response.json["code"] == "provider_unavailable"
    dbsession.commit()
    assert [o.status for o in dbsession.scalars(select(Order))] == ["cancelled"]


def test_provider_error_cancels_the_order(buyer, fake_stripe, dbsession):
    fake_stripe.fail_with = 500
    buyer.post_json(
        "/api/store/checkout", {"billing": BILLING, "items": [{"product": "themes"}]}, status=503
    )
    dbsession.commit()
    assert [o.status for o in dbsession.scalars(select(Order))] == ["cancelled"]
