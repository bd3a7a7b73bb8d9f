"""Fulfilment of many confirmed payments in one transaction: the queue worker's fast path.

The worker (events/queue.py) hands over the events of a pass whose action is FULFIL for
a named order and whose payment the provider confirmed (or that development trusts).
Only the plain case is fulfilled here, decided under the locks the per-event path
(delivery.process_event) takes: the event row not final (claimed by an UPDATE, the
transaction's first statement, as ``log.claim`` does), the order locked FOR UPDATE,
neither it nor this payment fulfilled yet (the first of two events of one order in a
batch wins), by the per-event rules (``fulfilment.PAYABLE_STATUSES`` and
``fulfilment.payment_problems``: so only a pending order placed with this provider,
matching the confirmation) and only purchase items (renewals and upgrades lock their
licenses: per event). Every other event is returned untouched and goes through the
per-event path after this commit, which handles every state of the machine.

What a plain fulfilment writes is what ``fulfilment.fulfil_order`` writes, built from
the same definitions (``fulfilment_values``, ``mark_paid``, ``granted_items``,
``entitlement_values``, ``issues_license``, ``new_license_values``, ``invoice_values``,
``build_receipt``, ``receipt_message``, ``outbox_values``): the fulfilment gate rows,
the orders moved to paid, entitlements, licenses, the outgoing webhook events
(order.paid, license.created: services/webhooks/events.emit_events), invoices, receipts
and the events' outcomes -- as executemany statements, about a dozen for the whole batch
instead of some twenty per payment. The batch's invoice numbers are taken in one
statement right before the last two writes (the invoices, and the receipts that quote
their numbers), so the year's counter row stays locked for those and the COMMIT only --
three round trips for the whole batch; a rollback gives the numbers back, as for one
fulfilment. Any error rolls the whole batch back and leaves every event to the per-event
path.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Mapping
from typing import Any

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.orm import Session, selectinload

from cmsshop.models import (
    Currency,
    Entitlement,
    Fulfilment,
    Invoice,
    License,
    Order,
    OrderItem,
    PaymentEvent,
    User,
)
from cmsshop.services.checkout.coupons import redeem_redemptions
from cmsshop.services.licensing.issuing import new_license_values
from cmsshop.services.mail.outbox import insert_messages, outbox_values
from cmsshop.services.payments.base import Confirmation
from cmsshop.services.payments.events.log import FINAL_STATUSES
from cmsshop.services.payments.fulfilment import (
    PAYABLE_STATUSES,
    entitlement_values,
    fulfilment_values,
    granted_items,
    invoice_values,
    issues_license,
    mark_paid,
    payment_problems,
    take_invoice_numbers,
)
from cmsshop.services.payments.receipts import build_receipt, receipt_message
from cmsshop.services.tax import checkout as tax_checkout
from cmsshop.services.tax import invoice_pdf
from cmsshop.services.webhooks import payloads
from cmsshop.services.webhooks.events import emit_events, subscribers
from cmsshop.util import utcnow

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Confirmed:
    """A logged FULFIL event and its provider's confirmation."""

    row_id: int
    provider: str
    order_number: str
    confirmation: Confirmation


def fulfil_batch(registry, confirmed: list[Confirmed]) -> tuple[list[int], list[Confirmed]]:
    """Fulfil the plain cases of ``confirmed`` in one transaction. Returns (the event
    rows fulfilled, the events left for the per-event path). Events found final already
    are in neither: another worker or an admin finished them."""
    if not confirmed:
        return [], []
    session: Session = registry["cmsshop.session_factory"]()
    try:
        done, left = _fulfil(session, registry.settings, confirmed)
        session.commit()
        return done, left
    except Exception:  # noqa: BLE001 - the per-event path is the reference; it decides
        session.rollback()
        log.warning(
            "a batch of %s fulfilments rolled back; per event instead",
            len(confirmed),
            exc_info=True,
        )
        return [], list(confirmed)
    finally:
        session.close()


def _fulfil(
    session: Session, settings: Mapping[str, Any], confirmed: list[Confirmed]
) -> tuple[list[int], list[Confirmed]]:
    now = utcnow()
    plain, left = _plain_cases(session, confirmed)
    if plain:
        _write_fulfilments(session, settings, plain, now)
    return [event.row_id for event, _ in plain], left


def _plain_cases(
    session: Session, confirmed: list[Confirmed]
) -> tuple[list[tuple[Confirmed, Order]], list[Confirmed]]:
    """Claim the events and lock their orders; (the plain cases with their orders, the
    events left for the per-event path). Events found final already are in neither."""
    claimed = set(
        session.execute(
            update(PaymentEvent)
            .where(
                PaymentEvent.id.in_(sorted(c.row_id for c in confirmed)),
                PaymentEvent.status.not_in(FINAL_STATUSES),
            )
            .values(attempts=PaymentEvent.attempts)
            .returning(PaymentEvent.id)
            .execution_options(synchronize_session=False)
        ).scalars()
    )
    orders = {
        order.number: order
        for order in session.scalars(
            select(Order)
            .where(Order.number.in_({c.order_number for c in confirmed}))
            .order_by(Order.id)
            .options(selectinload(Order.items).selectinload(OrderItem.product))
            .with_for_update(of=Order)
            .execution_options(populate_existing=True)
        )
    }
    order_ids = [order.id for order in orders.values()]
    fulfilled = set(
        session.scalars(select(Fulfilment.order_id).where(Fulfilment.order_id.in_(order_ids)))
    )
    references = {c.confirmation.payment_reference for c in confirmed}
    used = {
        (provider, reference)
        for provider, reference in session.execute(
            select(Fulfilment.provider, Fulfilment.payment_reference).where(
                Fulfilment.payment_reference.in_(references)
            )
        )
    }
    plain: list[tuple[Confirmed, Order]] = []
    left: list[Confirmed] = []
    for event in confirmed:
        if event.row_id not in claimed:
            continue
        order = orders.get(event.order_number)
        reference = (event.provider, event.confirmation.payment_reference)
        # The per-event path's rules (fulfil_confirmed_payment), read from the sets above;
        # renewals and upgrades lock their licenses, so they go per event.
        if (
            order is None
            or order.id in fulfilled
            or order.status not in PAYABLE_STATUSES
            or payment_problems(
                order, event.provider, event.confirmation, paid_elsewhere=reference in used
            )
            or any(item.kind != "purchase" for item in order.items)
        ):
            left.append(event)
            continue
        fulfilled.add(order.id)
        used.add(reference)
        plain.append((event, order))
    return plain, left


