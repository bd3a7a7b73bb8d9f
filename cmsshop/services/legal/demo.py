"""Placeholder legal pages for the demo data (services/demo.py): clearly marked as
examples, so nobody mistakes them for advice, and enough for checkout to ask for the
terms and the footer to list every page."""

from __future__ import annotations

from sqlalchemy.orm import Session

from cmsshop.services.legal import documents

PLACEHOLDER = (
    "*This is placeholder text of the demo shop. Replace it with your own under "
    "Admin › Legal pages before you sell.*\n\n"
)
PAGES = {
    "terms": (
        "Terms of sale",
        "## Who sells\n\nThe seller named in the legal notice sells every product of this "
        "shop.\n\n## What you buy\n\nA license to use the software as its product page "
        "describes, for the number of sites and the period stated there.\n\n## Price and "
        "payment\n\nPrices are shown at checkout with any tax. You pay through the payment "
        "provider named at checkout.\n\n## Delivery\n\nDownloads and license keys are "
        "available in your account as soon as the payment is confirmed.\n\n## Refunds\n\n"
        "See the [refund policy](/legal/refunds).",
    ),
    "privacy": (
        "Privacy policy",
        "## What we keep\n\nYour e-mail address, name, billing details and orders, to sell "
        "and deliver what you buy and to issue invoices.\n\n## Who else sees it\n\nThe "
        "payment provider you choose, to take the payment.\n\n## Your rights\n\nYou can "
        "download or delete your data from your account's settings.",
    ),
    "imprint": (
        "Legal notice",
        "## Seller\n\nDemo Software Ltd.\n\n1 Example Street, 10115 Berlin, Germany\n\n"
        "E-mail: shop@example.com",
    ),
    "refunds": (
        "Refund policy",
        "## 14 days\n\nIf the software does not work for you, ask for a refund within 14 "
        "days of your purchase: we refund the full price and revoke the license key.",
    ),
}


def seed_demo_legal(session: Session) -> list[str]:
    """Publish version 1 of each legal page not published yet (once only)."""
    report = []
    for kind, (title, body) in PAGES.items():
        if documents.latest(session, kind) is not None:
            continue
        # The seed writes everything in one transaction: no lock step (it would commit
        # the seed's earlier writes on SQLite).
        documents.publish(
            session,
            kind,
            title=title,
            body=PLACEHOLDER + body,
            actor_name="demo",
            write_lock=False,
        )
        report.append(f"legal page /legal/{kind}")
    return report
