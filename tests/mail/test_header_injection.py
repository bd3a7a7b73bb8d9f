"""No header of a sent message can be chosen by the text a user or an admin typed.

Every kind of message the shop sends is queued through its real cause, with hostile
text wherever such text reaches a header (the site name in From for all of them, the
ticket subject, the product name), delivered by the real sender to a real SMTP server,
and the bytes that arrived are read back: exactly the shop's own headers, nothing
injected. The encoded word below is decoded and refolded with raw CRLF by the e-mail
library of some Python versions (the subject becomes three headers and a body).
"""

from __future__ import annotations

import datetime as dt
import email
import email.policy
import re

import pytest
from fakes.shop import make_catalogue, make_order
from fakes.stripe_api import charge_object, event
from helpers.account_data import paid_order
from helpers.app import HASHER, PASSWORD
from helpers.clients import client_from, new_client
from helpers.license_changes import buy, order_of, pay
from helpers.outbox import rows
from helpers.payments import send
from helpers.support import open_ticket
from sqlalchemy import delete, select

from cmsshop.models import License, OutboxMessage, Product
from cmsshop.services.accounts.users import create_user
from cmsshop.services.licensing.reminders import queue_expiry_reminders
from cmsshop.services.mail.delivery import make_mail_backend
from cmsshop.services.mail.sender import send_due
from cmsshop.services.payments import fulfilment
from cmsshop.settings import load_settings
from cmsshop.util import utcnow

ENCODED_WORD = "Invoice =?utf-8?q?=0D=0AReply-To:_billing@attacker.example=0D=0A=0D=0APlease_pay?="
# Characters that break a line for someone: C0 and C1 controls, Unicode separators.
LINE_BREAKS = "Invoice\u2028Reply-To: billing@attacker.example\x85Bcc: x@attacker.example\x0b!"
HOSTILE = {"encoded-word": ENCODED_WORD, "line-breaks": LINE_BREAKS}

# A message's headers: the shop's own, nothing else.
HEADERS = [
    "From",
    "To",
    "Subject",
    "Date",
    "Message-ID",
    "Auto-Submitted",
    "MIME-Version",
    "Content-Type",
]
QUEUE_SETTINGS = {"cmsshop.base_url": "https://shop.example.com", "cmsshop.site_name": "Shop"}


def queue_receipt(dbsession, app, customer, hostile, request):
    make_catalogue(dbsession)
    order = make_order(dbsession, customer, ("site-guard", "themes"))
    locked = fulfilment.lock_order(dbsession, order.id)
    fulfilment.fulfil_order(
        dbsession, locked, settings=QUEUE_SETTINGS, provider="cardprovider", payment_reference="pi"
    )
    dbsession.commit()


def queue_password_reset(dbsession, app, customer, hostile, request):
    client_from(app, "10.6.0.1").post_json(
        "/api/auth/password-reset", {"email": customer.email}, status=202
    )


def queue_verification(dbsession, app, customer, hostile, request):
    client_from(app, "10.6.0.2").post_json(
        "/api/auth/register",
        {"email": "fresh@example.com", "password": "a long new password"},
        status=202,
    )


def queue_account_exists(dbsession, app, customer, hostile, request):
    client_from(app, "10.6.0.3").post_json(
        "/api/auth/register",
        {"email": customer.email, "password": "a long new password"},
        status=202,
    )


def queue_license_expiring(dbsession, app, customer, hostile, request):
    make_catalogue(dbsession)
    order = paid_order(dbsession, customer, ("site-guard",))
    license = dbsession.scalar(
        select(License).where(License.order_item_id.in_([i.id for i in order.items]))
    )
    license.expires_at = utcnow() + dt.timedelta(days=5)
    dbsession.get(Product, license.product_id).name = hostile  # an admin's product name
    dbsession.execute(delete(OutboxMessage))  # the order's receipt: a case of its own
    dbsession.commit()
    assert queue_expiry_reminders(dbsession, QUEUE_SETTINGS, days=30) == 1
    dbsession.commit()


def queue_ticket_reply(dbsession, app, customer, hostile, request):
    # The customer's subject, which the staff reply's Subject repeats.
    admin = create_user(dbsession, HASHER, "staff@example.com", PASSWORD, role="admin")
    dbsession.commit()
    customer_client, staff = new_client(app), new_client(app)
    customer_client.login(customer.email)
    ticket = open_ticket(customer_client, subject=hostile)
    staff.login(admin.email)
    staff.post_json(f"/api/admin/tickets/{ticket['id']}/messages", {"body": "Your invoice."})


def queue_license_change_reversed(dbsession, app, customer, hostile, request):
    # An upgrade paid through the card provider, then refunded in full: the license
    # goes back to its tier and the customer is told.
    fixtures = ("card_buyer", "webhook", "fake_stripe", "tiered_license", "tiers")
    buyer, webhook, fake_stripe, license, _ = map(request.getfixturevalue, fixtures)
    placed = buy(buyer, {"upgrade": license.key, "to": "site-guard-agency"})
    order = order_of(dbsession, placed.json["order"]["number"])
    _, _, intent = pay(webhook, fake_stripe, order)
    dbsession.rollback()  # a fresh transaction: the payment committed since the last read
    dbsession.execute(delete(OutboxMessage))  # the receipts: cases of their own
    dbsession.commit()
    refund = event("charge.refunded", charge_object(intent, order.total))
    assert send(webhook, refund, 200).json["status"] == "processed"
    dbsession.rollback()
    dbsession.execute(delete(OutboxMessage).where(OutboxMessage.kind == "refund"))  # its own
    dbsession.commit()


