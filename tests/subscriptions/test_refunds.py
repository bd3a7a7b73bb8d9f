"""Refunding a subscription's payment from the console (the admin API): a wallet
provider's (PayPal) payment is a v1 sale, refunded through PayPal's sales API, in full or
in part, once per idempotency key; its PAYMENT.SALE.REFUNDED then confirms that refund
(one refund row, one credit note) and a full one takes that period back.

A full refund of the order that bought a subscription, or of its latest paid period's
order, cancels the subscription at the provider (Stripe's DELETE, PayPal's cancel) unless
the refund says cancelSubscription false; a provider that cannot be reached leaves the
refund standing, says so, and the reconciliation (or the request sent again) cancels it."""

from __future__ import annotations

import pytest
from fakes.shop import order_status
from helpers.clients import new_client
from helpers.subscriptions import send as send_card
from helpers.subscriptions import state
from sqlalchemy import func, select

from cmsshop.models import CreditNote, Order, Refund


@pytest.fixture
def card_admin(card_app, admin):
    client = new_client(card_app)
    client.login(admin.email)
    return client


@pytest.fixture
def wallet_admin(wallet_app, admin):
    client = new_client(wallet_app)
    client.login(admin.email)
    return client


def post_refund(client, number, body, key="k-1", status="*"):
    return client.post_json(
        f"/api/admin/orders/{number}/refunds", body, headers={"Idempotency-Key": key}, status=status
    )


def count(dbsession, model, *where) -> int:
    dbsession.rollback()
    return dbsession.scalar(select(func.count()).select_from(model).where(*where))


def wallet_renewal(wallet_subscribed, paypal, send, dbsession):
    """A paid renewal of the PayPal subscription: (its order, its sale id, the first
    period's end)."""
    number, sub_id = wallet_subscribed
    first_paid_through = state(dbsession, number)[0].paid_through
    (sale_event,) = paypal.renew(sub_id)
    assert send(sale_event, status=200).json["status"] == "processed"
    periods = state(dbsession, number)[2]
    renewal = dbsession.get(Order, periods[1].order_id)
    return renewal, sale_event["resource"]["id"], first_paid_through


def test_a_wallet_renewal_is_refunded_in_full_through_paypal_sales_api(
    wallet_subscribed, wallet_admin, paypal, send, dbsession
):
    number, _ = wallet_subscribed
    renewal, sale_id, first_paid_through = wallet_renewal(
        wallet_subscribed, paypal, send, dbsession
    )
    made = post_refund(wallet_admin, renewal.number, {"full": True, "reason": "asked"}, status=201)
    refund = made.json["refund"]
    assert (refund["status"], refund["amount"], refund["full"]) == ("succeeded", 4900, True)
    (call,) = paypal.refund_calls
    assert call["sale"] == sale_id and call["requestId"]
    assert call["body"] == {"amount": {"total": "49.00", "currency": "EUR"}, "description": "asked"}
    assert refund["providerRefundId"] in paypal.sale_refunds
    # The same key: the same refund, PayPal not asked again.
    again = post_refund(wallet_admin, renewal.number, {"full": True}, status=200)
    assert again.json["refund"]["id"] == refund["id"] and len(paypal.refund_calls) == 1
    # Nothing taken back before PayPal's event; its event takes the period back, once.
    assert state(dbsession, number)[2][1].refunded_at is None
    event = paypal.sale_refund_event_of(refund["providerRefundId"])
    assert [send(event, status=200).json["status"] for _ in range(2)] == [
        "processed",
        "duplicate",
    ]
    subscription, license, periods = state(dbsession, number)
    assert [p.refunded_at is not None for p in periods] == [False, True]
    assert subscription.paid_through == first_paid_through
    # The latest period refunded in full: the subscription was cancelled at PayPal too
    # (below), so the license ends with the period before, without the grace.
    assert refund["subscription"]["cancelled"] is True and subscription.status == "ended"
    assert license.expires_at == first_paid_through
    assert order_status(dbsession, renewal.number) == "refunded"
    rows = list(dbsession.scalars(select(Refund).where(Refund.order_id == renewal.id)))
    assert [(r.status, r.requested_by is not None, r.confirmed_at is not None) for r in rows] == [
        ("succeeded", True, True)
    ]
    assert count(dbsession, CreditNote) == 1
    refused = post_refund(wallet_admin, renewal.number, {"amount": 100}, key="k-2", status=409)
    assert refused.json["code"] == "order_not_refundable"


