"""Orders with a coupon and orders that cost nothing: the provider is charged the
discounted total, a free order is delivered at once through the same fulfilment (each
thing exactly once), and refusals change nothing."""

from __future__ import annotations

import pytest
from fakes.shop import make_catalogue
from helpers.checkout import (
    BILLING,
    delivered,
    fill_billing,
    in_days,
    order_count,
    redemption_statuses,
    visitor_with_cart,
)
from helpers.clients import new_client
from helpers.coupons import make_coupon
from helpers.payments import deliver, paid_at_the_provider
from sqlalchemy import func, select

from cmsshop.models import Coupon, Order, Product, ProductPrice


@pytest.fixture
def shop(dbsession):
    return make_catalogue(dbsession)


def checkout(client, cart, status=201, **body):
    body = {"billing": BILLING, **body}
    return client.post_json(f"/api/store/carts/{cart['id']}/checkout", body, status=status).json


def with_coupon(client, cart, code, status=200):
    return client.put_json(f"/api/store/carts/{cart['id']}/coupon", {"code": code}, status=status)


def test_the_provider_is_charged_the_discounted_total(card_app, fake_stripe, shop, dbsession):
    make_coupon(
        dbsession,
        "TENOFF",
        kind="fixed",
        amounts={"EUR": {"amount_off": 1000, "min_subtotal": 5000}},
    )
    client, cart = visitor_with_cart(card_app, {"site-guard": 2, "themes": 1})
    with_coupon(client, cart, "tenoff")
    placed = checkout(client, cart, email="buyer@example.com")
    order = placed["order"]
    assert order["discount"] == 1000 and order["total"] == 2 * 4900 + 1900 - 1000
    assert order["couponCode"] == "TENOFF"
    created = fake_stripe.created[-1]
    charged = sum(
        int(item["price_data"]["unit_amount"]) * int(item["quantity"])
        for item in created["line_items"]
    )
    assert charged == order["total"]
    assert redemption_statuses(dbsession, "TENOFF") == ["reserved"]
    answer = deliver(card_app, paid_at_the_provider(fake_stripe, placed["redirectUrl"]), status=200)
    assert answer.json["status"] == "processed", answer.json
    assert redemption_statuses(dbsession, "TENOFF") == ["redeemed"]
    assert delivered(dbsession, order["number"])["invoices"] == 1


def test_a_tampered_total_in_the_form_is_never_read(app, shop, dbsession):
    client, cart = visitor_with_cart(app, {"site-guard": 1})
    page = client.get("/cart")
    form = page.forms[[f.action for f in page.forms.values()].index("/cart/checkout")]
    form["email"] = "tamper@example.com"
    fill_billing(form)
    fields = [(k, v) for k, v in form.submit_fields()] + [("total", "1"), ("price", "1")]
    client.post("/cart/checkout", fields, status=303)
    dbsession.expire_all()
    assert dbsession.scalar(select(Order.total)) == 4900


def test_a_zero_price_order_is_delivered_without_a_provider(app, shop, dbsession):
    free = Product(
        slug="free-tool", name="Free Tool", licensed=True, max_activations=1, published=True
    )
    free.prices = [ProductPrice(currency="EUR", amount=0)]
    dbsession.add(free)
    dbsession.commit()
    client, cart = visitor_with_cart(app, {"free-tool": 2})
    placed = checkout(client, cart, email="free@example.com")
    order = placed["order"]
    assert placed["free"] is True and placed["sandbox"] is False
    assert order["status"] == "paid" and order["provider"] == "free" and order["total"] == 0
    assert placed["redirectUrl"].endswith(f"/checkout/success?order={order['number']}")
    assert delivered(dbsession, order["number"]) == {
        "fulfilments": 1,
        "invoices": 1,
        "entitlements": 1,
        "licenses": 1,
        "receipts": 1,
    }
    assert "paid" in client.get(f"/checkout/success?order={order['number']}").text


