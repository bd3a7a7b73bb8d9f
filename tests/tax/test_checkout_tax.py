"""The tax of an order as the buyer checks out, end to end: the real checkout JSON API
(and the cart's checkout) of an app whose seller is established in Germany with tax on,
the order and its lines as committed, the amount the (fake) payment provider is asked
for, the signed webhook that pays it, the invoice it issues, and the console's page.

Amounts are exact, in cents: prices entered without tax (the default) get the tax on
top; with cmsshop.tax.prices_include_tax the price is the gross. Each order's JSON is
checked against the OpenAPI document."""

from __future__ import annotations

import datetime as dt

import pytest
from fakes.shop import make_order
from helpers.checkout import delivered, order_count, visitor_with_cart
from helpers.clients import logged_in
from helpers.purchases import openapi_validator
from helpers.tax import SELLER_DE

from cmsshop.models import BillingProfile, Order
from cmsshop.services.tax.engine import OUTSIDE_SCOPE_NOTE, REVERSE_CHARGE_NOTE
from cmsshop.services.tax.rates import parse_extra_rates

from .conftest import buyer_of, invoice_of, pay_by_card, place, stored

BUSINESS = {
    "name": "Erika Mustermann",
    "company": "Example GmbH",
    "addressLine1": "Hauptstr. 1",
    "city": "Berlin",
    "postalCode": "10115",
}
INCLUSIVE = {"cmsshop.tax.prices_include_tax": "true"}
MICRO = {"cmsshop.tax.micro_seller": "true", "cmsshop.tax.eur_rates": "USD=0.92"}


def check_order_json(client, body: dict, path: str) -> dict:
    """The checkout's answer, valid by the OpenAPI document; its order."""
    openapi_validator(client, path, "post", "201").validate(body)
    return body["order"]


def lines_of(order: Order) -> list[tuple[str, int, int, int, int]]:
    """(product, quantity, amount, net, tax) of each stored line."""
    return [(i.product_slug, i.quantity, i.amount, i.net, i.tax) for i in order.items]


# --- the table: who buys what, and the exact tax -------------------------------------------

# (id, overrides of the app's settings, billing, items, currency,
#  (regime, country, rate, notes), [(product, quantity, amount, net, tax)], tax, total)
CASES = [
    (
        "DE consumer, 100.00 without tax: 19 % on top",
        {},
        {"country": "DE"},
        {"plugin": 1},
        "EUR",
        ("domestic", "DE", "19", []),
        [("plugin", 1, 10000, 10000, 1900)],
        1900,
        11900,
    ),
    (
        "FR consumer: France's 20 % (one-stop shop)",
        {},
        {"country": "FR"},
        {"plugin": 1},
        "EUR",
        ("oss", "FR", "20", []),
        [("plugin", 1, 10000, 10000, 2000)],
        2000,
        12000,
    ),
    (
        "FI consumer, 9.99 with tax: 25.5 % inside it",
        INCLUSIVE,
        {"country": "FI"},
        {"ebook": 1},
        "EUR",
        ("oss", "FI", "25.5", []),
        [("ebook", 1, 999, 796, 203)],
        203,
        999,
    ),
    (
        "DE business with a valid VAT ID: still 19 % (same country)",
        {},
        {"country": "DE", **BUSINESS, "vatId": "DE136695976"},
        {"plugin": 1},
        "EUR",
        ("domestic", "DE", "19", []),
        [("plugin", 1, 10000, 10000, 1900)],
        1900,
        11900,
    ),
    (
        "FR business, VAT ID valid by checksum: reverse charge",
        {},
        {"country": "FR", **BUSINESS, "vatId": "FR40303265045"},
        {"plugin": 1},
        "EUR",
        ("reverse_charge", "FR", "0", [REVERSE_CHARGE_NOTE]),
        [("plugin", 1, 10000, 10000, 0)],
        0,
        10000,
    ),
    (
        "AT business, VAT ID valid by checksum: reverse charge",
        {},
        {"country": "AT", **BUSINESS, "vatId": "ATU13585627"},
        {"plugin": 1},
        "EUR",
        ("reverse_charge", "AT", "0", [REVERSE_CHARGE_NOTE]),
        [("plugin", 1, 10000, 10000, 0)],
        0,
        10000,
    ),
    (
        "US buyer, no registration there: outside the scope",
        {},
        {"country": "US"},
        {"plugin": 1},
        "EUR",
        ("outside_scope", "US", "0", [OUTSIDE_SCOPE_NOTE]),
        [("plugin", 1, 10000, 10000, 0)],
        0,
        10000,
    ),
    (
        "the same 100.00 entered with tax: 84.03 + 15.97",
        INCLUSIVE,
        {"country": "DE"},
        {"plugin": 1},
        "EUR",
        ("domestic", "DE", "19", []),
        [("plugin", 1, 10000, 8403, 1597)],
        1597,
        10000,
    ),
    (
        "3 x 0.99 without tax: 19 % of 2.97 is 0.5643, so 0.56",
        {},
        {"country": "DE"},
        {"sticker": 3},
        "EUR",
        ("domestic", "DE", "19", []),
        [("sticker", 3, 297, 297, 56)],
        56,
        353,
    ),
    (
        "3 x 0.99 with tax: 2.97 is 2.50 + 0.47",
        INCLUSIVE,
        {"country": "DE"},
        {"sticker": 3},
        "EUR",
        ("domestic", "DE", "19", []),
        [("sticker", 3, 297, 250, 47)],
        47,
        297,
    ),
    (
        "two lines: the tax of their sum (19.5643 -> 19.56), shared 19.00 + 0.56",
        {},
        {"country": "DE"},
        {"plugin": 1, "sticker": 3},
        "EUR",
        ("domestic", "DE", "19", []),
        [("plugin", 1, 10000, 10000, 1900), ("sticker", 3, 297, 297, 56)],
        1956,
        12253,
    ),
]