def test_a_wallet_renewal_refunded_in_part_then_too_much_is_refused(
    wallet_subscribed, wallet_admin, paypal, send, dbsession
):
    number, _ = wallet_subscribed
    renewal, sale_id, _ = wallet_renewal(wallet_subscribed, paypal, send, dbsession)
    made = post_refund(wallet_admin, renewal.number, {"amount": 1000}, status=201).json["refund"]
    assert paypal.refund_calls[0]["body"]["amount"] == {"total": "10.00", "currency": "EUR"}
    too_much = post_refund(wallet_admin, renewal.number, {"amount": 3901}, key="k-2", status=422)
    assert too_much.json["code"] == "refund_exceeds_remaining"
    assert len(paypal.refund_calls) == 1  # refused before PayPal is asked
    assert send(paypal.sale_refund_event_of(made["providerRefundId"]), status=200)
    periods = state(dbsession, number)[2]
    assert [p.refunded_at for p in periods] == [None, None]  # partial: nothing taken back
    assert order_status(dbsession, renewal.number) == "paid"
    rest = post_refund(wallet_admin, renewal.number, {"full": True}, key="k-3", status=201)
    assert rest.json["refund"]["amount"] == 3900
    assert paypal.sale_refunded_of(sale_id) == 49
    last = send(paypal.sale_refund_event_of(rest.json["refund"]["providerRefundId"]), status=200)
    assert last.json["status"] == "processed", last.json
    assert order_status(dbsession, renewal.number) == "refunded"
    assert count(dbsession, CreditNote) == 2


def test_a_sale_paypal_already_refunded_is_refused_and_changes_nothing(
    wallet_subscribed, wallet_admin, paypal, send, dbsession
):
    number, _ = wallet_subscribed
    renewal, sale_id, _ = wallet_renewal(wallet_subscribed, paypal, send, dbsession)
    assert paypal._refund_sale(sale_id, {})[0] == 201  # refunded at PayPal, no event yet
    refused = post_refund(wallet_admin, renewal.number, {"full": True}, status=502)
    assert refused.json["code"] == "refund_refused"
    assert "TRANSACTION_ALREADY_REFUNDED" in refused.json["message"]
    assert refused.json["refund"]["status"] == "failed"
    assert order_status(dbsession, renewal.number) == "paid"
    assert state(dbsession, number)[2][1].refunded_at is None
    assert count(dbsession, CreditNote) == 0


def test_paypal_down_refunds_nothing_and_a_later_request_does(
    wallet_subscribed, wallet_admin, paypal, send, dbsession
):
    renewal, sale_id, _ = wallet_renewal(wallet_subscribed, paypal, send, dbsession)
    paypal.refund_fail_status = 503
    down = post_refund(wallet_admin, renewal.number, {"full": True}, status=503)
    assert down.json["code"] == "refund_provider_unavailable"
    assert {"code", "title", "message", "hints", "supportCode"} <= set(down.json)
    assert down.json["refund"]["status"] == "failed" and "503" in down.json["refund"]["error"]
    assert paypal.sale_refunds == {} and order_status(dbsession, renewal.number) == "paid"
    paypal.refund_fail_status = None
    made = post_refund(wallet_admin, renewal.number, {"full": True}, key="k-2", status=201)
    assert made.json["refund"]["status"] == "succeeded"
    assert paypal.sale_refunded_of(sale_id) == 49


