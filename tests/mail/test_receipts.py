"""The order receipt: queued in the fulfilment's transaction, once per order, whatever
path fulfils it (webhook, reprocess, manual) and however often the webhook arrives."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import webtest
from fakes.shop import counts, event_row, make_order, order_status
from fakes.stripe_api import closed_port_url, delivery, event, session_object
from helpers.app import requires_postgresql, serve
from helpers.clients import new_client
from helpers.payments import check_exactly_once, send, storm
from sqlalchemy import event as sa_event
from sqlalchemy import func, select

from cmsshop.models import Invoice, License, OrderItem, OutboxMessage
from cmsshop.services.mail.delivery import make_mail_backend
from cmsshop.services.mail.sender import send_due
from cmsshop.services.payments import fulfilment
from cmsshop.settings import load_settings

SETTINGS = {"cmsshop.base_url": "https://shop.example.com/", "cmsshop.site_name": "Shop"}


def receipts(dbsession) -> list[OutboxMessage]:
    dbsession.rollback()  # a fresh read transaction (SQLite snapshot)
    dbsession.expire_all()  # and what the app wrote since, e.g. the order's paid_at
    return list(
        dbsession.scalars(
            select(OutboxMessage).where(OutboxMessage.kind == "receipt").order_by(OutboxMessage.id)
        )
    )


def outbox_count(dbsession) -> int:
    dbsession.rollback()
    return dbsession.scalar(select(func.count()).select_from(OutboxMessage))


def check_receipt(dbsession, order, customer, base_url="http://localhost"):
    """The one receipt of ``order``: to the buyer, with everything the issue asks for."""
    (message,) = receipts(dbsession)
    invoice = dbsession.scalar(select(Invoice).where(Invoice.order_id == order.id))
    license = dbsession.scalar(
        select(License).join(OrderItem).where(OrderItem.order_id == order.id)
    )
    assert message.to_address == customer.email and message.user_id == customer.id
    assert message.dedupe_key == f"receipt:order:{order.id}"
    assert message.status == "pending"
    assert order.number in message.subject
    for body in (message.text_body, message.html_body):
        assert order.number in body
        assert invoice.number in body
        assert f"{base_url}/account/invoices/{invoice.number}" in body
        assert f"{base_url}/account/invoices/{invoice.number}.pdf" in body
        assert f"{base_url}/account/downloads" in body
        assert f"{base_url}/account/licenses" in body
        assert license.key in body
        assert "SiteGuard" in body and "Theme Pack" in body
        # Amounts with the currency's symbol and decimals (the test catalogue's symbol
        # is the code): 49.00 + 19.00.
        assert "EUR49.00" in body and "EUR19.00" in body and "EUR68.00" in body
        assert invoice.order.paid_at.strftime("%Y-%m-%d") in body
    return message


def test_a_webhook_paid_order_queues_one_receipt(webhook, fake_stripe, order, customer, dbsession):
    session = fake_stripe.add_session(session_object(order.number, order.total))
    payload = event("checkout.session.completed", session)
    assert send(webhook, payload, 200).json["status"] == "processed"
    message = check_receipt(dbsession, order, customer)
    # The licence key of the licensed item only (themes has none).
    assert message.text_body.count("SiteGuard: ") == 2  # the item line and the key line
    assert "Theme Pack: EUR19.00" in message.text_body

    # The same delivery again, and another event for the same payment: nothing more.
    assert send(webhook, payload, 200).json["status"] == "duplicate"
    async_paid = event("checkout.session.async_payment_succeeded", session)
    assert send(webhook, async_paid, 200).json["status"] == "duplicate"
    assert len(receipts(dbsession)) == 1 and outbox_count(dbsession) == 1


def test_a_reprocessed_event_queues_one_receipt(
    make_app, card_settings, card_app, admin, order, customer, dbsession, fake_stripe
):
    """The provider API was down: no fulfilment, no receipt; the admin's reprocess
    fulfils and queues it; a later delivery of the same event adds nothing."""
    session = fake_stripe.add_session(session_object(order.number, order.total))
    payload = event("checkout.session.completed", session)
    down = make_app(**{**card_settings, "cmsshop.cardprovider.api_base": closed_port_url()})
    body, headers = delivery(payload)
    webtest.TestApp(down).post("/api/webhooks/cardprovider", body, headers=headers, status=503)
    assert outbox_count(dbsession) == 0

    staff = new_client(card_app)
    staff.login(admin.email)
    row = event_row(dbsession, payload["id"])
    assert staff.post(f"/api/admin/payment-events/{row.id}/reprocess").json["status"] == (
        "processed"
    )
    check_receipt(dbsession, order, customer)
    body, headers = delivery(payload)
    again = webtest.TestApp(card_app).post("/api/webhooks/cardprovider", body, headers=headers)
    assert again.json["status"] == "duplicate"
    staff.post(f"/api/admin/payment-events/{row.id}/reprocess", status=409)
    assert outbox_count(dbsession) == 1


def test_a_manual_fulfilment_queues_one_receipt(card_app, admin, order, customer, dbsession):
    staff = new_client(card_app)
    staff.login(admin.email)
    path = f"/api/admin/orders/{order.number}/fulfil"
    staff.post_json(path, {"reason": "Paid by bank transfer, ref 42"})
    check_receipt(dbsession, order, customer)
    staff.post_json(path, {"reason": "again"}, status=409)
    assert outbox_count(dbsession) == 1


def test_the_receipt_uses_the_settings_it_is_given(dbsession, order, customer):
    locked = fulfilment.lock_order(dbsession, order.id)
    fulfilment.fulfil_order(
        dbsession, locked, settings=SETTINGS, provider="cardprovider", payment_reference="pi_1"
    )
    dbsession.commit()
    check_receipt(dbsession, order, customer, base_url="https://shop.example.com")


def test_a_fulfilment_rolled_back_leaves_no_receipt(dbsession, order):
    locked = fulfilment.lock_order(dbsession, order.id)
    fulfilment.fulfil_order(
        dbsession, locked, settings=SETTINGS, provider="cardprovider", payment_reference="pi_1"
    )
    dbsession.flush()
    # Queued in the fulfilment's own transaction...
    assert dbsession.scalar(select(func.count()).select_from(OutboxMessage)) == 1
    # ...and gone with it when something after the queueing fails.
    dbsession.rollback()
    assert outbox_count(dbsession) == 0
    assert order_status(dbsession, order.number) == "pending"


def test_a_webhook_whose_commit_fails_leaves_no_receipt(
    card_app, webhook, fake_stripe, order, customer, dbsession
):
    """The request's commit itself fails (after the receipt was queued): nothing of the
    fulfilment stays, the receipt neither; the provider's next delivery does it all once."""
    factory = card_app.registry["cmsshop.request_session_factory"]  # request.db

    def fail_commit(session):
        # Only the transaction that queued the receipt (it sees its own row; the event
        # log's short transactions do not).
        if session.scalar(select(func.count()).select_from(OutboxMessage)):
            raise RuntimeError("the disk is full")

    sa_event.listen(factory, "before_commit", fail_commit)
    session = fake_stripe.add_session(session_object(order.number, order.total))
    payload = event("checkout.session.completed", session)
    try:
        response = send(webhook, payload)
    finally:
        sa_event.remove(factory, "before_commit", fail_commit)
    assert response.status_int == 500
    assert outbox_count(dbsession) == 0
    assert counts(dbsession)["fulfilments"] == 0
    assert order_status(dbsession, order.number) == "pending"

    assert send(webhook, payload, 200).json["status"] == "processed"
    check_receipt(dbsession, order, customer)