def queue_refund(dbsession, app, customer, hostile, request):
    # A paid order refunded in full at the provider: the buyer is told.
    webhook, fake_stripe = map(request.getfixturevalue, ("webhook", "fake_stripe"))
    make_catalogue(dbsession)
    order = make_order(dbsession, customer, ("site-guard", "themes"))
    _, _, intent = pay(webhook, fake_stripe, order)
    dbsession.rollback()
    dbsession.execute(delete(OutboxMessage))  # the receipt: a case of its own
    dbsession.commit()
    refund = event("charge.refunded", charge_object(intent, order.total))
    assert send(webhook, refund, 200).json["status"] == "processed"
    dbsession.rollback()


KINDS = {
    "receipt": queue_receipt,
    "password_reset": queue_password_reset,
    "verify_email": queue_verification,
    "account_exists": queue_account_exists,
    "license_expiring": queue_license_expiring,
    "ticket_reply": queue_ticket_reply,
    "license_change_reversed": queue_license_change_reversed,
    "refund": queue_refund,
}


# Where the hostile text goes: the site name (admin text, the From header's display
# name, in every kind) or the text of the message's cause that its Subject repeats.
SUBJECT_FROM_TEXT = ("license_expiring", "ticket_reply")
CASES = [(kind, "site name") for kind in sorted(KINDS)] + [
    (kind, "subject") for kind in SUBJECT_FROM_TEXT
]


@pytest.mark.parametrize("hostile", sorted(HOSTILE))
@pytest.mark.parametrize(("kind", "place"), CASES)
def test_hostile_text_never_becomes_a_header(
    kind, place, hostile, app, engine, dbsession, customer, smtp_server, request
):
    text = HOSTILE[hostile]
    KINDS[kind](
        dbsession, app, customer, text if place == "subject" else "Cannot download", request
    )
    (row,) = rows(dbsession)
    assert row.kind == kind
    settings = load_settings(
        {
            "cmsshop.database_url": "sqlite://",
            "cmsshop.site_name": text if place == "site name" else "Shop",
            **smtp_server.settings(),
        },
        environ={},
    )
    report = send_due(engine, make_mail_backend(settings), settings)
    assert report.sent == 1, rows(dbsession)[0].last_error
    (raw,) = smtp_server.raw_messages
    (envelope,) = smtp_server.mailbox.envelopes
    assert envelope[1] == [row.to_address]

    head, _, body = raw.partition(b"\r\n\r\n")
    names = [line.split(b":", 1)[0].decode() for line in head.split(b"\r\n") if line[:1] != b" "]
    assert names == HEADERS
    # Nothing anywhere in the message reads as one of the attacker's headers.
    assert not re.search(rb"^(reply-to|bcc|cc)\s*:", raw, re.IGNORECASE | re.MULTILINE)

    message = email.message_from_bytes(raw, policy=email.policy.default)
    assert list(message.keys()) == HEADERS
    assert message["Reply-To"] is None and message["Bcc"] is None
    for name in ("From", "To", "Subject"):
        value = str(message[name])
        assert not re.search(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]", value), (name, value)
        assert "=?" not in value, (name, value)
    assert message["From"].addresses[0].addr_spec == "noreply@localhost"
    shown = "Invoice" if place == "site name" else "Shop"
    assert message["From"].addresses[0].display_name.startswith(shown)
    assert str(message["To"]) == row.to_address
    if place == "subject":
        # The customer's words, shown as typed, only no longer an encoded word.
        assert "Invoice" in str(message["Subject"])
    # The text and HTML parts are the message's own.
    assert message.get_content_type() == "multipart/alternative"
    assert [part.get_content_type() for part in message.iter_parts()] == [
        "text/plain",
        "text/html",
    ]


@pytest.mark.parametrize(
    "address",
    [
        "=?utf-8?q?Bcc=3A_x=40attacker.example?=@example.com",
        "=?utf-8?q?=0D=0ABcc=3A_x=40attacker.example?=@example.com",
    ],
)
def test_an_address_with_an_encoded_word_is_never_sent_to(
    address, app, engine, dbsession, smtp_server
):
    """Such an address passes the registration's e-mail check, but in a To header it
    is decoded into another recipient: its mail fails at once, and nothing is sent."""
    client_from(app, "10.6.0.9").post_json(
        "/api/auth/register", {"email": address, "password": "a long new password"}, status=202
    )
    (row,) = rows(dbsession)
    settings = load_settings(
        {
            "cmsshop.database_url": "sqlite://",
            "cmsshop.site_name": "Shop",
            **smtp_server.settings(),
        },
        environ={},
    )
    report = send_due(engine, make_mail_backend(settings), settings)
    assert (report.sent, report.failed) == (0, 1)
    (row,) = rows(dbsession)
    assert row.status == "failed" and "address" in row.last_error
    assert smtp_server.raw_messages == []
    assert smtp_server.mailbox.data_started == 0