def test_a_refund_paypal_leaves_pending_is_confirmed_by_its_event_and_a_failed_one_refused(
    wallet_subscribed, wallet_admin, paypal, send, dbsession
):
    renewal, _, _ = wallet_renewal(wallet_subscribed, paypal, send, dbsession)
    paypal.sale_refund_state = "failed"
    failed = post_refund(wallet_admin, renewal.number, {"amount": 100}, status=502)
    assert failed.json["code"] == "refund_refused" and "failed" in failed.json["message"]
    paypal.sale_refund_state = "pending"
    made = post_refund(wallet_admin, renewal.number, {"full": True}, key="k-2", status=201)
    assert made.json["refund"]["status"] == "pending"
    send(paypal.sale_refund_event_of(made.json["refund"]["providerRefundId"]), status=200)
    assert order_status(dbsession, renewal.number) == "refunded"
    rows = dbsession.scalars(
        select(Refund).where(Refund.order_id == renewal.id).order_by(Refund.id)
    )
    assert [row.status for row in rows] == ["failed", "succeeded"]


# --- a full refund cancels the subscription it takes the license back from --------------


def held_of(fake, kind: str) -> list[dict]:
    return [
        payload for payload in fake.held if payload.get("type", payload.get("event_type")) == kind
    ]


def card_renewal(subscribed, fake_stripe, webhook, dbsession):
    """A paid renewal of the card subscription: (its order, the first period's end)."""
    number, sub_id = subscribed
    first_paid_through = state(dbsession, number)[0].paid_through
    for payload in fake_stripe.renew(sub_id):
        send_card(webhook, payload)
    periods = state(dbsession, number)[2]
    return dbsession.get(Order, periods[1].order_id), first_paid_through


def test_refunding_the_order_that_bought_it_cancels_the_card_subscription_now(
    subscribed, card_admin, fake_stripe, webhook, dbsession
):
    number, sub_id = subscribed
    made = post_refund(card_admin, number, {"full": True}, status=201).json["refund"]
    assert made["subscription"] == {
        "id": state(dbsession, number)[0].id,
        "providerSubscriptionId": sub_id,
        "status": "ended",
        "cancelled": True,
        "kept": False,
        "error": None,
    }
    (call,) = fake_stripe.cancel_calls
    assert call == {"subscription": sub_id, "query": {"invoice_now": "false", "prorate": "false"}}
    assert fake_stripe.subscriptions[sub_id]["status"] == "canceled"
    # The same request again: answered as it stands, Stripe not asked again.
    again = post_refund(card_admin, number, {"full": True}, status=200).json["refund"]
    assert again["subscription"]["cancelled"] and len(fake_stripe.cancel_calls) == 1
    # Stripe's own events arrive after: the deletion changes nothing more, the refund
    # revokes the license.
    (deleted,) = held_of(fake_stripe, "customer.subscription.deleted")
    assert send_card(webhook, deleted)["status"] == "ignored"
    assert send_card(webhook, fake_stripe.refund_event(made["providerRefundId"]))["status"] == (
        "processed"
    )
    subscription, license, periods = state(dbsession, number)
    assert (subscription.status, license.status) == ("ended", "revoked")
    assert periods[0].refunded_at is not None
    with pytest.raises(ValueError):
        fake_stripe.renew(sub_id)  # nothing more is billed
    listed = card_admin.get(f"/api/admin/orders/{number}/refunds").json["refunds"]
    assert listed[0]["subscription"]["cancelled"] is True


@pytest.mark.parametrize("cancel_event_first", [True, False])
def test_refunding_the_latest_renewal_cancels_and_takes_that_period_back(
    subscribed, card_admin, fake_stripe, webhook, dbsession, cancel_event_first
):
    """Either order of Stripe's two events: the license ends with the period before the
    refunded one (the subscription ended: no grace), nothing held for review."""
    number, sub_id = subscribed
    renewal, first_paid_through = card_renewal(subscribed, fake_stripe, webhook, dbsession)
    made = post_refund(card_admin, renewal.number, {"full": True}, status=201).json["refund"]
    assert made["subscription"]["cancelled"] is True
    (deleted,) = held_of(fake_stripe, "customer.subscription.deleted")
    refunded = fake_stripe.refund_event(made["providerRefundId"])
    for payload in [deleted, refunded] if cancel_event_first else [refunded, deleted]:
        send_card(webhook, payload)
    subscription, license, periods = state(dbsession, number)
    assert subscription.status == "ended"
    assert [p.refunded_at is not None for p in periods] == [False, True]
    assert subscription.paid_through == first_paid_through
    assert (license.status, license.expires_at) == ("active", first_paid_through)
    assert order_status(dbsession, renewal.number) == "refunded"
    from cmsshop.models import LicenseReview

    assert count(dbsession, LicenseReview) == 0


