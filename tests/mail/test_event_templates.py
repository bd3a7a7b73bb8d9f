"""The templates of the shop-event messages (receipt, ticket reply, license expiring, a
license change taken back)
render with realistic data: everything in both parts, HTML escaped, text as written."""

from __future__ import annotations

import pytest

from cmsshop.services.mail.outbox import render_message

BASE = {"site_name": "Tom & Jerry's <Shop>", "base_url": "https://shop.example.com"}
HOSTILE = "Ana <b>&</b> Co"

CASES = {
    "receipt": {
        "subject": "Your receipt for order ORD-2026-ABCDE",
        "customer_name": HOSTILE,
        "order_number": "ORD-2026-ABCDE",
        "order_date": "2026-11-23",
        "items": [
            {
                "name": "Site <Guard> & Co",
                "quantity": 1,
                "unit_amount": "€49.00",
                "amount": "€49.00",
            },
            {"name": "Theme Pack", "quantity": 1, "unit_amount": "€19.00", "amount": "€19.00"},
        ],
        "subtotal": "€68.00",
        "discount": None,
        "coupon_code": None,
        "total": "€80.92",
        "tax": {"label": "VAT 19 %", "amount": "€12.92", "included": False},
        "tax_notes": [],
        "licenses": [{"product": "Site <Guard> & Co", "key": "ABCDE-FGHJK-LMNPQ-RSTUV-WXYZ2"}],
        "invoice_number": "INV-2026-000042",
        "invoice_url": "https://shop.example.com/account/invoices/INV-2026-000042",
        "invoice_pdf_url": "https://shop.example.com/account/invoices/INV-2026-000042.pdf",
        "downloads_url": "https://shop.example.com/account/downloads",
        "licenses_url": "https://shop.example.com/account/licenses",
        "set_password": False,
        "order_link": "https://shop.example.com/login?next=/account/orders/ORD-2026-ABCDE",
        "link_valid_for": None,
    },
    "ticket_reply": {
        "subject": "Re: [TCK-7KQ2M9] Download <fails> & more",
        "customer_name": HOSTILE,
        "ticket_number": "TCK-7KQ2M9",
        "ticket_subject": "Download <fails> & more",
        "reply": "Try this link:\n<https://x.example/?a=1&b=2>\nRegards",
        "ticket_url": "https://shop.example.com/account/tickets/7",
        "ticket_status": "pending",
    },
    "license_expiring": {
        "subject": "Your Site <Guard> & Co license expires on 2026-12-01",
        "customer_name": HOSTILE,
        "product": "Site <Guard> & Co",
        "license_key": "ABCDE-FGHJK-LMNPQ-RSTUV-WXYZ2",
        "expires_on": "2026-12-01",
        "days_left": 8,
        "licenses_url": "https://shop.example.com/account/licenses",
    },
    "license_change_reversed": {
        "subject": "Your license after the refund of order ORD-2026-ABCDE",
        "customer_name": HOSTILE,
        "order_number": "ORD-2026-ABCDE",
        "reversal": "refund",
        "changes": [
            {
                "kind": "upgrade",
                "key": "ABCDE-FGHJK-LMNPQ-RSTUV-WXYZ2",
                "product_before": "Site <Guard> & Co Agency",
                "product_after": "Site <Guard> & Co",
                "seats": 3,
                "deactivated": ["new.example.com"],
                "expires_on": None,
            },
            {
                "kind": "renewal",
                "key": "ZZZZZ-FGHJK-LMNPQ-RSTUV-WXYZ2",
                "product_before": "Theme Pack",
                "product_after": "Theme Pack",
                "seats": 1,
                "deactivated": [],
                "expires_on": "2026-12-01",
            },
        ],
        "licenses_url": "https://shop.example.com/account/licenses",
    },
}

