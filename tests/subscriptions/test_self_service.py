"""The customer's subscriptions in the account: the next charge, cancelling at the
period end and resuming (asked of the fake provider, applied at once, and the
provider's own event about it changing nothing more), replacing the card on the
provider's page, and every way to call it wrongly."""

from __future__ import annotations

import pytest
from helpers.clients import logged_in, new_client
from helpers.subscriptions import GRACE, deliver_all, period_end, state, the_subscription

from cmsshop.util import isoformat_z

LIST = "/api/dashboard/subscriptions"


def route(subscription_id, action: str) -> str:
    return f"{LIST}/{subscription_id}/{action}"


def mine(buyer) -> dict:
    (item,) = buyer.get(LIST).json["items"]
    return item


def test_the_account_shows_the_next_charge(subscribed, card_buyer, fake_stripe):
    item = mine(card_buyer)
    assert item["status"] == "active"
    assert item["product"] == "SiteGuard"
    assert item["paidThrough"] == isoformat_z(period_end(fake_stripe))
    assert item["nextCharge"] == {
        "at": isoformat_z(period_end(fake_stripe)),
        "amount": 4900,
        "currency": "EUR",
    }
    assert (item["canCancel"], item["canResume"], item["endsAt"]) == (True, False, None)


def test_cancel_at_period_end_then_resume(subscribed, card_buyer, fake_stripe, webhook, dbsession):
    number, sub_id = subscribed
    paid_through = state(dbsession, number)[0].paid_through
    cancelled = card_buyer.post(route(mine(card_buyer)["id"], "cancel")).json
    assert cancelled["status"] == "cancel_scheduled"
    assert cancelled["endsAt"] == isoformat_z(paid_through)
    assert cancelled["nextCharge"] is None and cancelled["canResume"] is True
    assert the_subscription(fake_stripe)["cancel_at_period_end"] is True
    subscription, license, _ = state(dbsession, number)
    assert license.expires_at == paid_through  # the paid period, never less
    # The provider's own event about the same change comes later and changes nothing.
    held, fake_stripe.held = fake_stripe.held, []
    assert deliver_all(webhook, held) in ([], ["processed"])
    assert state(dbsession, number)[1].expires_at == paid_through
    resumed = card_buyer.post(route(cancelled["id"], "resume")).json
    assert resumed["status"] == "active"
    assert the_subscription(fake_stripe)["cancel_at_period_end"] is False
    assert state(dbsession, number)[1].expires_at == paid_through + GRACE


def test_changes_that_make_no_sense_are_refused(subscribed, card_buyer, fake_stripe):
    subscription_id = mine(card_buyer)["id"]
    refused = card_buyer.post(route(subscription_id, "resume"), status=409).json
    assert refused["code"] == "subscription_not_cancelling"
    card_buyer.post(route(subscription_id, "cancel"))
    refused = card_buyer.post(route(subscription_id, "cancel"), status=409).json
    assert refused["code"] == "subscription_not_renewing"
    assert {"title", "message", "hints", "supportCode"} <= set(refused)


@pytest.mark.parametrize("bad_id", ["0", "-1", "abc", "99999999999", "1.5"])
def test_unknown_ids_answer_404(subscribed, card_buyer, bad_id):
    answer = card_buyer.post(route(bad_id, "cancel"), status=404).json
    assert answer["code"] in ("subscription_not_found", "not_found")


def test_another_customers_subscription_is_not_found(
    subscribed, card_app, other_customer, card_buyer, fake_stripe
):
    subscription_id = mine(card_buyer)["id"]
    other = new_client(card_app)
    other.login(other_customer.email)
    assert other.get(LIST).json["items"] == []
    for action in ("cancel", "resume", "payment-method"):
        answer = other.post(route(subscription_id, action), status=404).json
        assert answer["code"] == "subscription_not_found"
    assert the_subscription(fake_stripe)["cancel_at_period_end"] is False


def test_login_and_csrf_are_required(subscribed, card_app, card_buyer):
    subscription_id = mine(card_buyer)["id"]
    new_client(card_app).get(LIST, status=401)
    card_buyer.post(route(subscription_id, "cancel"), headers={"X-CSRF-Token": "stale"}, status=403)
    assert mine(card_buyer)["status"] == "active"


def test_the_provider_down_changes_nothing(subscribed, card_buyer, fake_stripe, dbsession):
    number, _ = subscribed
    fake_stripe.fail_with = 500
    answer = card_buyer.post(route(mine(card_buyer)["id"], "cancel"), status=503).json
    assert answer["code"] == "subscription_provider_unavailable"
    fake_stripe.fail_with = None
    assert mine(card_buyer)["status"] == "active"
    assert state(dbsession, number)[0].status == "active"


def test_the_card_is_replaced_on_the_providers_page(subscribed, card_buyer, fake_stripe):
    answer = card_buyer.post(route(mine(card_buyer)["id"], "payment-method")).json
    (portal,) = fake_stripe.portal_sessions
    assert answer["redirectUrl"] == portal["url"]
    assert portal["customer"] == the_subscription(fake_stripe)["customer"]
    assert portal["flow_data"]["type"] == "payment_method_update"
    assert portal["return_url"].endswith("/account/subscriptions")


def form_to(page, ending: str):
    (form,) = [f for f in page.forms.values() if (f.action or "").endswith(ending)]
    return form


def test_the_account_page_cancels_and_resumes(subscribed, card_app, customer, fake_stripe):
    pages = logged_in(card_app, customer)
    page = pages.get("/account/subscriptions")
    assert "Next charge" in page.text and "49.00" in page.text
    done = form_to(page, "/cancel").submit(status=303).follow()
    assert "ends at the end of the period you paid for" in done.text
    assert "it will not renew" in done.text
    resumed = form_to(done, "/resume").submit(status=303).follow()
    assert "renews itself again" in resumed.text
    handed_off = form_to(resumed, "/payment-method").submit(status=303)
    assert handed_off.location == fake_stripe.portal_sessions[-1]["url"]
