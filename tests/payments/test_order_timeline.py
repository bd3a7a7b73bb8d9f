"""The order timeline of the admin order page (services/payments/timeline.py): what
happened to an order, oldest first, with who did it, in a fixed number of queries."""

from __future__ import annotations

import datetime as dt
import uuid

import webtest
from fakes.shop import make_order
from fakes.stripe_api import delivery, session_object
from fakes.stripe_api import event as stripe_event
from helpers.browser import check_page, log_in
from helpers.coupons import make_coupon
from sqlalchemy import event, select

from cmsshop.models import (
    CouponRedemption,
    Fulfilment,
    License,
    LicenseAuditEntry,
    LicenseChange,
    Order,
    OrderItem,
    OrderNote,
    OutboxMessage,
    PaymentEvent,
    Refund,
)
from cmsshop.services.payments.timeline import order_timeline

START = dt.datetime(2026, 5, 1, 9, 0, tzinfo=dt.UTC)


def minutes(n: int, seconds: int = 0) -> dt.datetime:
    return START + dt.timedelta(minutes=n, seconds=seconds)


def mail(key: str, kind: str, at: dt.datetime) -> OutboxMessage:
    """A pending mail queued at ``at``."""
    return OutboxMessage(
        dedupe_key=key,
        kind=kind,
        to_address="alice@example.com",
        subject=f"Your {kind}",
        text_body="-",
        html_body="-",
        message_id=f"<{uuid.uuid4().hex}@shop>",
        created_at=at,
    )


def story(session, order: Order, admin, copies: int = 1, tag: str = "") -> None:
    """``order``'s story, ``copies`` of every kind of row, at known times: placed with a
    coupon at 0, provider events at 5.., fulfilled by the first at 6, the receipt at 7,
    a renewal of a license at 8, an admin's change of it at 9, a refund asked at 10,
    notes at 11.."""
    row = session.get(Order, order.id)
    row.created_at = minutes(0)
    item = session.scalar(select(OrderItem).where(OrderItem.order_id == order.id))
    coupon = make_coupon(session, f"SPRING{tag}")
    session.add(
        CouponRedemption(
            coupon_id=coupon.id,
            order_id=order.id,
            user_id=order.user_id,
            status="redeemed",
            discount=490,
            currency="EUR",
            created_at=minutes(0),
            updated_at=minutes(6),
        )
    )
    events = []
    for n in range(copies):
        events.append(
            PaymentEvent(
                provider="cardprovider",
                event_id=f"evt_{n}_{uuid.uuid4().hex[:8]}",
                event_type="checkout.session.completed",
                received_at=minutes(5) + dt.timedelta(seconds=n),
                payload_sha256="0" * 64,
                payload="{}",
                status="processed",
                order_number=order.number,
            )
        )
    session.add_all(events)
    session.flush()
    session.add(
        Fulfilment(
            order_id=order.id,
            provider="cardprovider",
            payment_reference=f"pi_42{tag}",
            payment_event_id=events[0].id,
            created_at=minutes(6),
        )
    )
    for n in range(copies):
        suffix = "" if n == 0 else f":{n}"
        session.add(
            OutboxMessage(
                dedupe_key=f"receipt:order:{order.id}{suffix}",
                kind="receipt",
                user_id=order.user_id,
                to_address="alice@example.com",
                subject=f"Your receipt for order {order.number}",
                text_body="-",
                html_body="-",
                message_id=f"<{uuid.uuid4().hex}@shop>",
                status="sent",
                created_at=minutes(7),
                sent_at=minutes(7) + dt.timedelta(seconds=30),
            )
        )
    # A refund mail keyed by its event (the event named no refund id).
    session.add(mail(f"refund:cardprovider:event:{events[0].event_id}", "refund", minutes(10, 40)))
    # Another order's mail, whose id starts with this one's: not in the timeline.
    session.add(
        OutboxMessage(
            dedupe_key=f"receipt:order:{order.id}0",
            kind="receipt",
            to_address="x@example.com",
            subject="someone else's",
            text_body="-",
            html_body="-",
            message_id=f"<{uuid.uuid4().hex}@shop>",
        )
    )
    for n in range(copies):
        license = License(
            key=f"TIMEL-INE00-{n:05d}-AAAAA-BBBBB{tag}",
            user_id=order.user_id,
            product_id=item.product_id,
            max_activations=3,
        )
        session.add(license)
        session.flush()
        if n == 0:
            session.add(
                LicenseChange(
                    order_item_id=item.id,
                    license_id=license.id,
                    kind="renewal",
                    old_expires_at=dt.datetime(2026, 6, 1, tzinfo=dt.UTC),
                    new_expires_at=dt.datetime(2027, 6, 1, tzinfo=dt.UTC),
                    old_product_id=item.product_id,
                    new_product_id=item.product_id,
                    old_max_activations=3,
                    new_max_activations=3,
                    created_at=minutes(8),
                )
            )
            changed = license.id
    for n in range(copies):
        session.add(
            LicenseAuditEntry(
                created_at=minutes(9) + dt.timedelta(seconds=n),
                action="admin.status",
                outcome="ok",
                status=200,
                license_id=changed,
                ip="127.0.0.1",
                admin_id=admin.id,
                detail="status active -> suspended",
            )
        )
        # A validation: licensing traffic, not part of the order's story.
        session.add(
            LicenseAuditEntry(
                created_at=minutes(9),
                action="validate",
                outcome="ok",
                status=200,
                license_id=changed,
                ip="127.0.0.1",
            )
        )
        session.add(
            Refund(
                order_id=order.id,
                amount=1000,
                currency="EUR",
                reason="asked by the buyer",
                status="succeeded",
                provider="cardprovider",
                provider_refund_id=f"re_{n}{tag}",
                idempotency_key=uuid.uuid4().hex,
                requested_by=admin.id,
                created_at=minutes(10) + dt.timedelta(seconds=n),
                confirmed_at=minutes(10) + dt.timedelta(seconds=10 + n),
            )
        )
        # The buyer's refund mail, keyed by the provider's refund id (refund_mail.py).
        session.add(mail(f"refund:cardprovider:re_{n}{tag}", "refund", minutes(10, 20 + n)))
        session.add(
            OrderNote(
                order_id=order.id,
                author_id=admin.id,
                body=f"Called the buyer ({n})",
                created_at=minutes(11) + dt.timedelta(seconds=n),
            )
        )
    session.commit()