def _write_fulfilments(
    session: Session,
    settings: Mapping[str, Any],
    plain: list[tuple[Confirmed, Order]],
    now: dt.datetime,
) -> None:
    """What fulfilment.fulfil_order writes for each order, from the same definitions, in
    executemany statements (about a dozen for the batch instead of some twenty a payment)."""
    session.execute(
        insert(Fulfilment),
        [
            fulfilment_values(
                order,
                provider=event.provider,
                payment_reference=event.confirmation.payment_reference,
                now=now,
                payment_event_id=event.row_id,
                confirmed_amount=event.confirmation.amount,
                confirmed_currency=event.confirmation.currency,
            )
            for event, order in plain
        ],
    )
    entitlements, licenses, keys = [], [], {}
    for event, order in plain:
        mark_paid(order, event.confirmation.payment_reference, now)
        tax_checkout.record_payment_country(order, event.confirmation.country)
        for item in granted_items(order):
            entitlements.append(entitlement_values(order, item))
            if issues_license(item):
                values = new_license_values(
                    item.id, item.product, order.user_id, now, quantity=item.quantity
                )
                keys[item.id] = values["key"]
                licenses.append(values)
    session.flush()  # the orders, paid (one executemany)
    redeem_redemptions(session, [order.id for _, order in plain if order.coupon_code], now)
    session.execute(insert(Entitlement), entitlements)
    if licenses:
        session.execute(insert(License), licenses)
    users = {
        user.id: user
        for user in session.scalars(select(User).where(User.id.in_({o.user_id for _, o in plain})))
    }
    _emit_webhook_events(session, plain, licenses, users)
    currencies = {
        currency.code: currency
        for currency in session.scalars(
            select(Currency).where(Currency.code.in_({o.currency for _, o in plain}))
        )
    }
    receipts = [
        build_receipt(order, users[order.user_id], currencies.get(order.currency), keys)
        for _, order in plain
    ]

    session.connection().execute(
        update(PaymentEvent.__table__)
        .where(PaymentEvent.__table__.c.id == bindparam("row_id"))
        .values(
            status="processed",
            last_error=None,
            processed_at=now,
            order_number=bindparam("number"),
            next_attempt_at=None,
        ),
        [{"row_id": event.row_id, "number": order.number} for event, order in plain],
    )

    # Gap-free numbers for the whole batch, then only the invoices, the receipts and the
    # COMMIT: the year's counter row stays locked for those three round trips.
    seller = invoice_pdf.freeze_seller(session, settings)  # once a batch, before the lock
    first = take_invoice_numbers(session, now.year, len(plain))
    invoices = [invoice_values(order, first + i, now, seller) for i, (_, order) in enumerate(plain)]
    session.execute(insert(Invoice), invoices)
    session.execute(
        insert_messages(session),
        [
            outbox_values(
                settings, **receipt_message(settings, receipt, invoice["number"]), now=now
            )
            for receipt, invoice in zip(receipts, invoices, strict=True)
        ],
    )


def _emit_webhook_events(
    session: Session,
    plain: list[tuple[Confirmed, Order]],
    licenses: list[dict],
    users: dict[int, User],
) -> None:
    """The batch's order.paid and license.created events, as fulfil_order and
    issue_license write them, in executemany inserts: one SELECT when no endpoint
    subscribes, four statements for the whole batch when one does."""
    targets = subscribers(session)
    if not (targets.get("order.paid") or targets.get("license.created")):
        return
    events = []
    for _, order in plain:
        email = users[order.user_id].email if order.user_id in users else None
        events.append(
            ("order.paid", payloads.order_subject(order.number), payloads.order_data(order, email))
        )
    if licenses and targets.get("license.created"):
        ids = dict(
            session.execute(
                select(License.key, License.id).where(
                    License.key.in_([values["key"] for values in licenses])
                )
            ).all()
        )
        orders_by_item = {item.id: order for _, order in plain for item in order.items}
        slugs = {item.id: item.product_slug for _, order in plain for item in order.items}
        for values in licenses:
            order = orders_by_item[values["order_item_id"]]
            license_id = ids[values["key"]]
            data = payloads.license_data(
                license_id,
                key=values["key"],
                product_slug=slugs[values["order_item_id"]],
                status=values["status"],
                expires_at=values["expires_at"],
                max_activations=values["max_activations"],
                features=values["features"],
                email=users[order.user_id].email if order.user_id in users else None,
                order_number=order.number,
            )
            events.append(("license.created", payloads.license_subject(license_id), data))
    emit_events(session, events, targets)