# What each message must say, in both parts.
MUST_SAY = {
    "receipt": [
        "ORD-2026-ABCDE",
        "2026-11-23",
        "€49.00",
        "€19.00",
        "€80.92",
        "VAT 19 %",
        "€12.92",
        "Theme Pack",
        "INV-2026-000042",
        "https://shop.example.com/account/invoices/INV-2026-000042",
        "https://shop.example.com/account/invoices/INV-2026-000042.pdf",
        "Download the invoice (PDF)",
        "ABCDE-FGHJK-LMNPQ-RSTUV-WXYZ2",
        "https://shop.example.com/account/downloads",
        "https://shop.example.com/account/licenses",
        "https://shop.example.com/login?next=/account/orders/ORD-2026-ABCDE",
    ],
    "ticket_reply": ["TCK-7KQ2M9", "https://shop.example.com/account/tickets/7"],
    "license_expiring": [
        "ABCDE-FGHJK-LMNPQ-RSTUV-WXYZ2",
        "2026-12-01",
        "in 8 days",
        "https://shop.example.com/account/licenses",
    ],
    "license_change_reversed": [
        "ORD-2026-ABCDE",
        "refunded",
        "ABCDE-FGHJK-LMNPQ-RSTUV-WXYZ2",
        "3 seats",
        "new.example.com",
        "ZZZZZ-FGHJK-LMNPQ-RSTUV-WXYZ2",
        "2026-12-01",
        "https://shop.example.com/account/licenses",
    ],
}
# Text with markup characters, as typed (text) and escaped (HTML).
RAW = {
    "receipt": [HOSTILE, "Site <Guard> & Co"],
    "ticket_reply": [HOSTILE, "Download <fails> & more", "<https://x.example/?a=1&b=2>"],
    "license_expiring": [HOSTILE, "Site <Guard> & Co"],
    "license_change_reversed": [HOSTILE, "Site <Guard> & Co Agency"],
}


def escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@pytest.mark.parametrize("template", sorted(CASES))
def test_each_template_renders_both_parts(template):
    text, html = render_message(template, {**BASE, **CASES[template]})
    for part in (text, html):
        for fact in MUST_SAY[template]:
            assert fact in part, (template, fact)
    for raw in [*RAW[template], BASE["site_name"]]:
        assert raw in text
        assert raw not in html
        assert escaped(raw).replace("'", "&#39;") in html
    assert "<b>" not in html and "{{" not in text + html
    assert html.lstrip().startswith("<!doctype html>")  # it extends mail/layout.html
    assert "&lt;" not in text and "&amp;" not in text


def test_a_receipt_without_licensed_items_has_no_key_section():
    context = {**BASE, **CASES["receipt"], "licenses": []}
    text, html = render_message("receipt", context)
    assert "license key" not in text.lower() and "license key" not in html.lower()
    assert "https://shop.example.com/account/downloads" in text


def test_a_receipt_links_to_the_order_through_login_or_a_set_password_link():
    """Either way one link, and nothing else about the account."""
    text, html = render_message("receipt", {**BASE, **CASES["receipt"]})
    assert "Log in to see your order" in text and "Log in to see your order" in html
    assert "password" not in text.lower() and "password" not in html.lower()
    link = "https://shop.example.com/set-password?token=HIDDEN-UNTIL-SENT&next=/account/orders/O"
    guest = {"set_password": True, "order_link": link, "link_valid_for": "7 days"}
    text, html = render_message("receipt", {**BASE, **CASES["receipt"], **guest})
    assert "Set a password and see your order" in text and link in text
    assert "within 7 days" in text and "within 7 days" in html
    assert escaped(link) in html and "Log in" not in text + html


def test_a_receipt_shows_quantities_and_the_coupon_discount():
    lines = {
        "items": [
            {"name": "Site <Guard> & Co × 3", "quantity": 3, "unit_amount": "€49.00",
             "amount": "€147.00"},
            {"name": "Theme Pack", "quantity": 1, "unit_amount": "€19.00", "amount": "€19.00"},
        ],
        "subtotal": "€166.00",
        "discount": "€16.60",
        "coupon_code": "SPRING<10>",
        "total": "€149.40",
    }  # fmt: skip
    text, html = render_message("receipt", {**BASE, **CASES["receipt"], **lines})
    assert "Site <Guard> & Co × 3: €147.00 (€49.00 each)" in text
    assert "Theme Pack: €19.00\n" in text  # one unit: no unit price
    assert "Subtotal: €166.00" in text and "Discount (coupon SPRING<10>): -€16.60" in text
    assert "Total: €149.40" in text
    assert "Site &lt;Guard&gt; &amp; Co × 3" in html and "(€49.00 each)" in html
    assert "coupon SPRING&lt;10&gt;" in html and "&minus;€16.60" in html
    plain, _ = render_message("receipt", {**BASE, **CASES["receipt"]})
    assert "Subtotal" not in plain and "Discount" not in plain and "each" not in plain


def test_a_closed_ticket_says_a_reply_reopens_it():
    text, html = render_message(
        "ticket_reply", {**BASE, **CASES["ticket_reply"], "ticket_status": "closed"}
    )
    assert "replying opens it again" in text and "replying opens it again" in html


@pytest.mark.parametrize(("days", "says"), [(0, "(today)"), (1, "(tomorrow)"), (8, "in 8 days")])
def test_the_days_left_read_naturally(days, says):
    text, _ = render_message(
        "license_expiring", {**BASE, **CASES["license_expiring"], "days_left": days}
    )
    assert says in text