def test_a_partial_refund_or_an_earlier_period_cancels_nothing(
    subscribed, card_admin, fake_stripe, webhook, dbsession
):
    number, sub_id = subscribed
    earlier, _ = card_renewal(subscribed, fake_stripe, webhook, dbsession)
    for payload in fake_stripe.renew(sub_id):  # a later period is paid for since
        send_card(webhook, payload)
    part = post_refund(card_admin, number, {"amount": 100}, status=201).json["refund"]
    assert part["subscription"] is None
    whole = post_refund(card_admin, earlier.number, {"full": True}, key="k-2", status=201)
    assert whole.json["refund"]["full"] is True and whole.json["refund"]["subscription"] is None
    send_card(webhook, fake_stripe.refund_event(whole.json["refund"]["providerRefundId"]))
    assert fake_stripe.cancel_calls == []
    subscription, _, periods = state(dbsession, number)
    assert subscription.status == "active" and len(periods) == 3
    report = card_admin.post(f"/api/admin/subscriptions/{subscription.id}/resync").json
    assert report["error"] is None and fake_stripe.cancel_calls == []


def test_cancel_subscription_false_keeps_it_renewing(
    subscribed, card_admin, fake_stripe, webhook, dbsession
):
    number, sub_id = subscribed
    renewal, _ = card_renewal(subscribed, fake_stripe, webhook, dbsession)
    made = post_refund(
        card_admin, renewal.number, {"full": True, "cancelSubscription": False}, status=201
    ).json["refund"]
    assert made["subscription"]["kept"] is True and made["subscription"]["status"] == "active"
    send_card(webhook, fake_stripe.refund_event(made["providerRefundId"]))
    subscription = state(dbsession, number)[0]
    report = card_admin.post(f"/api/admin/subscriptions/{subscription.id}/resync").json
    assert report["error"] is None and not any("cancelled" in c for c in report["changes"])
    assert fake_stripe.cancel_calls == [] and state(dbsession, number)[0].status == "active"
    post_refund(card_admin, renewal.number, {"cancelSubscription": "no"}, key="k-2", status=422)


def test_stripe_down_for_the_cancel_leaves_the_refund_and_a_retry_cancels(
    subscribed, card_admin, fake_stripe, webhook, dbsession
):
    number, sub_id = subscribed
    fake_stripe.cancel_fail_with = 503
    made = post_refund(card_admin, number, {"full": True}, status=201).json["refund"]
    assert made["status"] == "succeeded"  # the refund stands
    after = made["subscription"]
    assert (after["cancelled"], after["status"]) == (False, "active")
    assert "could not cancel" in after["error"]
    page = card_admin.get(f"/admin/orders/{number}/refunds/{made['id']}")
    assert "is still active" in page.text and "reconciliation" in page.text
    fake_stripe.cancel_fail_with = None
    again = post_refund(card_admin, number, {"full": True}, status=200).json["refund"]
    assert again["subscription"]["cancelled"] is True and again["id"] == made["id"]
    assert len(fake_stripe.refunds) == 1  # refunded once
    assert state(dbsession, number)[0].status == "ended"