@requires_postgresql
def test_twenty_deliveries_at_once_queue_one_receipt(
    two_servers,  # noqa: F811
    smtp_server,
    dbsession,
    catalogue,
    customer,
    fake_stripe,
):
    """The issue's "must show": the webhook delivered 20 times at once (plus two other
    events of the same payment), across two server processes -> one fulfilment, one
    receipt with the licence key."""
    order = make_order(dbsession, customer, ("site-guard",))
    completed, responses = storm(two_servers, order, fake_stripe, same=20)
    check_exactly_once(dbsession, order, completed, responses)
    (message,) = receipts(dbsession)
    license = dbsession.scalar(select(License))
    assert license.key in message.text_body and license.key in message.html_body
    assert message.to_address == customer.email
    assert outbox_count(dbsession) == 1
    # And the customer's mailbox: the sender delivers it over SMTP, once, even with two
    # senders at once (two passes over the same outbox).
    settings = load_settings(
        {"cmsshop.site_name": "Shop", "cmsshop.database_url": "sqlite://"} | smtp_server.settings(),
        environ={},
    )
    engine = dbsession.get_bind()
    with ThreadPoolExecutor(2) as pool:
        reports = list(
            pool.map(lambda _: send_due(engine, make_mail_backend(settings), settings), range(2))
        )
    assert sum(report.sent for report in reports) == 1
    (received,) = smtp_server.wait_for(1)
    assert received["To"] == customer.email and order.number in received["Subject"]
    assert received["Message-ID"] == message.message_id
    text = received.get_body(preferencelist=("plain",)).get_content()
    assert license.key in text


def test_deliveries_at_once_on_one_server_queue_one_receipt(
    card_app, dbsession, catalogue, customer, fake_stripe
):
    """The same race on any database, across the threads of one server."""
    order = make_order(dbsession, customer, ("site-guard",))
    with serve(card_app) as url:
        completed, responses = storm([url], order, fake_stripe, same=10)
    check_exactly_once(dbsession, order, completed, responses)
    (message,) = receipts(dbsession)
    assert dbsession.scalar(select(License.key)) in message.text_body
    assert outbox_count(dbsession) == 1
