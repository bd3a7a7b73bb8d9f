"""Coupons on a subscription through the wallet provider (PayPal's scheme): the coupon
takes its discount off the first period only, as PayPal does it: the plan opens with a
priced TRIAL cycle of the order's total (discounted, tax included), then the REGULAR
cycle at the full price. Bought by a German consumer from the German seller (19 % added
on top), so the tax of each period shows."""

from __future__ import annotations

import random

import pytest
from helpers.checkout import delivered, redemption_statuses
from helpers.clients import new_client
from helpers.coupons import make_coupon, reserved_count
from helpers.subscriptions import GRACE, next_billing_time, state
from helpers.tax import SELLER_DE
from sqlalchemy import func, select

from cmsshop.models import Invoice, Order, SubscriptionProviderPlan

# site-guard costs EUR 49.00 a month, 19 % on top: EUR 58.31 a month in full.
FULL_NET, FULL_TAX = 4900, 931

# (coupon, the first period's net, its tax, PayPal's price of the first cycle).
COUPONS = {
    "percent": ({"percent_off": 20}, 3920, 745, "46.65"),
    "fixed": ({"kind": "fixed", "amounts": {"EUR": {"amount_off": 1000}}}, 3900, 741, "46.41"),
}


@pytest.fixture
def taxed(make_app, wallet_settings, catalogue):
    """The German seller's app (tax on), paid through the fake wallet provider."""
    return make_app(**wallet_settings, **SELLER_DE)


def client_of(app, user):
    client = new_client(app)
    client.login(user.email)
    return client


def checkout(buyer, code: str | None, status=201) -> dict:
    body = {
        "billing": {"country": "DE"},
        "items": [{"product": "site-guard"}],
        "acceptTerms": True,
        "provider": "walletprovider",
        **({"coupon": code} if code else {}),
    }
    return buyer.post_json("/api/store/checkout", body, status=status).json


def subscription_of(paypal, number: str) -> dict:
    (found,) = [s for s in paypal.subscriptions.values() if s["custom_id"] == number]
    return found


def order_of(dbsession, number: str) -> Order:
    dbsession.rollback()
    dbsession.expire_all()
    return dbsession.scalar(select(Order).where(Order.number == number))


def stored_plans(dbsession) -> list[tuple[int, int, str]]:
    dbsession.rollback()
    rows = dbsession.execute(
        select(
            SubscriptionProviderPlan.amount,
            SubscriptionProviderPlan.first_amount,
            SubscriptionProviderPlan.provider_plan_id,
        ).order_by(SubscriptionProviderPlan.id)
    )
    return [tuple(row) for row in rows]


# "never": a PayPal that writes no pricing version on the priced TRIAL cycle's execution
# either; the plan's own cycles still say it was priced (not a free trial).
@pytest.mark.parametrize("versions", ["priced", "never"])
@pytest.mark.parametrize("kind", list(COUPONS))
def test_a_wallet_coupon_discounts_the_first_period_and_renewals_cost_the_full_price(
    taxed, customer, paypal, send, monthly, dbsession, kind, versions
):
    paypal.pricing_versions = versions
    fields, net, tax, first_price = COUPONS[kind]
    make_coupon(dbsession, "FIRST", **fields)
    buyer = client_of(taxed, customer)
    placed = checkout(buyer, "FIRST")
    number = placed["order"]["number"]
    assert placed["order"]["total"] == net + tax

    # The plan: a TRIAL cycle of the order's total, then the full price every month.
    (plan,) = paypal.plans.values()
    first, regular = plan["billing_cycles"]
    assert first == {
        "frequency": {"interval_unit": "MONTH", "interval_count": 1},
        "tenure_type": "TRIAL",
        "sequence": 1,
        "total_cycles": 1,
        "pricing_scheme": {"fixed_price": {"currency_code": "EUR", "value": first_price}},
    }
    assert (regular["tenure_type"], regular["sequence"], regular["total_cycles"]) == (
        "REGULAR",
        2,
        0,
    )
    assert regular["pricing_scheme"]["fixed_price"] == {"currency_code": "EUR", "value": "58.31"}
    assert stored_plans(dbsession) == [(FULL_NET + FULL_TAX, net + tax, plan["id"])]

    # The first period: PayPal's first sale is the order's total; events twice, shuffled.
    sub_id = subscription_of(paypal, number)["id"]
    events = paypal.approve(sub_id) * 2
    assert events[1]["resource"]["amount"]["total"] == first_price
    random.Random(3).shuffle(events)
    for payload in events:
        send(payload, status=200)
    order = order_of(dbsession, number)
    assert (order.status, order.total, order.tax, order.coupon_code) == (
        "paid",
        net + tax,
        tax,
        "FIRST",
    )
    assert delivered(dbsession, number)["fulfilments"] == 1
    document = dbsession.scalar(select(Invoice).where(Invoice.order_id == order.id))
    assert document.total == net + tax
    assert document.tax["totals"][0]["tax"] == tax
    subscription, license, periods = state(dbsession, number)
    assert [p.amount for p in periods] == [net + tax]
    assert periods[0].order_id == order.id  # the first period, not a renewal
    assert subscription.status == "active"
    assert license.expires_at == subscription.paid_through + GRACE
    assert subscription.paid_through == next_billing_time(paypal, sub_id)

    # The account says the next charge is the full price, not the first period's.
    (card,) = buyer.get("/api/dashboard/subscriptions").json["items"]
    assert card["nextCharge"]["amount"] == FULL_NET + FULL_TAX

    # A renewal: the full price, taxed at the first order's rate; its sale three times.
    renewed = paypal.renew(sub_id) * 3
    assert renewed[0]["resource"]["amount"]["total"] == "58.31"
    for payload in renewed:
        send(payload, status=200)
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
    assert subscription.paid_through == next_billing_time(paypal, sub_id)
    assert license.expires_at == subscription.paid_through + GRACE

    # The coupon was used once, however often the events came.
    assert redemption_statuses(dbsession, "FIRST") == ["redeemed"]
    assert reserved_count(dbsession, "FIRST") == 1


