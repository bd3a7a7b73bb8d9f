"""Orders of several products, with quantities and a coupon's discount, at both payment
providers: what the provider is asked to charge (the fakes check it as Stripe and PayPal
do), and what a confirmed payment delivers -- everything, once, when it is the order's
total; nothing, held for review, when it is one line's amount or the undiscounted
subtotal. Through the webhook (both providers) and the queue worker's batch."""

from __future__ import annotations

import pytest
from fakes.paypal import capture_event, new_id
from fakes.shop import make_order, order_status
from fakes.stripe_api import API_KEY, event, session_object
from helpers.payments import deliver
from sqlalchemy import func, select

from cmsshop.models import Entitlement, Fulfilment, Invoice, License, OrderItem, OutboxMessage
from cmsshop.services.payments import base
from cmsshop.services.payments.cardprovider import CardProvider
from cmsshop.services.payments.events import queue
from cmsshop.services.payments.lines import checkout_items
from cmsshop.services.payments.registry import REGISTRY_KEY
from cmsshop.services.payments.walletprovider import WalletProvider
from cmsshop.services.payments.walletprovider.api import PayPalApiError, checkout_order_body

# SiteGuard (3 seats, 49.00), PixelForge (2 seats, 79.00), Theme Pack (unlicensed, 19.00).
QUANTITIES = {"site-guard": 3, "pixel-forge": 2, "themes": 1}
SUBTOTAL = 3 * 4900 + 2 * 7900 + 1900  # 324.00
# A fixed 10.00 coupon split over the lines by largest remainder, as checkout splits it:
# 453.7 / 487.65 / 58.64 -> 454 / 488 / 58. SiteGuard's 147.00 - 4.54 = 142.46 does not
# divide by 3: no unit price times quantity charges it.
SHARES = {"site-guard": 454, "pixel-forge": 488, "themes": 58}
DISCOUNT = 1000
TOTAL = SUBTOTAL - DISCOUNT  # 314.00
LINE_AMOUNTS = {"site-guard": 14246, "pixel-forge": 15312, "themes": 1842}


def place(dbsession, customer, provider="cardprovider", **fields):
    return make_order(
        dbsession,
        customer,
        tuple(QUANTITIES),
        quantities=QUANTITIES,
        discounts=SHARES,
        coupon_code="TENOFF",
        provider=provider,
        **fields,
    )


@pytest.fixture
def card_order(dbsession, catalogue, customer):
    return place(dbsession, customer)


@pytest.fixture
def wallet_order(dbsession, catalogue, customer):
    return place(dbsession, customer, "walletprovider", checkout_id=new_id())


def request_of(order, **overrides) -> base.CheckoutRequest:
    """What checkout asks the provider for, built from the placed order."""
    return base.CheckoutRequest(
        **{
            "order_number": order.number,
            "currency": order.currency,
            "total": order.total,
            "items": checkout_items(order.items),
            "customer_email": "buyer@example.com",
            "success_url": f"https://shop.example/checkout/success?order={order.number}",
            "cancel_url": f"https://shop.example/checkout/cancel?order={order.number}",
            "discount": order.discount,
            **overrides,
        }
    )


def card_config(fake_stripe) -> dict:
    return {"apiKey": API_KEY, "apiBase": fake_stripe.url, "timeout": 5}


def delivered(dbsession, order) -> dict:
    """What a fulfilment of ``order`` wrote, counted, with its licenses' seats by product."""
    dbsession.commit()  # ends the read snapshot (SQLite WAL)
    dbsession.expire_all()
    item_ids = [item.id for item in order.items]

    def count(model, *where):
        return dbsession.scalar(select(func.count()).select_from(model).where(*where))

    seats = dbsession.execute(
        select(OrderItem.product_slug, License.max_activations)
        .join(OrderItem, OrderItem.id == License.order_item_id)
        .where(OrderItem.id.in_(item_ids))
    ).all()
    return {
        "fulfilments": count(Fulfilment, Fulfilment.order_id == order.id),
        "invoices": count(Invoice, Invoice.order_id == order.id),
        "entitlements": count(Entitlement, Entitlement.order_item_id.in_(item_ids)),
        "seats": dict(seats),
        "receipts": count(OutboxMessage, OutboxMessage.dedupe_key == f"receipt:order:{order.id}"),
    }


NOTHING = {"fulfilments": 0, "invoices": 0, "entitlements": 0, "seats": {}, "receipts": 0}
EVERYTHING = {
    "fulfilments": 1,
    "invoices": 1,
    "entitlements": 3,  # one a line
    "seats": {"site-guard": 9, "pixel-forge": 4},  # quantity x the product's seats
    "receipts": 1,
}


