"""The console's subscriptions: the list, one subscription's timeline, and the resync
button repairing what the provider's lost events would have done."""

from __future__ import annotations

import pytest
from helpers.clients import logged_in, new_client
from helpers.subscriptions import period_end, state

from cmsshop.util import isoformat_z


@pytest.fixture
def card_admin(card_app, admin):
    client = new_client(card_app)
    client.login(admin.email)
    return client


def test_the_list_and_one_subscription_with_its_timeline(
    subscribed, card_admin, fake_stripe, customer
):
    number, sub_id = subscribed
    page = card_admin.get("/api/admin/subscriptions").json
    (row,) = page["items"]
    assert (row["providerSubscriptionId"], row["customer"]) == (sub_id, customer.email)
    assert row["status"] == "active"
    assert card_admin.get("/api/admin/subscriptions?status=ended").json["items"] == []
    card_admin.get("/api/admin/subscriptions?status=bogus", status=422)
    detail = card_admin.get(f"/api/admin/subscriptions/{row['id']}").json
    assert detail["orderNumber"] == number
    (period,) = detail["periods"]
    assert period["end"] == isoformat_z(period_end(fake_stripe))
    kinds = {entry["kind"] for entry in detail["timeline"]}
    assert kinds == {"period", "event", "license"}
    events = [e["text"] for e in detail["timeline"] if e["kind"] == "event"]
    assert any(text.startswith("invoice.paid: ") for text in events)


def test_resync_repairs_a_lost_renewal_once(subscribed, card_admin, fake_stripe, dbsession):
    number, sub_id = subscribed
    fake_stripe.renew(sub_id)  # its events never arrive
    subscription_id = state(dbsession, number)[0].id
    report = card_admin.post(f"/api/admin/subscriptions/{subscription_id}/resync").json
    assert report["error"] is None
    assert len([c for c in report["changes"] if "recorded: processed" in c]) == 1
    assert len(state(dbsession, number)[2]) == 2
    again = card_admin.post(f"/api/admin/subscriptions/{subscription_id}/resync").json
    assert again == {"changes": [], "error": None}


def test_resync_with_the_provider_down_changes_nothing(
    subscribed, card_admin, fake_stripe, dbsession
):
    number, sub_id = subscribed
    fake_stripe.renew(sub_id)
    fake_stripe.fail_with = 500
    subscription_id = state(dbsession, number)[0].id
    report = card_admin.post(f"/api/admin/subscriptions/{subscription_id}/resync").json
    assert report["changes"] == [] and "could not be asked" in report["error"]
    assert len(state(dbsession, number)[2]) == 1


@pytest.mark.parametrize("bad", ["0", "x", "99999999999"])
def test_unknown_subscriptions_answer_404(card_admin, bad):
    answer = card_admin.get(f"/api/admin/subscriptions/{bad}", status=404).json
    assert answer["code"] in ("subscription_not_found", "not_found")
    card_admin.post(f"/api/admin/subscriptions/{bad}/resync", status=404)


def test_only_admins(subscribed, card_buyer, card_app):
    card_buyer.get("/api/admin/subscriptions", status=403)
    card_buyer.post("/api/admin/subscriptions/1/resync", status=403)


def test_the_console_pages(subscribed, card_app, admin, dbsession, fake_stripe):
    number, sub_id = subscribed
    pages = logged_in(card_app, admin)
    listing = pages.get("/admin/subscriptions")
    assert sub_id in listing.text
    detail = listing.click(sub_id)
    assert "Paid periods" in detail.text and number in detail.text
    fake_stripe.renew(sub_id)
    (form,) = [f for f in detail.forms.values() if (f.action or "").endswith("/resync")]
    done = form.submit(status=303).follow()
    assert "Checked with the provider" in done.text
    assert len(state(dbsession, number)[2]) == 2
