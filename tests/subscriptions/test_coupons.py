"""Coupons on a subscription: through the card provider (Stripe's scheme) a coupon takes
its discount off the first period only, as Stripe does it (a one-off Stripe coupon of the
order's discount, tax included, on the subscription's Checkout Session), and every later
period is charged and taxed at the full price (the wallet provider's are in
test_wallet_coupons.py). Bought by a German consumer from the German seller (19 % added
on top), so the tax of each period shows."""

from __future__ import annotations

import random

import pytest
import webtest
from helpers.checkout import in_days, order_count, redemption_statuses
from helpers.clients import new_client, page_client
from helpers.coupons import make_coupon, place_with_coupon, reserved_count
from helpers.outbox import rows as outbox_rows
from helpers.subscriptions import GRACE, period_end, send, state
from helpers.tax import SELLER_DE
from sqlalchemy import select, update

from cmsshop.models import Coupon, Invoice, Order, SubscriptionPlan
from cmsshop.scripts.admin import main as admin_main

BILLING_DE = {"country": "DE"}
ONE_OFF = "themes"  # sold once, not as a subscription

# site-guard costs EUR 49.00 a month, 19 % on top: EUR 58.31 a month in full.
FULL_NET, FULL_TAX = 4900, 931


@pytest.fixture
def taxed(make_app, card_settings, catalogue):
    """The German seller's app (tax on), paid through the fake card provider."""
    return make_app(**card_settings, **SELLER_DE)


@pytest.fixture
def buyer(taxed, customer):
    client = new_client(taxed)
    client.login(customer.email)
    return client


def webhook_of(app):
    """POST a delivery to ``app``'s card webhook: ``post(body, headers, status=...)``."""
    client = webtest.TestApp(app)

    def post(body: bytes, headers: dict, status="*"):
        return client.post("/api/webhooks/cardprovider", body, headers=headers, status=status)

    return post


@pytest.fixture
def hook(taxed):
    return webhook_of(taxed)


def checkout(buyer, code: str | None, slug: str = "site-guard", status=201, **extra):
    body = {
        "billing": BILLING_DE,
        "items": [{"product": slug}],
        "acceptTerms": True,
        **({"coupon": code} if code else {}),
        **extra,
    }
    return buyer.post_json("/api/store/checkout", body, status=status).json


def pay(fake_stripe, placed) -> dict[str, dict]:
    """The buyer pays on the provider's page: the events Stripe would send, by type."""
    fake_stripe.hold_webhooks = True
    fake_stripe.pay(placed["redirectUrl"].rsplit("/", 1)[1])
    held, fake_stripe.held = fake_stripe.held, []
    return {payload["type"]: payload for payload in held}


def order_of(dbsession, number: str) -> Order:
    dbsession.rollback()
    dbsession.expire_all()
    return dbsession.scalar(select(Order).where(Order.number == number))


def invoice_of(dbsession, order: Order) -> Invoice:
    return dbsession.scalar(select(Invoice).where(Invoice.order_id == order.id))


# (coupon, the first period's net, its tax): the tax is the discounted net's, 19 %
# rounded half up; the Stripe coupon is the full gross less the first period's gross.
COUPONS = {
    "percent": ({"percent_off": 20}, 3920, 745),
    "fixed": ({"kind": "fixed", "amounts": {"EUR": {"amount_off": 1000}}}, 3900, 741),
    # Where a proportion of the first period's tax would tax the renewal wrongly (the
    # first tax is rounded on EUR 0.49: 5831 x 9 / 58 is 905, not 931).
    "nearly all": ({"percent_off": 99}, 49, 9),
}


