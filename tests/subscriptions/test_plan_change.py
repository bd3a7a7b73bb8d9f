"""Changing a subscription to a higher tier: the provider's proration shown before
confirming, the change asked of the provider, and the license upgraded once when the
provider's invoice for the rest of the period is paid, whatever order its events come in."""

from __future__ import annotations

import random

import pytest
from helpers.subscriptions import deliver_all, state

from cmsshop.models import License, LicenseChange, Order, Product, SubscriptionPlan

LIST = "/api/dashboard/subscriptions"


@pytest.fixture
def agency_monthly(dbsession, tiers, monthly):
    """site-guard-agency (10 seats, EUR 129) sold monthly too."""
    dbsession.add(SubscriptionPlan(product_id=tiers["agency"].id, interval="month"))
    dbsession.commit()


def mine(buyer) -> dict:
    (item,) = buyer.get(LIST).json["items"]
    return item


def test_a_higher_tier_is_offered_previewed_and_changed_to_once(
    agency_monthly, subscribed, card_buyer, fake_stripe, webhook, dbsession
):
    number, sub_id = subscribed
    item = mine(card_buyer)
    assert item["planChoices"] == [
        {
            "product": "site-guard-agency",
            "name": "SiteGuard Agency",
            "amount": 12900,
            "currency": "EUR",
        }
    ]
    preview = card_buyer.post_json(
        f"{LIST}/{item['id']}/plan-preview", {"product": "site-guard-agency"}
    ).json
    assert 0 < preview["chargedNow"]["amount"] <= 8000  # the difference, for what is left
    assert preview["then"] == {"amount": 12900, "currency": "EUR"}
    assert fake_stripe.subscriptions[sub_id]["items"]["data"][0]["price"]["unit_amount"] == 4900

    card_buyer.post_json(f"{LIST}/{item['id']}/plan", {"product": "site-guard-agency"})
    held, fake_stripe.held = fake_stripe.held, []
    storm = held * 3
    random.Random(5).shuffle(storm)
    deliver_all(webhook, storm)

    subscription, license, periods = state(dbsession, number)
    agency = dbsession.query(Product).filter_by(slug="site-guard-agency").one()
    assert (license.product_id, license.max_activations) == (agency.id, 10)
    assert len(periods) == 2 and subscription.paid_through == periods[0].period_end
    change = dbsession.get(Order, periods[1].order_id)
    assert (change.status, change.items[0].kind, change.total) == (
        "paid",
        "upgrade",
        periods[1].amount,
    )
    assert dbsession.query(LicenseChange).filter_by(kind="upgrade").count() == 1
    assert mine(card_buyer)["planChoices"] == []
    # The next renewal charges the new plan's amount.
    deliver_all(webhook, fake_stripe.renew(sub_id))
    renewal = dbsession.get(Order, state(dbsession, number)[2][2].order_id)
    assert (renewal.total, renewal.items[0].kind) == (12900, "renewal")


@pytest.mark.parametrize("product", ["site-guard", "themes", "nope", "site-guard-agency-x"])
def test_only_an_offered_tier_is_accepted(
    agency_monthly, subscribed, card_buyer, fake_stripe, product
):
    subscription_id = mine(card_buyer)["id"]
    for action in ("plan-preview", "plan"):
        refused = card_buyer.post_json(
            f"{LIST}/{subscription_id}/{action}", {"product": product}, status=422
        ).json
        assert "product" in refused["errors"]
    assert fake_stripe.held == []


@pytest.mark.parametrize("body", [{}, {"product": 5}, {"product": ""}, [], {"product": "a" * 500}])
def test_malformed_bodies_are_refused(agency_monthly, subscribed, card_buyer, body):
    subscription_id = mine(card_buyer)["id"]
    answer = card_buyer.post_json(f"{LIST}/{subscription_id}/plan", body, status=(400, 422)).json
    assert {"code", "title", "message", "hints", "supportCode"} <= set(answer)


def test_the_provider_down_changes_nothing(
    agency_monthly, subscribed, card_buyer, fake_stripe, dbsession
):
    number, sub_id = subscribed
    subscription_id = mine(card_buyer)["id"]
    fake_stripe.fail_with = 500
    answer = card_buyer.post_json(
        f"{LIST}/{subscription_id}/plan", {"product": "site-guard-agency"}, status=503
    ).json
    assert answer["code"] == "subscription_provider_unavailable"
    fake_stripe.fail_with = None
    assert fake_stripe.subscriptions[sub_id]["items"]["data"][0]["price"]["unit_amount"] == 4900
    license = state(dbsession, number)[1]
    assert dbsession.get(License, license.id).max_activations == 3


def test_the_account_page_previews_then_changes(
    agency_monthly, subscribed, card_app, customer, fake_stripe
):
    from helpers.clients import logged_in

    pages = logged_in(card_app, customer)
    page = pages.get("/account/subscriptions")
    (form,) = [f for f in page.forms.values() if (f.action or "").endswith("/plan-preview")]
    preview = form.submit()
    assert "Charged now" in preview.text and "129.00" in preview.text
    (confirm,) = [f for f in preview.forms.values() if (f.action or "").endswith("/plan")]
    done = confirm.submit(status=303).follow()
    assert "as soon as it confirms the payment" in done.text
    assert fake_stripe.held  # the provider's invoice for the rest of the period
