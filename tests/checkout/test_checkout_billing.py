"""The buyer's billing details at checkout: required (the country decides the tax),
checked before anything is written, kept on the order as a snapshot and as the buyer's
profile, prefilled on the pages; an invalid VAT ID is a field error the buyer may clear."""

from __future__ import annotations

import pytest
from fakes.shop import make_catalogue
from helpers.checkout import cart_count, fill_billing, visitor_with_cart
from helpers.clients import logged_in, new_client, page_client
from helpers.html import errors_of
from sqlalchemy import func, select

from cmsshop.models import BillingProfile, Cart, Order, User

BUSINESS = {
    "country": "DE",
    "name": "Erika Mustermann",
    "company": "Example GmbH",
    "addressLine1": "Hauptstr. 1",
    "city": "Berlin",
    "postalCode": "10115",
    "vatId": "DE 136 695 976",
}


@pytest.fixture
def shop(dbsession):
    return make_catalogue(dbsession)


@pytest.fixture
def buyer(app, customer, shop):
    client = new_client(app)
    client.login(customer.email)
    return client


def orders(dbsession) -> list[Order]:
    dbsession.commit()  # end the read snapshot: see what the app committed since
    dbsession.expire_all()
    return list(dbsession.scalars(select(Order).order_by(Order.id)))


def profile_of(dbsession, user_id: int) -> BillingProfile | None:
    dbsession.commit()  # end the read snapshot: see what the app committed since
    dbsession.expire_all()
    return dbsession.get(BillingProfile, user_id)


def place(buyer, billing, status=201):
    body = {"items": [{"product": "themes"}], "billing": billing}
    return buyer.post_json("/api/store/checkout", body, status=status)


def test_the_order_keeps_a_snapshot_and_the_profile_is_saved(buyer, customer, dbsession):
    place(buyer, BUSINESS)
    [order] = orders(dbsession)
    assert order.billing == {
        "country": "DE",
        "region": None,
        "name": "Erika Mustermann",
        "company": "Example GmbH",
        "address_line1": "Hauptstr. 1",
        "address_line2": None,
        "city": "Berlin",
        "postal_code": "10115",
        "vat_id": "DE136695976",
        "vat_id_check": "format_valid",
    }
    assert profile_of(dbsession, customer.id).vat_id == "DE136695976"
    # Editing the profile later never changes the order.
    buyer.put_json("/api/account/billing", {"country": "FR"})
    assert orders(dbsession)[0].billing["country"] == "DE"


def test_a_consumer_gives_only_the_country(buyer, dbsession):
    place(buyer, {"country": "fi"})
    [order] = orders(dbsession)
    assert (order.billing["country"], order.billing["vat_id_check"]) == ("FI", "none")


@pytest.mark.parametrize(
    ("billing", "field"),
    [
        (None, "billing"),
        ("DE", "billing"),
        ({}, "billing.country"),
        ({"country": "XX"}, "billing.country"),
        ({"country": "DE", "region": "US-WA"}, "billing.region"),
        ({**BUSINESS, "vatId": "DE136695978"}, "billing.vatId"),
        ({**BUSINESS, "vatId": "FR40303265045"}, "billing.vatId"),
        ({"country": "DE", "vatId": "DE136695976"}, "billing.company"),
        ({"country": "DE", "city": "a\x00b"}, "billing.city"),
        ({"country": "DE", "unknown": "x"}, "billing"),
    ],
)
def test_bad_billing_is_422_by_field_and_places_nothing(buyer, dbsession, billing, field):
    body = {"items": [{"product": "themes"}]}
    if billing is not None:
        body["billing"] = billing
    answer = buyer.post_json("/api/store/checkout", body, status=422).json
    assert answer["code"] == "validation_failed"
    assert field in answer["errors"], answer
    assert orders(dbsession) == []


def test_after_an_invalid_vat_id_the_buyer_continues_as_a_consumer(buyer, dbsession):
    refused = place(buyer, {**BUSINESS, "vatId": "DE136695978"}, status=422).json
    assert "consumer" in refused["errors"]["billing.vatId"]
    place(buyer, {**BUSINESS, "vatId": None})
    [order] = orders(dbsession)
    assert (order.billing["vat_id"], order.billing["vat_id_check"]) == (None, "none")


def test_a_bad_country_leaves_the_cart_as_it_was(app, shop, dbsession):
    client, cart = visitor_with_cart(app, {"themes": 1})
    url = f"/api/store/carts/{cart['id']}/checkout"
    answer = client.post_json(
        url, {"email": "g@example.com", "billing": {"country": "ZZ"}}, status=422
    ).json
    assert set(answer["errors"]) == {"billing.country"}
    assert client.get(f"/api/store/carts/{cart['id']}").json == cart
    assert cart_count(dbsession) == 1
    assert orders(dbsession) == []
    assert dbsession.scalar(select(func.count()).select_from(User)) == 0  # no guest account