def test_the_timeline_lists_the_story_in_time_order_with_who(dbsession, catalogue, customer, admin):
    order = make_order(dbsession, customer, status="paid")
    story(dbsession, order, admin)
    entries = order_timeline(dbsession, dbsession.get(Order, order.id))
    seen = [(entry.kind, entry.title.split(" (")[0], entry.actor) for entry in entries]
    key = "TIMEL-INE00-00000-AAAAA-BBBBB"
    assert seen == [
        ("placed", "Order placed", "customer alice@example.com"),
        ("coupon", "Coupon SPRING applied", "customer alice@example.com"),
        (
            "payment_event",
            "Payment event checkout.session.completed received",
            "provider cardprovider",
        ),
        (
            "fulfilled",
            f"Fulfilled by event {seen[2] and entries[2].detail.split(',')[0]}",
            "provider cardprovider",
        ),
        ("coupon", "Coupon SPRING redeemed", "the shop"),
        ("mail", f"E-mail queued: Your receipt for order {order.number}", "the shop"),
        ("mail", f"E-mail sent: Your receipt for order {order.number}", "the shop"),
        (
            "license_change",
            f"License {key}: renewal, expires 2026-06-01 → 2027-06-01",
            "customer alice@example.com",
        ),
        ("license", f"License {key}: status active -> suspended", admin.email),
        ("refund", "Refund of EUR10.00 requested", admin.email),
        ("refund", "Refund of EUR10.00 confirmed", "provider cardprovider"),
        ("mail", "E-mail queued: Your refund", "the shop"),
        ("mail", "E-mail queued: Your refund", "the shop"),
        ("note", "Note added", admin.email),
    ]
    times = [entry.at for entry in entries]
    assert times == sorted(times)
    assert entries[2].href.startswith("/admin/payments/events/")
    assert entries[3].title.endswith("(payment pi_42)")
    assert entries[-1].detail == "Called the buyer (0)"
    assert entries[-5].detail == "asked by the buyer" and entries[-4].status == "succeeded"
    assert entries[-3].status == "pending"  # the refund mail, not sent yet
    assert entries[1].detail == "EUR4.90 off"


def test_a_guest_order_cancelled_unpaid(dbsession, catalogue, customer):
    order = make_order(dbsession, customer, status="cancelled")
    row = dbsession.get(Order, order.id)
    row.guest = True
    dbsession.commit()
    entries = order_timeline(dbsession, row)
    assert [(e.kind, e.actor) for e in entries] == [
        ("placed", "guest alice@example.com"),
        ("closed", "the shop"),
    ]
    assert entries[1].title == "Order cancelled unpaid"