@pytest.mark.parametrize("kind", list(COUPONS))
def test_a_coupon_discounts_the_first_period_and_renewals_cost_the_full_price(
    buyer, hook, fake_stripe, monthly, dbsession, kind
):
    fields, net, tax = COUPONS[kind]
    make_coupon(dbsession, "FIRST", **fields)
    placed = checkout(buyer, "FIRST")
    number = placed["order"]["number"]
    assert placed["order"]["total"] == net + tax

    # The session: the lines at the full price (charged every month), a one-off coupon.
    (created,) = fake_stripe.created
    product, tax_line = created["line_items"]
    assert product["price_data"]["unit_amount"] == str(FULL_NET)
    assert tax_line["price_data"]["unit_amount"] == str(FULL_TAX)
    assert tax_line["price_data"]["recurring"] == product["price_data"]["recurring"]
    (coupon,) = fake_stripe.coupons.values()
    assert created["discounts"] == [{"coupon": coupon["id"]}]
    assert coupon["amount_off"] == FULL_NET + FULL_TAX - (net + tax)
    assert (coupon["currency"], coupon["duration"], coupon["max_redemptions"]) == (
        "eur",
        "once",
        1,
    )
    assert list(fake_stripe.coupon_answers) == [f"cmsshop-coupon-{number}"]

    # The first period: the order's total is what Stripe's first invoice charged.
    events = list(pay(fake_stripe, placed).values()) * 2
    random.Random(3).shuffle(events)
    for payload in events:
        send(hook, payload)
    first = order_of(dbsession, number)
    assert (first.status, first.total, first.tax, first.coupon_code) == (
        "paid",
        net + tax,
        tax,
        "FIRST",
    )
    document = invoice_of(dbsession, first)
    assert document.total == net + tax
    assert document.tax["totals"][0]["tax"] == tax
    subscription, license, periods = state(dbsession, number)
    assert [p.amount for p in periods] == [net + tax]
    assert subscription.status == "active"
    assert license.expires_at == subscription.paid_through + GRACE

    # The account says the next charge is the full price, not the first period's.
    (card,) = buyer.get("/api/dashboard/subscriptions").json["items"]
    assert card["nextCharge"]["amount"] == FULL_NET + FULL_TAX

    # A renewal: the full price, taxed at the first order's rate; its events shuffled.
    renewed = fake_stripe.renew(subscription.provider_subscription_id) * 3
    random.Random(5).shuffle(renewed)
    for payload in renewed:
        send(hook, payload)
    subscription, license, periods = state(dbsession, number)
    assert len(periods) == 2
    renewal = dbsession.get(Order, periods[1].order_id)
    assert (renewal.status, renewal.total, renewal.tax, renewal.discount) == (
        "paid",
        FULL_NET + FULL_TAX,
        FULL_TAX,
        0,
    )
    assert renewal.coupon_code is None
    (item,) = renewal.items
    assert (item.kind, item.net, item.tax) == ("renewal", FULL_NET, FULL_TAX)
    assert invoice_of(dbsession, renewal).total == FULL_NET + FULL_TAX
    assert subscription.paid_through == period_end(fake_stripe) == periods[1].period_end
    assert license.expires_at == subscription.paid_through + GRACE

    # The coupon was used once, however often the events came.
    assert redemption_statuses(dbsession, "FIRST") == ["redeemed"]
    assert reserved_count(dbsession, "FIRST") == 1


def test_without_a_coupon_nothing_is_sent_to_stripe_about_one(buyer, fake_stripe, monthly):
    placed = checkout(buyer, None)
    (created,) = fake_stripe.created
    assert "discounts" not in created and fake_stripe.coupons == {}
    assert placed["order"]["total"] == FULL_NET + FULL_TAX