def test_a_discounted_plan_is_reused_for_the_same_first_amount_only(
    taxed, customer, other_customer, make_user, paypal, monthly, dbsession
):
    make_coupon(dbsession, "FIRST", percent_off=20)
    make_coupon(dbsession, "TEN", percent_off=10)
    checkout(client_of(taxed, customer), "FIRST")
    (plan,) = paypal.plans.values()
    # Another buyer with the same coupon amount: the same PayPal plan.
    checkout(client_of(taxed, other_customer), "FIRST")
    assert len(paypal.plans) == 1
    subscriptions = list(paypal.subscriptions.values())
    assert [s["plan_id"] for s in subscriptions] == [plan["id"], plan["id"]]
    # Without a coupon: a plan of the full price from the start, of the same product.
    third = make_user("third@example.com")
    assert checkout(client_of(taxed, third), None)["order"]["total"] == FULL_NET + FULL_TAX
    # Another discount: another first cycle, another plan.
    fourth = make_user("fourth@example.com")
    assert checkout(client_of(taxed, fourth), "TEN")["order"]["total"] == 4410 + 838
    assert len(paypal.plans) == 3
    full, ten = [p for p in paypal.plans.values() if p["id"] != plan["id"]]
    assert [c["tenure_type"] for c in full["billing_cycles"]] == ["REGULAR"]
    assert full["billing_cycles"][0]["pricing_scheme"]["fixed_price"]["value"] == "58.31"
    assert ten["billing_cycles"][0]["pricing_scheme"]["fixed_price"]["value"] == "52.48"
    assert {p["product_id"] for p in paypal.plans.values()} == {plan["product_id"]}
    assert stored_plans(dbsession) == [
        (FULL_NET + FULL_TAX, 3920 + 745, plan["id"]),
        (FULL_NET + FULL_TAX, 0, full["id"]),
        (FULL_NET + FULL_TAX, 4410 + 838, ten["id"]),
    ]


def test_a_wallet_coupon_that_makes_the_first_period_free_is_refused(
    taxed, customer, paypal, monthly, dbsession
):
    make_coupon(dbsession, "FREE", percent_off=100)
    dbsession.rollback()
    before = dbsession.scalar(select(func.count()).select_from(Order))
    answer = checkout(client_of(taxed, customer), "FREE", status=422)
    assert {"code", "title", "message", "hints", "supportCode"} <= set(answer)
    assert "first period free" in answer["errors"]["coupon"]
    dbsession.rollback()
    assert dbsession.scalar(select(func.count()).select_from(Order)) == before
    assert paypal.plans == {} and paypal.subscriptions == {}
    assert reserved_count(dbsession, "FREE") == 0


def test_a_wallet_coupon_with_a_free_trial_is_refused(taxed, customer, paypal, monthly, dbsession):
    make_coupon(dbsession, "FIRST", percent_off=20)
    monthly.trial_days = 14
    dbsession.commit()
    answer = checkout(client_of(taxed, customer), "FIRST", status=422)
    assert "free trial of 14 days" in answer["errors"]["coupon"]
    assert paypal.plans == {} and paypal.subscriptions == {}
    assert reserved_count(dbsession, "FIRST") == 0