def test_a_full_wallet_refund_cancels_at_paypal_and_paypal_down_is_finished_by_resync(
    wallet_subscribed, wallet_admin, paypal, send, dbsession
):
    number, sub_id = wallet_subscribed
    renewal, sale_id, first_paid_through = wallet_renewal(
        wallet_subscribed, paypal, send, dbsession
    )
    paypal.cancel_fail_status = 503
    made = post_refund(wallet_admin, renewal.number, {"full": True}, status=201).json["refund"]
    assert made["status"] == "succeeded" and paypal.sale_refunded_of(sale_id) == 49
    assert made["subscription"]["cancelled"] is False
    assert "walletprovider could not cancel it" in made["subscription"]["error"]
    assert paypal.subscriptions[sub_id]["status"] == "ACTIVE"
    send(paypal.sale_refund_event_of(made["providerRefundId"]), status=200)
    paypal.cancel_fail_status = None
    subscription_id = state(dbsession, number)[0].id
    report = wallet_admin.post(f"/api/admin/subscriptions/{subscription_id}/resync").json
    assert report["error"] is None
    assert report["changes"][0] == (
        f"cancelled at walletprovider: order {renewal.number} is refunded in full"
    )
    # The console's and the refund event's (PayPal down), then the resync's.
    assert len(paypal.cancel_calls) == 3
    assert all(c["reason"].startswith("Cancelled by the shop") for c in paypal.cancel_calls)
    assert paypal.subscriptions[sub_id]["status"] == "CANCELLED"
    subscription, license, periods = state(dbsession, number)
    assert subscription.status == "ended"
    assert subscription.paid_through == license.expires_at == first_paid_through
    again = wallet_admin.post(f"/api/admin/subscriptions/{subscription_id}/resync").json
    assert again["changes"] == []
    (cancelled,) = paypal.held
    assert send(cancelled, status=200).json["status"] == "ignored"  # ended already


def test_a_full_wallet_refund_of_the_first_order_cancels_at_once(
    wallet_subscribed, wallet_admin, paypal, send, dbsession
):
    number, sub_id = wallet_subscribed
    made = post_refund(wallet_admin, number, {"full": True}, status=201).json["refund"]
    assert made["subscription"]["status"] == "ended"
    assert paypal.refund_calls[0]["sale"]  # the first payment is a sale too
    assert paypal.subscriptions[sub_id]["status"] == "CANCELLED"
    send(paypal.sale_refund_event_of(made["providerRefundId"]), status=200)
    subscription, license, _ = state(dbsession, number)
    assert (subscription.status, license.status) == ("ended", "revoked")


def test_a_refund_made_at_the_provider_cancels_once_its_event_is_in(
    subscribed, fake_stripe, webhook, dbsession, card_ini, capsys
):
    """Refunded at Stripe's dashboard: its event refunds the order, then (committed) the
    subscription is cancelled at Stripe; with Stripe down for that, the reconciliation
    cancels it, once."""
    from cmsshop.scripts.admin import main as admin_main

    number, sub_id = subscribed
    (intent,) = fake_stripe.intents
    status, refund = fake_stripe.create_refund({"payment_intent": intent}, None)
    assert status == 200
    fake_stripe.cancel_fail_with = 503
    event = fake_stripe.refund_event(refund["id"])
    assert send_card(webhook, event)["status"] == "processed"  # the refund stands
    asked = len(fake_stripe.cancel_calls)
    assert asked >= 1  # (the stripe client retries a 503 once)
    subscription, license, _ = state(dbsession, number)
    assert (subscription.status, license.status) == ("active", "revoked")
    assert send_card(webhook, event)["status"] == "duplicate"
    assert len(fake_stripe.cancel_calls) == asked  # a duplicate event asks nothing
    fake_stripe.cancel_fail_with = None
    assert admin_main([str(card_ini), "reconcile-subscriptions"]) == 0
    assert f"cancelled at cardprovider: order {number} is refunded in full" in (
        capsys.readouterr().out
    )
    assert fake_stripe.subscriptions[sub_id]["status"] == "canceled"
    assert state(dbsession, number)[0].status == "ended"
    assert admin_main([str(card_ini), "reconcile-subscriptions"]) == 0
    assert len(fake_stripe.cancel_calls) == asked + 1