@pytest.mark.parametrize(
    ("overrides", "billing", "items", "currency", "rule", "lines", "tax", "total"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_the_order_keeps_the_tax_the_rules_give(
    taxed_app, customer, dbsession, overrides, billing, items, currency, rule, lines, tax, total
):
    client = buyer_of(taxed_app(**overrides), customer)
    body = place(client, billing, items, currency=currency).json
    answer = body["order"]  # valid by the OpenAPI document (place checks it)
    regime, country, rate, notes = rule
    assert (answer["tax"], answer["total"]) == (tax, total)
    assert [
        (i["product"], i["quantity"], i["amount"], i["net"], i["tax"], i["gross"])
        for i in answer["items"]
    ] == [(*line, line[3] + line[4]) for line in lines]
    inclusive = bool(overrides.get("cmsshop.tax.prices_include_tax"))
    assert answer["taxDetails"] == {
        "regime": regime,
        "country": country,
        "rate": rate,
        "pricesIncludeTax": inclusive,
        "notes": notes,
    }
    order = stored(dbsession, answer["number"])
    assert lines_of(order) == lines
    assert (order.tax, order.total, order.currency) == (tax, total, currency)
    details = order.tax_details
    assert (details["regime"], details["country"], details["rate"]) == (regime, country, rate)
    assert details["notes"] == notes and details["flags"] == []
    assert details["pricesIncludeTax"] is inclusive
    assert details["evidence"] == "single" and details["evidenceCountry"] is None
    # Only a consumer's sale to another member state is cross-border, and each one is
    # counted in euro (its net) whether or not the seller uses the threshold now: one who
    # turns it on later starts from the true total.
    assert details["crossBorder"] is (regime == "oss")
    net = sum(line[3] for line in lines)
    counted = net if regime == "oss" and currency == "EUR" else None
    assert order.cross_border_eur == counted
    # The provider is asked for the gross.
    assert body["sandbox"] is False


def test_the_cart_checkout_taxes_a_guest_as_the_api_does(taxed_app, dbsession):
    app = taxed_app()
    client, cart = visitor_with_cart(app, {"themes": 2})
    body = client.post_json(
        f"/api/store/carts/{cart['id']}/checkout",
        {"email": "guest@example.com", "billing": {"country": "FR"}},
        status=201,
    ).json
    answer = check_order_json(client, body, "/api/store/carts/{cart}/checkout")
    # 2 x 19.00 = 38.00, France's 20 % on top: 7.60.
    assert (answer["tax"], answer["total"], answer["taxDetails"]["regime"]) == (760, 4560, "oss")
    order = stored(dbsession, answer["number"])
    assert lines_of(order) == [("themes", 2, 3800, 3800, 760)]
    assert (order.tax, order.total, order.tax_details["rate"]) == (760, 4560, "20")


# --- VAT IDs and VIES ---------------------------------------------------------------------


@pytest.fixture
def vies_app(taxed_app, fake_vies):
    return taxed_app(**{"cmsshop.tax.vies_url": fake_vies.url, "cmsshop.tax.vies_timeout": "1"})


def test_vies_decides_the_reverse_charge(vies_app, fake_vies, customer, dbsession):
    client = buyer_of(vies_app, customer)
    business = {"country": "FR", **BUSINESS, "vatId": "FR40303265045"}
    # VIES says the number is not registered: a field error; placed as a consumer, taxed.
    refused = place(client, business, {"plugin": 1}, status=422).json
    assert set(refused["errors"]) == {"billing.vatId"}
    assert "consumer" in refused["errors"]["billing.vatId"]
    assert order_count(dbsession) == 0
    consumer = place(client, {**business, "vatId": None}, {"plugin": 1}).json["order"]
    assert (consumer["tax"], consumer["total"], consumer["taxDetails"]["regime"]) == (
        2000,
        12000,
        "oss",
    )
    # Registered: reverse charge, the legal note on the order.
    fake_vies.register("FR40303265045", "MARTIN SARL", "PARIS")
    confirmed = place(client, business, {"plugin": 1}).json["order"]
    order = stored(dbsession, confirmed["number"])
    assert (order.tax, order.total, order.billing["vat_id_check"]) == (0, 10000, "vies_valid")
    assert order.tax_details["regime"] == "reverse_charge"
    assert order.tax_details["notes"] == [REVERSE_CHARGE_NOTE]
    assert order.tax_details["flags"] == []


def test_vies_down_reverse_charges_and_flags_the_order(
    vies_app, fake_vies, customer, admin, dbsession
):
    fake_vies.outage = "MS_UNAVAILABLE"
    client = buyer_of(vies_app, customer)
    business = {"country": "AT", **BUSINESS, "vatId": "ATU13585627"}
    answer = place(client, business, {"plugin": 1}).json["order"]
    order = stored(dbsession, answer["number"])
    assert (order.tax, order.total, order.billing["vat_id_check"]) == (0, 10000, "vies_unavailable")
    assert order.tax_details["regime"] == "reverse_charge"
    assert order.tax_details["notes"] == [REVERSE_CHARGE_NOTE]
    assert order.tax_details["flags"] == ["needs_review", "vies_unavailable"]
    page = logged_in(vies_app, admin).get(f"/admin/orders/{order.number}")
    text = " ".join(page.html.get_text(" ").split())
    assert "Tax: check this order." in text and "VIES could not be reached" in text


# --- the micro-seller threshold and currencies -----------------------------------------------


def seed_cross_border_sales(dbsession, user, eur_cents: int, *, paid_at=None) -> Order:
    """A paid cross-border consumer sale that counts ``eur_cents`` towards the threshold."""
    order = make_order(dbsession, user, ("themes",), status="paid")
    order.paid_at = paid_at or dt.datetime.now(dt.UTC)
    order.cross_border_eur = eur_cents
    dbsession.commit()
    return order


def test_a_micro_seller_charges_its_own_rate_until_a_sale_crosses_the_threshold(
    taxed_app, customer, other_customer, dbsession
):
    # 9,900.00 EUR of cross-border consumer sales paid this year; last year's do not
    # count towards this year's total, and the year before last not at all.
    seed_cross_border_sales(dbsession, other_customer, 990000)
    year = dt.datetime.now(dt.UTC).year
    seed_cross_border_sales(
        dbsession, other_customer, 500000, paid_at=dt.datetime(year - 1, 6, 1, tzinfo=dt.UTC)
    )
    seed_cross_border_sales(
        dbsession, other_customer, 5000000, paid_at=dt.datetime(year - 2, 6, 1, tzinfo=dt.UTC)
    )
    client = buyer_of(taxed_app(**MICRO), customer)
    fr = {"country": "FR"}
    # 9,900 + 100.00 = exactly 10,000.00: not over, still Germany's 19 %.
    at_the_limit = place(client, fr, {"plugin": 1}).json["order"]
    order = stored(dbsession, at_the_limit["number"])
    assert order.tax_details["regime"] == "micro_seller"
    assert (order.tax_details["country"], order.tax_details["rate"]) == ("DE", "19")
    assert (order.tax, order.total, order.cross_border_eur) == (1900, 11900, 10000)
    # A placed order is no sale yet: 9,900 + 200.00 crosses, so France's 20 %.
    crossing = place(client, fr, {"plugin": 2}).json["order"]
    order = stored(dbsession, crossing["number"])
    assert order.tax_details["regime"] == "oss"
    assert (order.tax_details["country"], order.tax_details["rate"]) == ("FR", "20")
    assert (order.tax, order.total, order.cross_border_eur) == (4000, 24000, 20000)
    # Sales to the seller's own country never count.
    home = place(client, {"country": "DE"}, {"plugin": 1}).json["order"]
    assert stored(dbsession, home["number"]).cross_border_eur is None


def test_a_paid_sale_moves_the_running_total(taxed_app, customer, dbsession, fake_stripe):
    seed_cross_border_sales(dbsession, customer, 990000)
    app = taxed_app(**MICRO)
    client = buyer_of(app, customer)
    first = place(client, {"country": "FR"}, {"themes": 1}).json
    assert first["order"]["taxDetails"]["regime"] == "micro_seller"
    assert pay_by_card(app, fake_stripe, first)["status"] == "processed"
    assert stored(dbsession, first["order"]["number"]).status == "paid"
    # Paid, its 19.00 counts: 9,919.00 + 100.00 now crosses (without it, exactly
    # 10,000.00 would not: the test above).
    under = place(client, {"country": "FR"}, {"plugin": 1}).json["order"]
    assert under["taxDetails"]["regime"] == "oss" and under["tax"] == 2000
    assert stored(dbsession, under["number"]).cross_border_eur == 10000


def test_eur_and_usd_orders_count_in_euro(taxed_app, customer, dbsession):
    client = buyer_of(taxed_app(**MICRO), customer)
    fr = {"country": "FR"}
    eur = place(client, fr, {"plugin": 1}, currency="EUR").json
    usd = place(client, fr, {"plugin": 1}, currency="USD").json
    small = place(client, fr, {"sticker": 3}, currency="USD").json
    eur_order = stored(dbsession, eur["order"]["number"])
    assert (eur_order.currency, eur_order.tax, eur_order.total) == ("EUR", 1900, 11900)
    assert eur_order.cross_border_eur == 10000
    usd_order = stored(dbsession, usd["order"]["number"])
    # USD 108.50 net at 0.92: EUR 99.82; the tax in dollars, 19 % of 108.50 = 20.615 -> 20.62.
    assert (usd_order.currency, usd_order.tax, usd_order.total) == ("USD", 2062, 12912)
    assert usd_order.tax_details["regime"] == "micro_seller"
    assert usd_order.cross_border_eur == 9982
    small_order = stored(dbsession, small["order"]["number"])
    # USD 2.97 at 0.92 = EUR 2.7324: 273 cents, half up.
    assert (small_order.tax, small_order.total, small_order.cross_border_eur) == (56, 353, 273)


def test_a_currency_without_an_eur_rate_is_taxed_where_the_buyer_is(taxed_app, customer, dbsession):
    client = buyer_of(taxed_app(**{**MICRO, "cmsshop.tax.eur_rates": ""}), customer)
    answer = place(client, {"country": "FR"}, {"plugin": 1}, currency="USD").json["order"]
    order = stored(dbsession, answer["number"])
    assert (order.tax_details["regime"], order.tax_details["rate"]) == ("oss", "20")
    assert (order.tax, order.total, order.cross_border_eur) == (2170, 13020, None)


# --- refusals and a rate change --------------------------------------------------------------


@pytest.mark.parametrize(
    ("billing", "field"),
    [
        ({"country": "XX"}, "billing.country"),
        ({"country": "ZZ"}, "billing.country"),
        ({"country": "FR", **BUSINESS, "vatId": "FR40303265046"}, "billing.vatId"),
        ({"country": "AT", **BUSINESS, "vatId": "ATU13585626"}, "billing.vatId"),
    ],
)
def test_a_refused_checkout_writes_nothing(taxed_app, customer, dbsession, billing, field):
    client = buyer_of(taxed_app(), customer)
    answer = place(client, billing, {"plugin": 1}, status=422).json
    assert answer["code"] == "validation_failed" and set(answer["errors"]) == {field}
    assert order_count(dbsession) == 0
    dbsession.commit()
    assert dbsession.get(BillingProfile, customer.id) is None


def test_a_rate_change_before_the_payment_keeps_the_rate_the_buyer_saw(
    taxed_app, customer, dbsession, fake_stripe
):
    app = taxed_app()
    client = buyer_of(app, customer)
    placed = place(client, {"country": "DE"}, {"plugin": 1}).json
    assert placed["order"]["total"] == 11900
    # Germany's rate goes up before the payment arrives.
    app.registry.settings["cmsshop.tax.extra_rates"] = parse_extra_rates("DE 21 2025-01-01")
    assert pay_by_card(app, fake_stripe, placed)["status"] == "processed"
    order = stored(dbsession, placed["order"]["number"])
    assert order.status == "paid"
    assert (order.tax, order.total, order.tax_details["rate"]) == (1900, 11900, "19")
    invoice = invoice_of(dbsession, order)
    assert invoice.total == 11900
    assert [(x["net"], x["taxRate"], x["tax"], x["amount"]) for x in invoice.lines] == [
        (10000, "19", 1900, 11900)
    ]
    assert invoice.tax["totals"] == [{"rate": "19", "net": 10000, "tax": 1900, "gross": 11900}]
    assert (invoice.tax["regime"], invoice.tax["country"]) == ("domestic", "DE")
    # The next order is placed at the new rate.
    later = place(client, {"country": "DE"}, {"plugin": 1}).json["order"]
    assert (later["tax"], later["total"], later["taxDetails"]["rate"]) == (2100, 12100, "21")


# --- the provider is asked for the gross ------------------------------------------------------


def test_the_card_session_adds_a_tax_line_up_to_the_gross(taxed_app, customer, fake_stripe):
    client = buyer_of(taxed_app(), customer)
    order = place(client, {"country": "DE"}, {"plugin": 1, "sticker": 3}).json["order"]
    created = fake_stripe.created[-1]
    items = [
        (li["price_data"]["product_data"]["name"], int(li["price_data"]["unit_amount"]))
        for li in created["line_items"]
    ]
    assert items[-1] == ("VAT 19 %", 1956)
    assert sum(amount for _, amount in items) == order["total"] == 12253
    session = next(iter(fake_stripe.sessions.values()))
    assert session["amount_total"] == 12253


def test_an_inclusive_price_needs_no_tax_line(taxed_app, customer, fake_stripe):
    client = buyer_of(taxed_app(**INCLUSIVE), customer)
    order = place(client, {"country": "DE"}, {"plugin": 1}).json["order"]
    created = fake_stripe.created[-1]
    assert [int(li["price_data"]["unit_amount"]) for li in created["line_items"]] == [10000]
    assert order["total"] == 10000 and order["tax"] == 1597


def test_the_wallet_order_has_the_tax_in_its_breakdown(
    make_app, wallet_settings, paypal, tax_catalogue, customer
):
    client = buyer_of(make_app(**wallet_settings, **SELLER_DE), customer)
    place(client, {"country": "FR"}, {"plugin": 1}, provider="walletprovider")
    unit = paypal.bodies[-1]["body"]["purchase_units"][0]
    amount = unit["amount"]
    assert (amount["value"], amount["currency_code"]) == ("120.00", "EUR")
    assert amount["breakdown"]["item_total"] == {"currency_code": "EUR", "value": "100.00"}
    assert amount["breakdown"]["tax_total"] == {"currency_code": "EUR", "value": "20.00"}


def test_a_payment_of_the_net_is_held_and_the_gross_delivers(
    taxed_app, customer, dbsession, fake_stripe
):
    app = taxed_app()
    client = buyer_of(app, customer)
    short = place(client, {"country": "DE"}, {"plugin": 1}).json
    # The provider confirms 100.00: the net, not the 119.00 asked for.
    answer = pay_by_card(app, fake_stripe, short, session_changes={"amount_total": 10000})
    assert answer["status"] == "needs_review"
    number = short["order"]["number"]
    assert stored(dbsession, number).status == "needs_review"
    assert delivered(dbsession, number) == {
        "fulfilments": 0,
        "invoices": 0,
        "entitlements": 0,
        "licenses": 0,
        "receipts": 0,
    }
    full = place(client, {"country": "DE"}, {"plugin": 1}).json
    assert pay_by_card(app, fake_stripe, full)["status"] == "processed"
    order = stored(dbsession, full["order"]["number"])
    assert order.status == "paid"
    assert delivered(dbsession, order.number)["invoices"] == 1
    assert invoice_of(dbsession, order).total == 11900


# --- the evidence of where the buyer is -------------------------------------------------------


def test_a_network_country_other_than_the_billing_one_flags_the_order(
    taxed_app, customer, admin, dbsession, fake_stripe
):
    app = taxed_app(**{"cmsshop.tax.country_header": "X-Country-Code"})
    client = buyer_of(app, customer)
    agreeing = place(
        client, {"country": "DE"}, {"plugin": 1}, headers={"X-Country-Code": "DE"}
    ).json["order"]
    details = stored(dbsession, agreeing["number"]).tax_details
    assert (details["evidence"], details["evidenceCountry"], details["flags"]) == (
        "agree",
        "DE",
        [],
    )
    placed = place(client, {"country": "DE"}, {"plugin": 1}, headers={"X-Country-Code": "fr"}).json
    order = stored(dbsession, placed["order"]["number"])
    # The billing country decides the tax; the disagreement is for a human to check.
    assert (order.tax, order.total, order.tax_details["regime"]) == (1900, 11900, "domestic")
    assert order.tax_details["evidence"] == "mismatch"
    assert order.tax_details["evidenceCountry"] == "FR"
    assert order.tax_details["flags"] == ["evidence_mismatch", "needs_review"]
    assert pay_by_card(app, fake_stripe, placed)["status"] == "processed"
    console = logged_in(app, admin)
    text = " ".join(console.get(f"/admin/orders/{order.number}").html.get_text(" ").split())
    assert "Tax: check this order." in text
    assert "network address FR" in text
    clean = " ".join(console.get(f"/admin/orders/{agreeing['number']}").html.get_text(" ").split())
    assert "Tax: check this order." not in clean


def test_the_card_country_is_recorded_at_fulfilment_and_a_difference_flagged(
    taxed_app, customer, admin, dbsession, fake_stripe
):
    app = taxed_app()
    client = buyer_of(app, customer)
    same = place(client, {"country": "DE"}, {"plugin": 1}).json
    other = place(client, {"country": "DE"}, {"plugin": 1}).json
    pay_by_card(
        app, fake_stripe, same, session_changes={"customer_details": {"address": {"country": "DE"}}}
    )
    pay_by_card(
        app,
        fake_stripe,
        other,
        session_changes={"customer_details": {"address": {"country": "AT"}}},
    )
    agrees = stored(dbsession, same["order"]["number"])
    assert agrees.status == "paid"
    assert agrees.tax_details["paymentCountry"] == "DE"
    assert (agrees.tax_details["evidence"], agrees.tax_details["flags"]) == ("agree", [])
    flagged = stored(dbsession, other["order"]["number"])
    # Paid and delivered at the tax the buyer agreed to; flagged for review.
    assert flagged.status == "paid" and (flagged.tax, flagged.total) == (1900, 11900)
    assert flagged.tax_details["paymentCountry"] == "AT"
    assert flagged.tax_details["evidence"] == "mismatch"
    assert flagged.tax_details["flags"] == ["evidence_mismatch", "needs_review"]
    assert invoice_of(dbsession, flagged).total == 11900
    text = " ".join(
        logged_in(app, admin).get(f"/admin/orders/{flagged.number}").html.get_text(" ").split()
    )
    assert "Tax: check this order." in text and "given to the payment provider AT" in text


def test_the_buyers_order_and_invoice_json_show_the_tax(
    taxed_app, customer, dbsession, fake_stripe
):
    app = taxed_app()
    client = buyer_of(app, customer)
    placed = place(client, {"country": "FI"}, {"plugin": 1}).json
    pay_by_card(app, fake_stripe, placed)
    orders = client.get("/api/dashboard/orders").json
    openapi_validator(client, "/api/dashboard/orders", "get", "200").validate(orders)
    [order] = orders["items"]
    assert (order["status"], order["tax"], order["total"]) == ("paid", 2550, 12550)
    assert order["taxDetails"]["rate"] == "25.5" and order["taxDetails"]["regime"] == "oss"
    assert [(i["net"], i["tax"], i["gross"]) for i in order["items"]] == [(10000, 2550, 12550)]
    invoices = client.get("/api/dashboard/invoices").json
    openapi_validator(client, "/api/dashboard/invoices", "get", "200").validate(invoices)
    [invoice] = invoices["items"]
    assert invoice["total"] == 12550
    assert invoice["tax"]["totals"] == [{"rate": "25.5", "net": 10000, "tax": 2550, "gross": 12550}]