def check_everything_delivered(dbsession, order) -> None:
    assert order_status(dbsession, order.number) == "paid"
    assert delivered(dbsession, order) == EVERYTHING
    invoice = dbsession.scalar(select(Invoice).where(Invoice.order_id == order.id))
    assert invoice.total == TOTAL
    assert [
        (line["product"], line["quantity"], line["unitAmount"], line["discount"], line["amount"])
        for line in invoice.lines
    ] == [
        ("site-guard", 3, 4900, 454, 14246),
        ("pixel-forge", 2, 7900, 488, 15312),
        ("themes", 1, 1900, 58, 1842),
    ]
    receipt = dbsession.scalar(
        select(OutboxMessage).where(OutboxMessage.dedupe_key == f"receipt:order:{order.id}")
    )
    for part in (receipt.text_body, receipt.html_body):
        assert "SiteGuard × 3" in part and "PixelForge × 2" in part
        assert "coupon TENOFF" in part
    assert "Theme Pack × 1" not in receipt.text_body


# --- what the providers are asked to charge --------------------------------------------------


def test_the_card_session_is_one_unit_a_line_at_its_discounted_amount(card_order, fake_stripe):
    session = CardProvider().create_checkout(request_of(card_order), card_config(fake_stripe))
    # The fake totals the session as Stripe does: the sum of unit_amount x quantity.
    assert fake_stripe.sessions[session.provider_checkout_id]["amount_total"] == TOTAL
    lines = [
        (
            item["price_data"]["product_data"]["name"],
            int(item["price_data"]["unit_amount"]),
            int(item["quantity"]),
        )
        for item in fake_stripe.created[-1]["line_items"]
    ]
    assert lines == [
        ("SiteGuard × 3", LINE_AMOUNTS["site-guard"], 1),
        ("PixelForge × 2", LINE_AMOUNTS["pixel-forge"], 1),
        ("Theme Pack", LINE_AMOUNTS["themes"], 1),
    ]


@pytest.mark.parametrize(
    "items",
    [
        [{"product": "x", "name": "X", "amount": -100}],
        [{"product": "x", "name": "X", "amount": 10}],  # below Stripe's minimum charge
        [],
    ],
)
def test_a_session_stripe_would_refuse_is_refused(fake_stripe, items):
    request = base.CheckoutRequest(
        order_number="ORD-REFUSED-00001",
        currency="EUR",
        total=sum(item["amount"] for item in items),
        items=items,
        customer_email="buyer@example.com",
        success_url="https://shop.example/ok",
        cancel_url="https://shop.example/cancel",
    )
    with pytest.raises(base.ProviderUnavailable):
        CardProvider().create_checkout(request, card_config(fake_stripe))
    assert fake_stripe.sessions == {}


def test_the_wallet_order_carries_unit_prices_quantities_and_the_discount(paypal, wallet_order):
    # The order's discount is the lines' sum, whether the request states it or not.
    assert checkout_order_body(request_of(wallet_order)) == checkout_order_body(
        request_of(wallet_order, discount=None)
    )
    WalletProvider().create_checkout(request_of(wallet_order), paypal.config())
    sent = paypal.bodies[-1]
    assert sent["path"] == "/v2/checkout/orders" and len(paypal.orders) == 1  # accepted
    unit = sent["body"]["purchase_units"][0]
    assert unit["amount"] == {
        "currency_code": "EUR",
        "value": "314.00",
        "breakdown": {
            "item_total": {"currency_code": "EUR", "value": "324.00"},
            "discount": {"currency_code": "EUR", "value": "10.00"},
        },
    }
    assert [(i["name"], i["quantity"], i["unit_amount"]["value"]) for i in unit["items"]] == [
        ("SiteGuard", "3", "49.00"),
        ("PixelForge", "2", "79.00"),
        ("Theme Pack", "1", "19.00"),
    ]


def test_the_fake_paypal_checks_the_breakdown_as_paypal_does(paypal, wallet_order):
    """A body whose arithmetic is off is refused (422), so a wrong request fails."""
    provider, config = WalletProvider(), paypal.config()
    good = checkout_order_body(request_of(wallet_order))
    no_discount = checkout_order_body(request_of(wallet_order))
    del no_discount["purchase_units"][0]["amount"]["breakdown"]["discount"]
    one_seat = checkout_order_body(request_of(wallet_order))
    one_seat["purchase_units"][0]["items"][0]["quantity"] = "1"
    no_total = checkout_order_body(request_of(wallet_order))
    del no_total["purchase_units"][0]["amount"]["breakdown"]
    for body, issue in (
        (no_discount, "AMOUNT_MISMATCH"),
        (one_seat, "ITEM_TOTAL_MISMATCH"),
        (no_total, "ITEM_TOTAL_REQUIRED"),
    ):
        with pytest.raises(PayPalApiError) as refused:
            provider._api("POST", "/v2/checkout/orders", config, json_body=body)
        assert refused.value.status == 422 and issue in refused.value.issues
    assert paypal.orders == {}
    provider._api("POST", "/v2/checkout/orders", config, json_body=good)
    assert len(paypal.orders) == 1