def test_statements_do_not_grow_with_the_entries(dbsession, catalogue, customer, admin):
    small = make_order(dbsession, customer, status="paid")
    story(dbsession, small, admin, copies=1)
    large = make_order(dbsession, customer, status="paid")
    story(dbsession, large, admin, copies=3, tag="L")

    def statements(order: Order) -> tuple[int, int]:
        dbsession.commit()
        dbsession.expire_all()
        loaded = dbsession.get(Order, order.id)  # as the page has it
        sent = []
        engine = dbsession.get_bind()
        record = lambda *args: sent.append(args[2])  # noqa: E731 - a listener
        event.listen(engine, "before_cursor_execute", record)
        try:
            entries = order_timeline(dbsession, loaded)
        finally:
            event.remove(engine, "before_cursor_execute", record)
        return len([s for s in sent if s.upper() != "BEGIN"]), len(entries)

    few, few_entries = statements(small)
    many, many_entries = statements(large)
    assert many_entries >= few_entries + 12
    assert many == few


# --- the page ------------------------------------------------------------------------------------


def timeline_items(page) -> list:
    section = page.html.find("section", attrs={"aria-labelledby": "timeline"})
    assert section.find("h2").get_text(strip=True) == "Timeline"
    return section.find("ol").find_all("li", recursive=False)


def test_the_order_page_shows_a_webhook_paid_order_s_timeline(
    card_admin_pages, card_app, dbsession, catalogue, customer, admin, fake_stripe
):
    order = make_order(dbsession, customer)
    checkout = fake_stripe.add_session(session_object(order.number, order.total))
    payload = stripe_event("checkout.session.completed", checkout)
    body, headers = delivery(payload)
    webtest.TestApp(card_app).post("/api/webhooks/cardprovider", body, headers=headers, status=200)
    page = card_admin_pages.get(f"/admin/orders/{order.number}")
    form = next(f for f in page.forms.values() if f.action.endswith("/notes"))
    form["body"] = "Buyer asked for <b>an invoice</b> copy"
    page = form.submit(status=303).follow()

    items = timeline_items(page)
    texts = [item.get_text(" ", strip=True) for item in items]
    assert "Order placed" in texts[0] and f"customer {customer.email}" in texts[0]
    assert "checkout.session.completed" in texts[1] and "provider cardprovider" in texts[1]
    assert f"Fulfilled by event {payload['id']}" in texts[2]
    assert any("E-mail queued: " in text and "receipt" in text for text in texts)
    assert "Note added" in texts[-1] and admin.email in texts[-1]
    assert "<b>an invoice</b>" in texts[-1]  # shown as text, never markup
    stamps = [item.find("time")["datetime"] for item in items]
    assert stamps == sorted(stamps) and all(dt.datetime.fromisoformat(s).tzinfo for s in stamps)
    # The event links to its log entry.
    link = items[1].find("a")["href"]
    assert link.startswith("/admin/payments/events/")
    assert card_admin_pages.get(link).status_int == 200


def test_a_manual_fulfilment_names_the_admin_and_the_reason(
    admin_pages, dbsession, catalogue, customer, admin
):
    order = make_order(dbsession, customer)
    page = admin_pages.get(f"/admin/orders/{order.number}")
    assert [item.get_text(" ", strip=True) for item in timeline_items(page)][0].endswith(
        f"customer {customer.email} Order placed"
    )
    form = next(f for f in page.forms.values() if f.action.endswith("/fulfil"))
    form["reason"] = "Paid by bank transfer, ref 42"
    form["paymentReference"] = "bank-42"
    page = form.submit(status=303).follow()
    texts = [item.get_text(" ", strip=True) for item in timeline_items(page)]
    done = next(text for text in texts if "Fulfilled by hand" in text)
    assert admin.email in done and "Paid by bank transfer, ref 42" in done and "bank-42" in done


def test_the_timeline_in_a_browser_at_phone_width(page, dbsession, catalogue, customer, admin):
    order = make_order(dbsession, customer, status="paid")
    story(dbsession, order, admin, tag="-" + "X" * 30)  # long keys must wrap
    log_in(page, admin.email, f"/admin/orders/{order.number}")
    timeline = page.get_by_role("list").filter(has_text="Order placed")
    assert timeline.get_by_role("listitem").count() == 14
    check_page(page, "admin-order-timeline")