def test_a_coupon_with_prices_that_include_tax(
    make_app, card_settings, catalogue, customer, fake_stripe, monthly, dbsession
):
    app = make_app(**card_settings, **SELLER_DE, **{"cmsshop.tax.prices_include_tax": "true"})
    client = new_client(app)
    client.login(customer.email)
    make_coupon(dbsession, "FIRST", percent_off=20)
    placed = checkout(client, "FIRST")
    number = placed["order"]["number"]
    (created,) = fake_stripe.created
    (line,) = created["line_items"]  # the tax is in the price
    assert line["price_data"]["unit_amount"] == "4900"
    (coupon,) = fake_stripe.coupons.values()
    assert coupon["amount_off"] == 980
    hook = webhook_of(app)
    for payload in pay(fake_stripe, placed).values():
        send(hook, payload)
    # EUR 39.20 with 19 % in it: net 32.94, tax 6.26.
    first = order_of(dbsession, number)
    assert (first.status, first.total, first.tax) == ("paid", 3920, 626)
    subscription, _, _ = state(dbsession, number)
    for payload in fake_stripe.renew(subscription.provider_subscription_id):
        send(hook, payload)
    _, _, periods = state(dbsession, number)
    renewal = dbsession.get(Order, periods[1].order_id)
    # 49.00 with 19 % in it: net 41.18, tax 7.82, as a full-price order of it is taxed.
    assert (renewal.total, renewal.tax, renewal.items[0].net) == (4900, 782, 4118)


# --- refusals -----------------------------------------------------------------------------


def refusal(answer: dict) -> tuple[str, str]:
    assert {"code", "title", "message", "hints", "supportCode"} <= set(answer), answer
    return answer["code"], answer["errors"]["coupon"]


@pytest.mark.parametrize(
    "fields",
    [
        {"valid_until": in_days(-1)},  # expired
        {"kind": "fixed", "amounts": {"USD": {"amount_off": 500}}},  # not for EUR orders
        {"max_redemptions": 1},  # used up (by another order, below)
        {"paused": True},
    ],
    ids=["expired", "foreign currency", "used up", "paused"],
)
def test_a_coupon_refused_for_a_one_off_purchase_is_refused_for_a_subscription(
    buyer, fake_stripe, monthly, dbsession, other_customer, fields
):
    make_coupon(dbsession, "BAD", **fields)
    if fields.get("max_redemptions"):
        place_with_coupon(dbsession, other_customer, "BAD")
    before = order_count(dbsession)
    subscription = checkout(buyer, "BAD", status=422)
    one_off = checkout(buyer, "BAD", slug=ONE_OFF, status=422)
    assert refusal(subscription) == refusal(one_off)
    assert order_count(dbsession) == before
    assert fake_stripe.created == [] and fake_stripe.coupons == {}


def test_a_coupon_for_other_products_is_refused(buyer, fake_stripe, monthly, dbsession):
    make_coupon(dbsession, "THEMES", products=(ONE_OFF,))
    assert refusal(checkout(buyer, "THEMES", status=422))[0] == "coupon_not_applicable"
    assert fake_stripe.created == []


def test_a_coupon_that_makes_the_first_period_free_is_refused(
    buyer, fake_stripe, monthly, dbsession
):
    make_coupon(dbsession, "FREE", percent_off=100)
    before = order_count(dbsession)
    answer = checkout(buyer, "FREE", status=422)
    assert "first period free" in answer["errors"]["coupon"]
    assert order_count(dbsession) == before
    assert fake_stripe.created == [] and fake_stripe.coupons == {}
    assert reserved_count(dbsession, "FREE") == 0


def test_a_coupon_leaving_a_first_period_below_the_card_minimum_is_refused(
    buyer, fake_stripe, monthly, dbsession
):
    # EUR 49.00 less 48.60: a first period of EUR 0.40 and 0.08 of tax, under the card
    # provider's EUR 0.50 (every later period would be in full: the first is charged now).
    make_coupon(dbsession, "NEARLY", kind="fixed", amounts={"EUR": {"amount_off": 4860}})
    before = order_count(dbsession)
    answer = checkout(buyer, "NEARLY", status=422)
    assert "at least EUR0.50, and this one comes to EUR0.48" in answer["errors"]["coupon"]
    assert order_count(dbsession) == before
    assert fake_stripe.created == [] and fake_stripe.coupons == {}
    assert reserved_count(dbsession, "NEARLY") == 0


