"""Credit notes: an issued invoice is never edited; money that goes back corrects it with a
credit note in its own gap-free series (CN-<year>-<sequence>), referring to the invoice.

One per cause, in the transaction of the provider event that confirms it:
- a refund confirmed by the provider's event (``refund:<refunds.id>``): its amount, on
  the lines it named, or spread over the invoice's lines;
- a lost chargeback (``chargeback:<invoices.id>``): everything not credited yet.

The unique ``cause`` makes it exactly once; the order row is locked by the caller (the
event's transaction), so two deliveries of one event cannot both pass the look-up.

Amounts: a credited gross ``g`` on a line taxed at rate ``r`` (the invoice's own rate,
whatever the rate is today) splits as a tax-inclusive gross does (rounding.net_of_gross:
net = g / (1 + r) rounded half up, tax = g - net), in Decimal arithmetic; every amount on
a credit note is negative. An invoice line without a rate (issued before taxes were
charged) credits at 0 %. An amount refunded without lines is spread over the lines in
proportion to what is left of each (largest remainder), so the credited parts always add
up to the refunded amount exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cmsshop.models import CreditNote, CreditNoteCounter, Invoice, Order, Refund
from cmsshop.services.payments.fulfilment import take_invoice_numbers
from cmsshop.services.payments.lines import read_invoice_lines
from cmsshop.services.tax.rounding import net_of_gross, share
from cmsshop.util import utcnow


def credit_note_number(year: int, sequence: int) -> str:
    return f"CN-{year}-{sequence:06d}"


def line_rate(line: dict[str, Any]) -> Decimal:
    """An invoice line's tax rate as a fraction (``"19"`` -> 0.19); none stated: 0."""
    rate = line.get("taxRate")
    return Decimal(str(rate)) / 100 if rate not in (None, "") else Decimal(0)


def credited_by_line(session: Session, invoice: Invoice) -> list[int]:
    """What the invoice's credit notes gave back so far, per invoice line (positive)."""
    lines = read_invoice_lines(invoice.lines)
    credited = [0] * len(lines)
    for note_lines in session.scalars(
        select(CreditNote.lines).where(CreditNote.invoice_id == invoice.id)
    ):
        for line in note_lines:
            index = line.get("line")
            if isinstance(index, int) and 0 <= index < len(credited):
                credited[index] -= line["amount"]
    return credited


def _lines(invoice: Invoice, parts: Iterable[tuple[int, int]]) -> list[dict[str, Any]]:
    stored = invoice.lines or []
    read = read_invoice_lines(stored)
    lines = []
    for index, gross in parts:
        if gross <= 0:
            continue
        rate_text = stored[index].get("taxRate") if isinstance(stored[index], dict) else None
        net, tax = net_of_gross(gross, line_rate(stored[index]) * 100)
        lines.append(
            {
                "line": index,
                "product": read[index]["product"],
                "name": read[index]["name"],
                "taxRate": str(rate_text) if rate_text not in (None, "") else "0",
                "net": -net,
                "tax": -tax,
                "amount": -gross,
            }
        )
    return lines


def _issue(
    session: Session,
    invoice: Invoice,
    order: Order,
    *,
    cause: str,
    kind: str,
    parts: list[tuple[int, int]],
    refund: Refund | None = None,
) -> CreditNote | None:
    lines = _lines(invoice, parts)
    if not lines:
        return None
    now = utcnow()
    sequence = take_invoice_numbers(session, now.year, counter=CreditNoteCounter)
    note = CreditNote(
        number=credit_note_number(now.year, sequence),
        year=now.year,
        sequence=sequence,
        cause=cause,
        kind=kind,
        invoice_id=invoice.id,
        order_id=order.id,
        user_id=order.user_id,
        refund_id=None if refund is None else refund.id,
        issued_at=now,
        currency=invoice.currency,
        total=sum(line["amount"] for line in lines),
        net_total=sum(line["net"] for line in lines),
        tax_total=sum(line["tax"] for line in lines),
        lines=lines,
    )
    session.add(note)
    session.flush()
    return note


def _invoice_of(session: Session, order: Order) -> Invoice | None:
    return session.scalar(select(Invoice).where(Invoice.order_id == order.id))


def _exists(session: Session, cause: str) -> bool:
    return session.scalar(select(func.count()).where(CreditNote.cause == cause)) > 0


def issue_for_refunds(
    session: Session, order: Order, refunds: Sequence[Refund]
) -> list[CreditNote]:
    """A credit note per refund the provider just confirmed, for the locked ``order``
    (none while the order has no invoice: it was never delivered, nothing to correct)."""
    invoice = _invoice_of(session, order)
    if invoice is None:
        return []
    items = [item.id for item in order.items]
    notes = []
    for refund in refunds:
        cause = f"refund:{refund.id}"
        if _exists(session, cause):
            continue
        credited = credited_by_line(session, invoice)
        gross = [line["amount"] for line in read_invoice_lines(invoice.lines)]
        left = [max(g - c, 0) for g, c in zip(gross, credited, strict=True)]
        amount = min(refund.amount, sum(left))
        named = [0] * len(left)
        if refund.lines and len(items) == len(left):
            for entry in refund.lines:
                if entry.get("item") in items:
                    index = items.index(entry["item"])
                    named[index] = min(int(entry["amount"]), left[index] - named[index])
        # What the named lines cannot take (an earlier refund by amount already credited
        # part of them) is spread over the rest, so the note always equals the refund.
        rest = share(amount - sum(named), [lf - n for lf, n in zip(left, named, strict=True)])
        parts = [(i, n + r) for i, (n, r) in enumerate(zip(named, rest, strict=True))]
        note = _issue(
            session, invoice, order, cause=cause, kind="refund", parts=parts, refund=refund
        )
        if note is not None:
            notes.append(note)
    return notes


def issue_for_chargeback(session: Session, order: Order) -> CreditNote | None:
    """The credit note of a lost chargeback: everything of the invoice not credited yet."""
    invoice = _invoice_of(session, order)
    if invoice is None:
        return None
    cause = f"chargeback:{invoice.id}"
    if _exists(session, cause):
        return None
    credited = credited_by_line(session, invoice)
    gross = [line["amount"] for line in read_invoice_lines(invoice.lines)]
    parts = [(i, max(g - c, 0)) for i, (g, c) in enumerate(zip(gross, credited, strict=True))]
    return _issue(session, invoice, order, cause=cause, kind="chargeback", parts=parts)


NUMBER_PATTERN = re.compile(r"CN-\d{4}-\d{6,}")


class CreditNoteNotFound(Exception):
    pass


def find_credit_note(session: Session, number: str, user_id: int | None = None) -> CreditNote:
    """The credit note of this number (the customer's own when ``user_id`` is given);
    CreditNoteNotFound otherwise, another customer's included."""
    note = None
    if NUMBER_PATTERN.fullmatch(number or ""):
        query = select(CreditNote).where(CreditNote.number == number)
        if user_id is not None:
            query = query.where(CreditNote.user_id == user_id)
        note = session.scalar(query)
    if note is None:
        raise CreditNoteNotFound(number)
    return note


def credit_notes_of_order(session: Session, order_id: int) -> list[CreditNote]:
    return list(
        session.scalars(
            select(CreditNote).where(CreditNote.order_id == order_id).order_by(CreditNote.id)
        )
    )