def test_a_renewal_refunded_at_paypal_cancels_the_subscription_after_its_event(
    wallet_subscribed, paypal, send, dbsession
):
    number, sub_id = wallet_subscribed
    renewal, sale_id, first_paid_through = wallet_renewal(
        wallet_subscribed, paypal, send, dbsession
    )
    status, refund = paypal._refund_sale(sale_id, {})
    assert status == 201
    assert send(paypal.sale_refund_event_of(refund["id"]), status=200).json["status"] == (
        "processed"
    )
    (call,) = paypal.cancel_calls
    assert call["reason"].startswith("Cancelled by the shop")
    subscription, license, _ = state(dbsession, number)
    assert (subscription.status, license.expires_at) == ("ended", first_paid_through)


@pytest.mark.parametrize("ticked", [True, False])
def test_the_console_page_offers_the_cancel_ticked_and_shows_what_happened(
    subscribed, card_app, admin, fake_stripe, dbsession, ticked
):
    from helpers.clients import logged_in

    number, sub_id = subscribed
    pages = logged_in(card_app, admin)
    form = next(
        f
        for f in pages.get(f"/admin/orders/{number}/refund").forms.values()
        if f.action.endswith("/refund")
    )
    form["kind"] = "full"
    review = form.submit(status=200)
    box = review.html.find("input", {"name": "cancel_subscription"})
    assert box is not None and box.has_attr("checked") and sub_id in review.text
    confirm = next(f for f in review.forms.values() if f.action.endswith("/refund/confirm"))
    confirm["cancel_subscription"].checked = ticked
    result = confirm.submit(status=303).follow()
    words = " ".join(result.html.get_text(" ").split())
    if ticked:
        assert "has ended at" in words and "nothing more is charged" in words
        assert fake_stripe.subscriptions[sub_id]["status"] == "canceled"
    else:
        assert "goes on renewing, as this refund asked" in words
        assert fake_stripe.cancel_calls == []
        assert state(dbsession, number)[0].status == "active"


# --- an order held for review: no subscription row yet, the provider's still bills ------


def held_card_order(card_buyer, fake_stripe, webhook, dbsession) -> tuple[str, str]:
    """A card subscription whose first payment did not add up (held for review: no
    subscription row, no license): (order number, Stripe's subscription id)."""
    from helpers.subscriptions import subscribe

    number, events = subscribe(card_buyer, fake_stripe)
    (sub_id,) = fake_stripe.subscriptions
    invoice = events["invoice.paid"]["data"]["object"]["id"]
    fake_stripe.invoices[invoice]["amount_paid"] = 5900  # more than the order costs
    assert send_card(webhook, events["checkout.session.completed"])["status"] == "needs_review"
    assert send_card(webhook, events["invoice.paid"])["status"] in ("needs_review", "duplicate")
    assert order_status(dbsession, number) == "needs_review"
    assert state(dbsession, number)[0] is None
    return number, sub_id


def test_refunding_an_order_held_for_review_cancels_its_card_subscription(
    card_buyer, card_admin, fake_stripe, webhook, dbsession, monthly
):
    number, sub_id = held_card_order(card_buyer, fake_stripe, webhook, dbsession)
    made = post_refund(card_admin, number, {"full": True}, status=201).json["refund"]
    (call,) = fake_stripe.cancel_calls
    assert call["subscription"] == sub_id
    assert fake_stripe.subscriptions[sub_id]["status"] == "canceled"
    subscription = state(dbsession, number)[0]
    assert made["subscription"] == {
        "id": subscription.id,
        "providerSubscriptionId": sub_id,
        "status": "ended",
        "cancelled": True,
        "kept": False,
        "error": None,
    }
    assert subscription.license_id is None  # never delivered
    with pytest.raises(ValueError):
        fake_stripe.renew(sub_id)  # nothing more is billed
    # Never paid for nor delivered: not among the customer's subscriptions; the console
    # lists it, ended.
    assert card_buyer.get("/api/dashboard/subscriptions").json["items"] == []
    assert "subscription-" not in card_buyer.get("/account/subscriptions").text
    listed = card_admin.get(f"/api/admin/subscriptions/{subscription.id}").json
    assert listed["status"] == "ended" and listed["product"] == "SiteGuard"
    assert "SiteGuard" in card_admin.get(f"/admin/subscriptions/{subscription.id}").text