def test_a_coupon_on_a_subscription_that_starts_with_a_free_trial_is_refused(
    buyer, fake_stripe, monthly, dbsession
):
    # The first charge comes after the trial, at the full price: nothing paid at checkout
    # for the coupon to discount. Without the trial the same coupon is taken.
    make_coupon(dbsession, "SAVE20", percent_off=20)
    monthly.trial_days = 14
    dbsession.commit()
    before = order_count(dbsession)
    answer = checkout(buyer, "SAVE20", status=422)
    assert refusal(answer)[0] == "validation_failed", answer
    assert "free trial of 14 days" in answer["errors"]["coupon"]
    assert order_count(dbsession) == before
    assert fake_stripe.created == [] and fake_stripe.coupons == {}
    assert reserved_count(dbsession, "SAVE20") == 0
    monthly.trial_days = 0
    dbsession.commit()
    assert checkout(buyer, "SAVE20")["redirectUrl"]
    assert len(fake_stripe.coupons) == 1


def test_stripe_down_while_making_the_coupon_gives_the_coupon_back(
    buyer, fake_stripe, monthly, dbsession
):
    make_coupon(dbsession, "FIRST", percent_off=20, max_redemptions=1)
    fake_stripe.fail_with = 500
    buyer.post_json(
        "/api/store/checkout",
        {
            "billing": BILLING_DE,
            "items": [{"product": "site-guard"}],
            "acceptTerms": True,
            "coupon": "FIRST",
        },
        status=503,
    )
    assert redemption_statuses(dbsession, "FIRST") == ["released"]
    assert reserved_count(dbsession, "FIRST") == 0
    dbsession.rollback()
    assert dbsession.scalar(select(Order.status)) == "cancelled"
    fake_stripe.fail_with = None
    placed = checkout(buyer, "FIRST")  # the code can be used again
    assert placed["order"]["total"] == 3920 + 745


# --- the cart -----------------------------------------------------------------------------


def test_the_cart_says_the_discount_is_for_the_first_period_only(
    taxed, monthly, dbsession, customer
):
    make_coupon(dbsession, "FIRST", percent_off=20)
    client = page_client(taxed)
    page = client.get("/products/site-guard")
    form = next(f for f in page.forms.values() if f.action == "/checkout")
    client.post("/cart/add", dict(form.submit_fields()), status=303)
    form = next(f for f in client.get("/cart").forms.values() if f.action == "/cart/coupon")
    form["code"] = "FIRST"
    form.submit(name="action", value="apply", status=303)
    page = client.get("/cart")
    terms = " ".join(page.html.find(id="subscription-terms").text.split())
    assert "EUR39.20 for the first month, then EUR49.00 every month" in terms
    assert "first month only" in terms
    button = page.html.find("button", attrs={"aria-describedby": "subscription-terms"})
    assert " ".join(button.text.split()) == (
        "Subscribe: EUR39.20 for the first month, then EUR49.00 every month"
    )
    assert dbsession.scalar(select(Coupon.reserved).where(Coupon.code == "FIRST")) == 0


def test_the_renewal_reminder_states_the_full_price(
    monthly, card_buyer, fake_stripe, webhook, card_ini, dbsession
):
    dbsession.execute(update(SubscriptionPlan).values(interval="year"))
    dbsession.commit()
    make_coupon(dbsession, "FIRST", percent_off=20)
    placed = card_buyer.post_json(
        "/api/store/checkout",
        {
            "billing": {"country": "US"},
            "items": [{"product": "site-guard"}],
            "acceptTerms": True,
            "coupon": "FIRST",
        },
        status=201,
    ).json
    assert placed["order"]["total"] == 3920
    events = pay(fake_stripe, placed)
    send(webhook, events["invoice.paid"])
    assert admin_main([card_ini, "remind-renewals", "--days", "366"]) == 0
    (mail,) = [m for m in outbox_rows(dbsession) if m.kind == "subscription_renewing"]
    assert "EUR49.00 will be charged" in mail.text_body