def test_lines_that_do_not_add_up_go_to_paypal_as_the_total_alone(paypal, wallet_order):
    """The fallback: PayPal would refuse the breakdown, the buyer still pays the total."""
    for overrides in (
        {"discount": 0},  # the lines' discounts are not the order's
        {"total": TOTAL + 1},  # the lines do not make the total
        {"items": [{**checkout_items(wallet_order.items)[0], "unit_amount": 4800}]},
    ):
        request = request_of(wallet_order, **overrides)
        WalletProvider().create_checkout(request, paypal.config())
        unit = paypal.bodies[-1]["body"]["purchase_units"][0]
        assert "items" not in unit and "breakdown" not in unit["amount"]
        assert unit["amount"]["value"] == f"{request.total / 100:.2f}"
        paypal.idempotency.clear()


# --- what a confirmed payment delivers ------------------------------------------------------


def test_a_card_payment_of_the_order_total_delivers_every_line(
    card_app, fake_stripe, card_order, dbsession
):
    session = fake_stripe.add_session(session_object(card_order.number, TOTAL))
    answer = deliver(card_app, event("checkout.session.completed", session), status=200)
    assert answer.json["status"] == "processed"
    check_everything_delivered(dbsession, card_order)


@pytest.mark.parametrize(
    "amount", [LINE_AMOUNTS["site-guard"], SUBTOTAL], ids=["one line", "before the discount"]
)
def test_a_card_payment_of_another_amount_delivers_nothing(
    card_app, fake_stripe, card_order, dbsession, amount
):
    session = fake_stripe.add_session(session_object(card_order.number, amount))
    answer = deliver(card_app, event("checkout.session.completed", session), status=200)
    assert answer.json["status"] == "needs_review"
    assert order_status(dbsession, card_order.number) == "needs_review"
    assert delivered(dbsession, card_order) == NOTHING


def test_a_wallet_payment_of_the_order_total_delivers_every_line(
    send, paypal, wallet_order, dbsession
):
    capture_id = new_id()
    paypal.add_capture(capture_id, wallet_order.number, "314.00", "EUR")
    answer = send(capture_event(capture_id, wallet_order.number, "314.00"), status=200)
    assert answer.json["status"] == "processed"
    check_everything_delivered(dbsession, wallet_order)


@pytest.mark.parametrize("value", ["142.46", "324.00"], ids=["one line", "before the discount"])
def test_a_wallet_payment_of_another_amount_delivers_nothing(
    send, paypal, wallet_order, dbsession, value
):
    capture_id = new_id()
    paypal.add_capture(capture_id, wallet_order.number, value, "EUR")
    # The event may even state the order's total: the provider's own record decides.
    answer = send(capture_event(capture_id, wallet_order.number, "314.00"), status=200)
    assert answer.json["status"] == "needs_review"
    assert order_status(dbsession, wallet_order.number) == "needs_review"
    assert delivered(dbsession, wallet_order) == NOTHING


def test_the_queue_workers_batch_delivers_the_same(
    make_app, card_settings, fake_stripe, card_order, dbsession
):
    """services/payments/fulfil_batch.py writes what fulfil_order writes, seats included."""
    app = make_app(**card_settings, **{"cmsshop.payments.webhook_processing": "queued"})
    session = fake_stripe.add_session(session_object(card_order.number, TOTAL))
    queued = deliver(app, event("checkout.session.completed", session), status=200)
    assert queued.json["status"] == "queued"
    done = queue.process_due_events(app.registry, app.registry[REGISTRY_KEY], limit=queue.BATCH)
    assert done == {"processed": 1}
    check_everything_delivered(dbsession, card_order)


# --- what the admin sees ---------------------------------------------------------------------


def test_the_admin_order_page_shows_quantities_and_the_discount(admin_pages, card_order):
    page = admin_pages.get(f"/admin/orders/{card_order.number}")
    table = page.html.find("section", attrs={"aria-labelledby": "items"}).find("table")
    shown = [
        [cell.get_text(" ", strip=True) for cell in row.find_all(["th", "td"])]
        for row in table.find_all("tr")
    ]
    assert shown == [
        ["Product", "Quantity", "Unit price", "Discount", "Amount"],
        ["SiteGuard (site-guard)", "3", "EUR49.00", "−EUR4.54", "EUR142.46"],
        ["PixelForge (pixel-forge)", "2", "EUR79.00", "−EUR4.88", "EUR153.12"],
        ["Theme Pack (themes)", "1", "EUR19.00", "−EUR0.58", "EUR18.42"],
        ["Discount (coupon TENOFF )", "−EUR10.00"],
        ["Total", "EUR314.00"],
    ]
