"""The cart through the JSON API: lines and quantities priced by the server, whose cart a
request may touch, repriced and withdrawn products, the cart surviving login, and every
refusal changing nothing."""

from __future__ import annotations

import pytest
from fakes.shop import make_catalogue
from helpers.checkout import BILLING, cart_count, visitor_with_cart
from helpers.clients import client_from, new_client
from helpers.coupons import make_coupon
from sqlalchemy import func, select, update

from cmsshop.models import Order, Product, ProductPrice


@pytest.fixture
def shop(dbsession):
    return make_catalogue(dbsession)


def test_browsing_writes_no_cart(app, shop, dbsession):
    client = client_from(app)
    client.get("/products")
    client.get("/products/site-guard")
    assert client.get("/cart").status_code == 200
    assert cart_count(dbsession) == 0


def test_lines_quantities_and_totals(app, shop):
    client, cart = visitor_with_cart(app, {"site-guard": 3, "themes": 1})
    assert [(line["product"], line["quantity"]) for line in cart["lines"]] == [
        ("site-guard", 3),
        ("themes", 1),
    ]
    guard = cart["lines"][0]
    assert guard["unitAmount"] == 4900 and guard["amount"] == 3 * 4900
    # One license for three packs of the product's three sites.
    assert guard["seats"] == 9 and guard["maxQuantity"] == 100
    assert cart["subtotal"] == cart["total"] == 3 * 4900 + 1900
    assert cart["discount"] == 0 and cart["readyToPay"] is True
    again = client.post_json("/api/store/carts", {}, status=200).json
    assert again["id"] == cart["id"]
    changed = client.put_json(
        f"/api/store/carts/{cart['id']}/lines/site-guard", {"quantity": 1}
    ).json
    assert changed["total"] == 4900 + 1900
    removed = client.delete(f"/api/store/carts/{cart['id']}/lines/themes").json
    assert [line["product"] for line in removed["lines"]] == ["site-guard"]
    client.delete(f"/api/store/carts/{cart['id']}/lines/themes", status=404)
    usd = client.patch_json(f"/api/store/carts/{cart['id']}", {"currency": "USD"}).json
    assert usd["currency"] == "USD" and usd["total"] == 5400


@pytest.mark.parametrize(
    ("slug", "quantity", "field"),
    [
        ("site-guard", 0, "quantity"),
        ("site-guard", -2, "quantity"),
        ("site-guard", 101, "quantity"),
        ("themes", 2, "quantity"),  # a download is bought once
        ("site-guard", "2", "quantity"),
        ("site-guard", 2.5, "quantity"),
        ("site-guard", True, "quantity"),
        ("site-guard", None, "quantity"),
    ],
)
def test_bad_quantities_are_refused_and_change_nothing(app, shop, slug, quantity, field):
    client, cart = visitor_with_cart(app, {"pixel-forge": 1})
    response = client.put_json(
        f"/api/store/carts/{cart['id']}/lines/{slug}", {"quantity": quantity}, status=422
    ).json
    assert response["code"] == "validation_failed" and field in response["errors"]
    assert client.get(f"/api/store/carts/{cart['id']}").json == cart


def test_seller_limit_on_quantity(app, shop, dbsession):
    dbsession.execute(update(Product).where(Product.slug == "site-guard").values(max_quantity=5))
    dbsession.commit()
    client, cart = visitor_with_cart(app, {"site-guard": 5})
    error = client.put_json(
        f"/api/store/carts/{cart['id']}/lines/site-guard", {"quantity": 6}, status=422
    ).json
    assert error["errors"]["quantity"] == "at most 5 per order"


@pytest.mark.parametrize("slug", ["draft", "no-such-product", "Bad Slug"])
def test_products_not_for_sale_cannot_be_added(app, shop, slug):
    client, cart = visitor_with_cart(app, {})
    error = client.put_json(
        f"/api/store/carts/{cart['id']}/lines/{slug}", {"quantity": 1}, status=404
    ).json
    assert error["code"] == "product_not_found"
    assert client.get(f"/api/store/carts/{cart['id']}").json["lines"] == []


def test_another_visitors_cart_is_not_found(app, shop, customer, dbsession):
    owner, cart = visitor_with_cart(app, {"site-guard": 1})
    stranger = client_from(app, "127.0.0.2")
    stranger.post_json("/api/store/carts", {}, status=201)
    logged_in = new_client(app)
    logged_in.login(customer.email)
    base = f"/api/store/carts/{cart['id']}"
    for client in (stranger, logged_in):
        assert client.get(base, status=404).json["code"] == "cart_not_found"
        client.put_json(f"{base}/lines/themes", {"quantity": 1}, status=404)
        client.delete(f"{base}/lines/site-guard", status=404)
        client.put_json(f"{base}/coupon", {"code": "ANY"}, status=404)
        client.post_json(f"{base}/accept-prices", {}, status=404)
        client.post_json(
            f"{base}/checkout", {"billing": BILLING, "email": "x@example.com"}, status=404
        )
        client.patch_json(base, {"currency": "USD"}, status=404)
    client_from(app).get("/api/store/carts/" + "x" * 500, status=404)
    assert owner.get(base).json == cart
    assert dbsession.scalar(select(func.count()).select_from(Order)) == 0