def test_refunding_an_order_held_for_review_cancels_its_wallet_subscription(
    wallet_buyer, wallet_admin, paypal, send, dbsession, monthly
):
    from helpers.subscriptions import subscribe_wallet

    number, sub_id, events = subscribe_wallet(wallet_buyer, paypal)
    activated, sale = events
    paypal.sales[sale["resource"]["id"]]["amount"]["total"] = "59.00"  # more than the order
    sale["resource"]["amount"]["total"] = "59.00"
    paypal.transactions[sub_id][-1]["amount_with_breakdown"]["gross_amount"]["value"] = "59.00"
    for payload in events:
        send(payload, status=200)
    assert order_status(dbsession, number) == "needs_review"
    assert state(dbsession, number)[0] is None
    made = post_refund(wallet_admin, number, {"full": True}, status=201).json["refund"]
    assert made["subscription"]["cancelled"] is True
    assert made["subscription"]["providerSubscriptionId"] == sub_id
    (call,) = paypal.cancel_calls
    assert call["reason"].startswith("Cancelled by the shop")
    assert paypal.subscriptions[sub_id]["status"] == "CANCELLED"
    assert state(dbsession, number)[0].status == "ended"


def test_an_order_held_for_review_refunded_at_the_provider_cancels_and_resync_finishes(
    card_buyer, fake_stripe, webhook, dbsession, card_ini, capsys, monthly
):
    """Refunded at Stripe's dashboard while held: its event makes the subscription's row
    and (committed) cancels at Stripe; Stripe down for that, the reconciliation cancels
    it once, and records none of the refunded order's invoices as periods."""
    from cmsshop.scripts.admin import main as admin_main

    number, sub_id = held_card_order(card_buyer, fake_stripe, webhook, dbsession)
    (intent,) = fake_stripe.intents
    status, refund = fake_stripe.create_refund({"payment_intent": intent}, None)
    assert status == 200
    fake_stripe.cancel_fail_with = 503
    assert send_card(webhook, fake_stripe.refund_event(refund["id"]))["status"] == "processed"
    assert order_status(dbsession, number) == "refunded"
    subscription = state(dbsession, number)[0]
    assert (subscription.status, subscription.license_id) == ("active", None)
    # Live here until the provider ends it, yet never the customer's: not listed to them.
    assert card_buyer.get("/api/dashboard/subscriptions").json["items"] == []
    asked = len(fake_stripe.cancel_calls)
    assert asked >= 1
    fake_stripe.cancel_fail_with = None
    assert admin_main([str(card_ini), "reconcile-subscriptions"]) == 0
    out = capsys.readouterr().out
    assert f"cancelled at cardprovider: order {number} is refunded in full" in out
    assert "recorded" not in out  # the refunded first payment is no period
    assert fake_stripe.subscriptions[sub_id]["status"] == "canceled"
    assert state(dbsession, number)[0].status == "ended"
    assert order_status(dbsession, number) == "refunded"
    assert admin_main([str(card_ini), "reconcile-subscriptions"]) == 0
    assert len(fake_stripe.cancel_calls) == asked + 1


def test_an_order_held_for_review_refunded_keeping_its_subscription_cancels_nothing(
    card_buyer, card_admin, fake_stripe, webhook, dbsession, monthly
):
    number, sub_id = held_card_order(card_buyer, fake_stripe, webhook, dbsession)
    body = {"full": True, "cancelSubscription": False}
    made = post_refund(card_admin, number, body, status=201).json["refund"]
    assert made["subscription"] is None  # no subscription of ours to say anything about
    assert fake_stripe.cancel_calls == []
    assert fake_stripe.subscriptions[sub_id]["status"] == "active"
    assert state(dbsession, number)[0] is None