def test_a_guest_fills_a_new_accounts_profile_but_never_replaces_one(
    app, shop, customer, dbsession
):
    client, cart = visitor_with_cart(app, {"themes": 1})
    client.post_json(
        f"/api/store/carts/{cart['id']}/checkout",
        {"email": "new@example.com", "billing": {"country": "NL", "name": "Noor"}},
        status=201,
    )
    guest = dbsession.scalar(select(User).where(User.email == "new@example.com"))
    assert (profile_of(dbsession, guest.id).country, profile_of(dbsession, guest.id).name) == (
        "NL",
        "Noor",
    )
    # Anyone may check out as a guest with the customer's address: the customer's own
    # saved details stay as they were, the order keeps what was typed.
    owner = new_client(app)
    owner.login(customer.email)
    owner.put_json("/api/account/billing", {"country": "AT"})
    client, cart = visitor_with_cart(app, {"themes": 1})
    client.post_json(
        f"/api/store/carts/{cart['id']}/checkout",
        {"email": customer.email, "billing": {"country": "PL"}},
        status=201,
    )
    assert profile_of(dbsession, customer.id).country == "AT"
    assert orders(dbsession)[-1].billing["country"] == "PL"


def test_vies_decides_and_an_outage_places_the_order_flagged(
    make_app, fake_vies, shop, customer, dbsession
):
    app = make_app(**{"cmsshop.tax.vies_url": fake_vies.url, "cmsshop.tax.vies_timeout": "1"})
    buyer = new_client(app)
    buyer.login(customer.email)
    refused = place(buyer, BUSINESS, status=422).json
    assert "not registered" in refused["errors"]["billing.vatId"]
    fake_vies.register("DE136695976", "EXAMPLE GMBH", "BERLIN")
    place(buyer, BUSINESS)
    fake_vies.outage = "MS_UNAVAILABLE"
    place(buyer, BUSINESS)
    assert [o.billing["vat_id_check"] for o in orders(dbsession)] == [
        "vies_valid",
        "vies_unavailable",
    ]


# --- the pages ---------------------------------------------------------------------------


def pay_form(page):
    return next(f for f in page.forms.values() if f.action == "/cart/checkout")


def test_the_cart_page_starts_with_the_saved_details(app, shop, customer, dbsession):
    client = logged_in(app, customer)
    api = new_client(app)
    api.login(customer.email)
    api.put_json("/api/account/billing", BUSINESS)
    buy = next(f for f in client.get("/products/themes").forms.values() if f.action == "/checkout")
    assert (buy["country"].value, buy["vatId"].value) == ("DE", "DE136695976")
    client.post(
        "/cart/add", {"csrf_token": buy["csrf_token"].value, "product": "themes"}, status=303
    )
    form = pay_form(client.get("/cart"))
    assert (form["country"].value, form["company"].value) == ("DE", "Example GmbH")
    form.submit(status=303)
    [order] = orders(dbsession)
    assert order.billing["vat_id"] == "DE136695976"


def test_a_guest_with_an_invalid_vat_id_may_clear_it_and_pay(app, shop, dbsession):
    client = page_client(app)
    token = next(iter(client.get("/products/themes").forms.values()))["csrf_token"].value
    client.post("/cart/add", {"csrf_token": token, "product": "themes"}, status=303)
    form = pay_form(client.get("/cart"))
    form["email"] = "firma@example.com"
    fill_billing(form, {**BUSINESS, "vatId": "DE 136 695 978"})
    refused = form.submit(status=422)
    assert set(errors_of(refused)) == {"vatId"}
    assert "consumer" in errors_of(refused)["vatId"]
    form = pay_form(refused)
    assert (form["email"].value, form["company"].value) == ("firma@example.com", "Example GmbH")
    form["vatId"] = ""
    form.submit(status=303)
    [order] = orders(dbsession)
    assert (order.billing["company"], order.billing["vat_id"]) == ("Example GmbH", None)
    assert dbsession.scalar(select(func.count()).select_from(Cart)) == 1


def test_a_bad_country_on_the_buy_form_is_a_field_error(app, shop, customer, dbsession):
    client = logged_in(app, customer)
    buy = next(f for f in client.get("/products/themes").forms.values() if f.action == "/checkout")
    buy["country"].force_value("ZZ")
    refused = buy.submit(status=422)
    assert "ISO 3166-1" in errors_of(refused)["country"]
    assert orders(dbsession) == []