def test_hostile_bodies(app, shop):
    client, cart = visitor_with_cart(app, {"site-guard": 1})
    line = f"/api/store/carts/{cart['id']}/lines/site-guard"
    for body in (b"{", b'{"quantity": 1', b"[]", b'"x"', b"\xff\xfe"):
        response = client.put(line, body, content_type="application/json", status="4*")
        assert response.json["code"] in ("malformed_json", "validation_failed")
    client.put_json(line, {"quantity": 1, "price": 1}, status=422)
    client.put(line, "quantity=1", status=415)
    client.put_json(f"/api/store/carts/{cart['id']}/coupon", {"code": "X" * 41}, status=422)
    client.patch_json(f"/api/store/carts/{cart['id']}", {"currency": "eur"}, status=422)
    client.patch_json(f"/api/store/carts/{cart['id']}", {"currency": "GBP"}, status=422)
    client.post_json("/api/store/carts", {"currency": "XXX"}, status=422)
    client.put_json(line, {"quantity": 1}, headers={"X-CSRF-Token": "wrong"}, status=403)
    assert client.get(f"/api/store/carts/{cart['id']}").json == cart


def test_repriced_product_waits_for_the_buyer(app, shop, dbsession):
    client, cart = visitor_with_cart(app, {"site-guard": 2})
    dbsession.execute(
        update(ProductPrice)
        .where(ProductPrice.product_id == shop["site-guard"].id, ProductPrice.currency == "EUR")
        .values(amount=5900)
    )
    dbsession.commit()
    base = f"/api/store/carts/{cart['id']}"
    now = client.get(base).json
    line = now["lines"][0]
    assert line["problem"] == "price_changed"
    assert line["seenUnitAmount"] == 4900 and line["unitAmount"] == 5900
    assert now["readyToPay"] is False
    refused = client.post_json(
        f"{base}/checkout", {"billing": BILLING, "email": "g@example.com"}, status=409
    ).json
    assert refused["code"] == "cart_changed" and refused["errors"]
    assert dbsession.scalar(select(func.count()).select_from(Order)) == 0
    accepted = client.post_json(f"{base}/accept-prices", {}).json
    assert accepted["readyToPay"] is True and accepted["total"] == 2 * 5900
    placed = client.post_json(
        f"{base}/checkout", {"billing": BILLING, "email": "g@example.com"}, status=201
    ).json
    assert placed["order"]["total"] == 2 * 5900


def test_withdrawn_product_is_shown_then_removed(app, shop, dbsession):
    client, cart = visitor_with_cart(app, {"site-guard": 1, "themes": 1})
    dbsession.execute(update(Product).where(Product.slug == "themes").values(published=False))
    dbsession.commit()
    base = f"/api/store/carts/{cart['id']}"
    now = client.get(base).json
    assert [line["problem"] for line in now["lines"]] == [None, "unavailable"]
    assert now["total"] == 4900 and now["readyToPay"] is False
    client.post_json(f"{base}/checkout", {"billing": BILLING, "email": "g@example.com"}, status=409)
    after = client.post_json(f"{base}/accept-prices", {}).json
    assert [line["product"] for line in after["lines"]] == ["site-guard"]


def test_cart_survives_login_and_merges(app, shop, customer, dbsession):
    # The customer had a cart from an earlier visit.
    earlier = new_client(app)
    earlier.login(customer.email)
    mine = earlier.post_json("/api/store/carts", {}, status=201).json
    earlier.put_json(f"/api/store/carts/{mine['id']}/lines/site-guard", {"quantity": 1})
    # Now, not logged in, they add more, then log in.
    client, _ = visitor_with_cart(app, {"site-guard": 2, "themes": 1})
    client.login(customer.email)
    cart = client.post_json("/api/store/carts", {}, status=200).json
    assert cart["id"] == mine["id"]
    assert [(line["product"], line["quantity"]) for line in cart["lines"]] == [
        ("site-guard", 3),
        ("themes", 1),
    ]
    assert cart_count(dbsession) == 1


def test_cart_of_a_first_login_is_the_visitors(app, shop, customer):
    client, visitor_cart = visitor_with_cart(app, {"pixel-forge": 2})
    client.login(customer.email)
    cart = client.post_json("/api/store/carts", {}, status=200).json
    assert cart["id"] == visitor_cart["id"] and cart["lines"][0]["quantity"] == 2


def test_coupon_in_the_cart(app, shop, dbsession):
    make_coupon(dbsession, "SPRING25", percent_off=25)
    make_coupon(dbsession, "PAUSED", percent_off=10, paused=True)
    client, cart = visitor_with_cart(app, {"site-guard": 1, "themes": 1})
    base = f"/api/store/carts/{cart['id']}/coupon"
    unknown = client.put_json(base, {"code": "NOPE"}, status="4*").json
    assert unknown["code"] == "coupon_unknown" and "coupon" in unknown["errors"]
    paused = client.put_json(base, {"code": "paused"}, status="4*").json
    assert paused["code"] == "coupon_paused"
    assert client.get(f"/api/store/carts/{cart['id']}").json["coupon"] is None
    applied = client.put_json(base, {"code": " spring25 "}).json
    assert applied["coupon"] == {"code": "SPRING25", "problem": None}
    # 25 % of 68.00 is 17.00, shared 49:19 over the lines.
    assert applied["discount"] == 1700 and applied["total"] == 6800 - 1700
    assert [line["discount"] for line in applied["lines"]] == [1225, 475]
    removed = client.delete(base).json
    assert removed["coupon"] is None and removed["total"] == 6800


def test_cart_answers_are_private_and_never_stored(app, shop):
    client, cart = visitor_with_cart(app, {"themes": 1})
    for response in (
        client.get(f"/api/store/carts/{cart['id']}"),
        client.get("/api/store/carts/nope", status=404),
        client.get("/cart"),
        client_from(app, "127.0.0.5").get("/cart"),
    ):
        assert response.headers["Cache-Control"] == "private, no-store", response.request.url
