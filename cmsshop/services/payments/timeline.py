"""An order's timeline for the admin console: everything that happened to it, oldest
first, with who did it. A fixed number of queries, one a source, however long the order's
story: placement, provider events, fulfilment, refunds, credit notes, staff notes, mails
queued for it, what it did to licenses (renewals and upgrades, their reversal, admin
changes and activations of its licenses, reviews), its coupon, and its cancellation.

A mail belongs to an order when its ``dedupe_key`` names it: ``<kind>:order:<id>`` (the
receipt, the license-reversal mail) or ``<kind>:order:<id>:<more>``, or names one of its
refunds (``mail_keys_filter``)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from urllib.parse import quote

from sqlalchemy import and_, literal, or_, select
from sqlalchemy.orm import Session, aliased

from cmsshop.models import (
    Coupon,
    CouponRedemption,
    CreditNote,
    Currency,
    Fulfilment,
    License,
    LicenseAuditEntry,
    LicenseChange,
    LicenseReview,
    Order,
    OrderItem,
    OrderNote,
    OutboxMessage,
    PaymentEvent,
    Refund,
    User,
)
from cmsshop.services.store.currencies import format_amount

# Ties in time keep this order: what causes comes before what it causes.
KINDS = (
    "placed",
    "payment_event",
    "fulfilled",
    "coupon",
    "license_change",
    "refund",
    "credit_note",
    "license_review",
    "license",
    "mail",
    "note",
    "closed",
)
_RANK = {kind: rank for rank, kind in enumerate(KINDS)}
# Licensing calls shown: an admin's change and the seats taken and freed. Validations
# (many a day per installation) and refused calls stay in the licence's audit log.
SHOWN_LICENSE_ACTIONS = ("activate", "deactivate")
SYSTEM = "the shop"


@dataclasses.dataclass(frozen=True)
class TimelineEntry:
    at: dt.datetime
    kind: str  # one of KINDS
    title: str  # what happened, one line
    actor: str  # who did it: an email, "guest x@y", "provider cardprovider", SYSTEM
    detail: str | None = None  # a note's body, a reason, an error
    status: str | None = None  # the row's status where it has one (event, refund, mail)
    # Where to look closer (an event log entry, a licence), with the module it needs.
    href: str | None = None
    href_module: str | None = None
    seq: int = 0  # the row's id: a stable order for ties


def _email(user: User | None, missing: str = SYSTEM) -> str:
    return user.email if user is not None else missing


def mail_keys_filter(order: Order):
    """The order's mails: keys naming the order, and the refund mails, keyed by the
    provider's refund id (``refund:<provider>:<refund id>``) or, when the refund event
    had none, by the event (``refund:<provider>:event:<event id>``)."""
    by_refund = select(
        literal("refund:") + Refund.provider + literal(":") + Refund.provider_refund_id
    ).where(Refund.order_id == order.id, Refund.provider_refund_id.is_not(None))
    by_event = select(
        literal("refund:") + PaymentEvent.provider + literal(":event:") + PaymentEvent.event_id
    ).where(PaymentEvent.order_number == order.number)
    return or_(
        OutboxMessage.dedupe_key.like(f"%:order:{order.id}"),
        OutboxMessage.dedupe_key.like(f"%:order:{order.id}:%"),
        OutboxMessage.dedupe_key.in_(by_refund),
        OutboxMessage.dedupe_key.in_(by_event),
    )


def order_timeline(session: Session, order: Order) -> list[TimelineEntry]:
    """What happened to ``order``, oldest first."""
    entries: list[TimelineEntry] = []
    add = entries.append
    item_ids = select(OrderItem.id).where(OrderItem.order_id == order.id)

    buyer = session.get(User, order.user_id)
    currency = session.get(Currency, order.currency)

    def money(amount: int, code: str) -> str:
        if currency is None or code != currency.code:
            return f"{amount} {code} (minor units)"
        return format_amount(amount, currency.symbol, currency.decimals)

    who = f"guest {_email(buyer)}" if order.guest else f"customer {_email(buyer)}"
    add(TimelineEntry(order.created_at, "placed", "Order placed", who, seq=order.id))

    for event in session.scalars(
        select(PaymentEvent).where(PaymentEvent.order_number == order.number)
    ):
        add(
            TimelineEntry(
                event.received_at,
                "payment_event",
                f"Payment event {event.event_type} received",
                f"provider {event.provider}",
                detail=f"{event.event_id}, attempts {event.attempts}"
                + (f": {event.last_error}" if event.last_error else ""),
                status=event.status,
                href=f"/admin/payments/events/{event.id}",
                href_module="payments",
                seq=event.id,
            )
        )

    admin = aliased(User)
    row = session.execute(
        select(Fulfilment, admin, PaymentEvent)
        .outerjoin(admin, admin.id == Fulfilment.admin_id)
        .outerjoin(PaymentEvent, PaymentEvent.id == Fulfilment.payment_event_id)
        .where(Fulfilment.order_id == order.id)
    ).first()
    if row is not None:
        done, by_admin, by_event = row
        if done.manual:
            title, actor = "Fulfilled by hand", _email(by_admin, f"admin #{done.admin_id}")
            detail = done.reason
        elif by_event is not None:
            title = f"Fulfilled by event {by_event.event_id}"
            actor, detail = f"provider {by_event.provider}", None
        else:
            title, actor, detail = "Fulfilled", f"provider {done.provider}", None
        add(
            TimelineEntry(
                done.created_at,
                "fulfilled",
                title + f" (payment {done.payment_reference})",
                actor,
                detail=detail,
                seq=done.id,
            )
        )

    requester = aliased(User)
    for refund, by in session.execute(
        select(Refund, requester)
        .outerjoin(requester, requester.id == Refund.requested_by)
        .where(Refund.order_id == order.id)
    ):
        actor = by.email if by is not None else f"at the provider ({refund.provider})"
        amount = money(refund.amount, refund.currency)
        add(
            TimelineEntry(
                refund.created_at,
                "refund",
                f"Refund of {amount} requested",
                actor,
                detail=refund.error or refund.reason or None,
                # A confirmed refund's status shows on the "confirmed" entry.
                status=None if refund.confirmed_at is not None else refund.status,
                seq=refund.id,
            )
        )
        if refund.confirmed_at is not None:
            add(
                TimelineEntry(
                    refund.confirmed_at,
                    "refund",
                    f"Refund of {amount} confirmed",
                    f"provider {refund.provider}",
                    status=refund.status,
                    seq=refund.id,
                )
            )

    for credit_note in session.scalars(select(CreditNote).where(CreditNote.order_id == order.id)):
        add(
            TimelineEntry(
                credit_note.issued_at,
                "credit_note",
                f"Credit note {credit_note.number} issued for "
                f"{money(-credit_note.total, credit_note.currency)}",
                SYSTEM,
                detail="refund" if credit_note.kind == "refund" else "lost chargeback",
                href=f"/admin/credit-notes/{credit_note.number}",
                seq=credit_note.id,
            )
        )

    author = aliased(User)
    for note, by in session.execute(
        select(OrderNote, author)
        .join(author, author.id == OrderNote.author_id)
        .where(OrderNote.order_id == order.id)
    ):
        add(TimelineEntry(note.created_at, "note", "Note added", by.email, note.body, seq=note.id))

    for mail in session.scalars(select(OutboxMessage).where(mail_keys_filter(order))):
        add(
            TimelineEntry(
                mail.created_at,
                "mail",
                f"E-mail queued: {mail.subject}",
                SYSTEM,
                detail=f"{mail.kind} to {mail.to_address}"
                + (f" ({mail.attempts} attempts: {mail.last_error})" if mail.last_error else ""),
                # Its outcome shows on the "sent" entry; a pending or failed one shows here.
                status=None if mail.sent_at is not None else mail.status,
                seq=mail.id,
            )
        )
        if mail.sent_at is not None:
            add(
                TimelineEntry(
                    mail.sent_at,
                    "mail",
                    f"E-mail sent: {mail.subject}",
                    SYSTEM,
                    detail=f"{mail.kind} to {mail.to_address}",
                    status=mail.status,
                    seq=mail.id,
                )
            )

    for change, key in session.execute(
        select(LicenseChange, License.key)
        .join(License, License.id == LicenseChange.license_id)
        .where(LicenseChange.order_item_id.in_(item_ids))
    ):
        add(
            TimelineEntry(
                change.created_at,
                "license_change",
                f"License {key}: {change.kind}"
                + _change_detail(change.old_expires_at, change.new_expires_at),
                f"customer {_email(buyer)}",
                href=f"/admin/licenses/{quote(key, safe='')}",
                href_module="licensing",
                seq=change.id,
            )
        )
        if change.reversed_at is not None:
            add(
                TimelineEntry(
                    change.reversed_at,
                    "license_change",
                    f"License {key}: {change.kind} reversed after a {change.reversal}",
                    SYSTEM,
                    href=f"/admin/licenses/{quote(key, safe='')}",
                    href_module="licensing",
                    seq=change.id,
                )
            )

    # The order's own licenses and those its renewals and upgrades changed.
    license_ids = (
        select(License.id)
        .where(License.order_item_id.in_(item_ids))
        .union(select(LicenseChange.license_id).where(LicenseChange.order_item_id.in_(item_ids)))
    )
    changer = aliased(User)
    for entry, key, by in session.execute(
        select(LicenseAuditEntry, License.key, changer)
        .join(License, License.id == LicenseAuditEntry.license_id)
        .outerjoin(changer, changer.id == LicenseAuditEntry.admin_id)
        .where(
            LicenseAuditEntry.license_id.in_(license_ids),
            or_(
                LicenseAuditEntry.action.like("admin.%"),
                and_(
                    LicenseAuditEntry.action.in_(SHOWN_LICENSE_ACTIONS),
                    LicenseAuditEntry.outcome == "ok",
                ),
            ),
        )
    ):
        if entry.action.startswith("admin."):
            what = entry.detail or entry.action.removeprefix("admin.")
            actor = _email(by, f"admin #{entry.admin_id}")
        else:
            what = f"{entry.action}d on {entry.domain or 'an installation'}"
            actor = f"installation at {entry.ip}"
        add(
            TimelineEntry(
                entry.created_at,
                "license",
                f"License {key}: {what}",
                actor,
                href=f"/admin/licenses/{quote(key, safe='')}",
                href_module="licensing",
                seq=entry.id,
            )
        )

    resolver = aliased(User)
    for review, key, by in session.execute(
        select(LicenseReview, License.key, resolver)
        .join(License, License.id == LicenseReview.license_id)
        .outerjoin(resolver, resolver.id == LicenseReview.resolved_by)
        .where(LicenseReview.order_id == order.id)
    ):
        add(
            TimelineEntry(
                review.created_at,
                "license_review",
                f"License {key} held for review",
                SYSTEM,
                detail=review.note,
                seq=review.id,
            )
        )
        if review.resolved_at is not None:
            add(
                TimelineEntry(
                    review.resolved_at,
                    "license_review",
                    f"Review of license {key} resolved",
                    _email(by, "an admin"),
                    seq=review.id,
                )
            )

    row = session.execute(
        select(CouponRedemption, Coupon.code)
        .join(Coupon, Coupon.id == CouponRedemption.coupon_id)
        .where(CouponRedemption.order_id == order.id)
    ).first()
    if row is not None:
        redemption, code = row
        discount = money(redemption.discount, redemption.currency) + " off"
        add(
            TimelineEntry(
                redemption.created_at,
                "coupon",
                f"Coupon {code} applied",
                f"customer {_email(buyer)}",
                detail=discount,
                status="reserved",
                seq=redemption.id,
            )
        )
        if redemption.status != "reserved":
            add(
                TimelineEntry(
                    redemption.updated_at,
                    "coupon",
                    f"Coupon {code} {redemption.status}",
                    SYSTEM,
                    status=redemption.status,
                    seq=redemption.id,
                )
            )

    if order.status in ("cancelled", "failed"):
        # No row records the moment: the order's last change is it (states only move on).
        add(
            TimelineEntry(
                order.updated_at,
                "closed",
                f"Order {order.status} unpaid",
                SYSTEM,
                detail="expired unpaid, or the provider could not take it"
                if order.status == "cancelled"
                else "the provider reported the payment failed",
                status=order.status,
                seq=order.id,
            )
        )

    entries.sort(key=lambda e: (e.at, _RANK[e.kind], e.seq))
    return entries


def _change_detail(old: dt.datetime | None, new: dt.datetime | None) -> str:
    if old == new:
        return ""

    def day(value: dt.datetime | None) -> str:
        return value.date().isoformat() if value else "never"

    return f", expires {day(old)} → {day(new)}"