def test_a_full_coupon_makes_a_free_order(app, shop, customer, dbsession):
    make_coupon(dbsession, "ONTHEHOUSE", percent_off=100, max_redemptions=1)
    client = new_client(app)
    client.login(customer.email)
    cart = client.post_json("/api/store/carts", {}, status=201).json
    client.put_json(f"/api/store/carts/{cart['id']}/lines/pixel-forge", {"quantity": 3})
    with_coupon(client, cart, "ONTHEHOUSE")
    placed = checkout(client, cart)
    order = placed["order"]
    assert placed["free"] is True and order["status"] == "paid"
    assert order["discount"] == 3 * 7900 and order["total"] == 0
    assert delivered(dbsession, order["number"])["licenses"] == 1
    assert redemption_statuses(dbsession, "ONTHEHOUSE") == ["redeemed"]
    # The one redemption is used: the next cart is refused and nothing is created.
    client.put_json(f"/api/store/carts/{cart['id']}/lines/themes", {"quantity": 1})
    refused = with_coupon(client, cart, "ONTHEHOUSE", status="4*").json
    assert refused["code"] == "coupon_used_up"
    assert dbsession.scalar(select(func.count()).select_from(Order)) == 1


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"valid_until": in_days(-1)}, "coupon_expired"),
        ({"valid_from": in_days(2)}, "coupon_not_started"),
        ({"paused": True}, "coupon_paused"),
    ],
)
def test_a_coupon_that_lapsed_after_it_was_applied_stops_checkout(
    app, shop, dbsession, fields, code
):
    coupon = make_coupon(dbsession, "LAPSING", percent_off=20)
    client, cart = visitor_with_cart(app, {"site-guard": 1})
    with_coupon(client, cart, "LAPSING")
    for name, value in fields.items():
        setattr(dbsession.get(Coupon, coupon.id), name, value)
    dbsession.commit()
    shown = client.get(f"/api/store/carts/{cart['id']}").json
    assert shown["coupon"]["problem"]["code"] == code and shown["readyToPay"] is False
    refused = checkout(client, cart, status="4*", email="late@example.com")
    assert refused["code"] == code
    assert dbsession.scalar(select(func.count()).select_from(Order)) == 0
    assert redemption_statuses(dbsession, "LAPSING") == []


@pytest.fixture
def both_providers(make_app, card_settings, wallet_settings):
    """An app that takes payments through both providers."""
    return make_app(**{**card_settings, **wallet_settings})


def test_a_charge_below_the_card_providers_minimum_is_refused_the_wallet_takes_it(
    both_providers, fake_stripe, paypal, shop, dbsession
):
    # SiteGuard's EUR 49.00 less 99 %: EUR 0.49, below the card provider's EUR 0.50. Its
    # API would refuse the checkout after the order was committed; nothing is committed.
    make_coupon(dbsession, "ALMOST", percent_off=99)
    client, cart = visitor_with_cart(both_providers, {"site-guard": 1})
    with_coupon(client, cart, "almost")
    answer = checkout(client, cart, status=422, email="buyer@example.com", provider="cardprovider")
    assert {"code", "title", "message", "hints", "supportCode"} <= set(answer)
    refusal = answer["errors"]["coupon"]
    assert "at least EUR0.50" in refusal and "EUR0.49" in refusal and "remove the coupon" in refusal
    assert order_count(dbsession) == 0 and fake_stripe.created == []
    assert redemption_statuses(dbsession, "ALMOST") == []
    # The wallet provider has no such minimum: the same cart is paid there.
    placed = checkout(client, cart, email="buyer@example.com", provider="walletprovider")
    assert placed["order"]["total"] == 49 and placed["order"]["provider"] == "walletprovider"
    assert redemption_statuses(dbsession, "ALMOST") == ["reserved"]


@pytest.mark.parametrize(("amount", "status"), [(29, 422), (49, 422), (50, 201)])
def test_a_price_below_the_card_providers_minimum_is_refused_on_the_items(
    card_app, fake_stripe, shop, dbsession, amount, status
):
    sticker = Product(slug="sticker", name="Sticker", licensed=False, published=True)
    sticker.prices = [ProductPrice(currency="EUR", amount=amount)]
    dbsession.add(sticker)
    dbsession.commit()
    client, cart = visitor_with_cart(card_app, {"sticker": 1})
    answer = checkout(client, cart, status=status, email="buyer@example.com")
    if status == 422:
        assert f"at least EUR0.50, and this one comes to EUR0.{amount}" in answer["errors"]["items"]
        assert order_count(dbsession) == 0 and fake_stripe.created == []
    else:  # the minimum itself is taken
        assert answer["order"]["total"] == 50 and len(fake_stripe.created) == 1
