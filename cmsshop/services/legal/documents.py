"""The legal pages (terms of sale, privacy policy, legal notice, refund policy).

A page is a series of versions (models.LegalDocument): editing publishes a new version and
never changes an older one, so an order's ``terms_version`` always names the exact text
its buyer accepted. The newest version of a kind is the published page.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cmsshop.content import kept_per_version
from cmsshop.db import take_write_lock
from cmsshop.errors import NotFound, ValidationFailed
from cmsshop.models import LEGAL_KINDS, LegalDocument, User
from cmsshop.services.audit.entries import record_change
from cmsshop.services.docs.markdown import render_markdown
from cmsshop.util import utcnow

# What each kind is called where no version gives it a title yet (the console's list).
KIND_NAMES = {
    "terms": "Terms of sale",
    "privacy": "Privacy policy",
    "imprint": "Legal notice",
    "refunds": "Refund policy",
}


@dataclass(frozen=True)
class LegalLink:
    """A published page as the footer and the sitemap link it."""

    kind: str
    title: str
    url: str


class TermsNotAccepted(Exception):
    """A checkout without the buyer's acceptance of the published terms of sale."""

    field = "acceptTerms"
    message = "accept the terms of sale (/legal/terms) to place the order"


def check_kind(kind: str) -> str:
    """``kind`` if it is one of LEGAL_KINDS; a 404 legal_page_not_found otherwise."""
    if kind not in LEGAL_KINDS:
        raise NotFound(
            f"There is no legal page called {kind[:40]!r}.",
            code="legal_page_not_found",
            hints=[f"The legal pages are: {', '.join(LEGAL_KINDS)}."],
        )
    return kind


def latest(session: Session, kind: str) -> LegalDocument | None:
    """The published (newest) version of ``kind``, or None when none was ever published."""
    return session.scalar(
        select(LegalDocument)
        .where(LegalDocument.kind == kind)
        .order_by(LegalDocument.version.desc())
        .limit(1)
    )


def published_page(session: Session, kind: str) -> LegalDocument:
    """The public page of ``kind``: a 404 when the kind is unknown or not published."""
    document = latest(session, check_kind(kind))
    if document is None:
        raise NotFound(
            "This page has not been published yet.",
            code="legal_page_not_found",
        )
    return document


def latest_by_kind(session: Session) -> dict[str, LegalDocument]:
    """Each published kind's newest version, in LEGAL_KINDS order (unpublished left out)."""
    newest = (
        select(LegalDocument.kind, func.max(LegalDocument.version).label("version"))
        .group_by(LegalDocument.kind)
        .subquery()
    )
    rows = session.scalars(
        select(LegalDocument).join(
            newest,
            (LegalDocument.kind == newest.c.kind) & (LegalDocument.version == newest.c.version),
        )
    ).all()
    found = {row.kind: row for row in rows}
    return {kind: found[kind] for kind in LEGAL_KINDS if kind in found}


def kept_published_links(session: Session) -> tuple[LegalLink, ...]:
    """:func:`published_links`, kept per content version (legal_documents bump it,
    migration 0028): the footer of every page shows them."""
    return kept_per_version(session, ("legal links",), lambda: tuple(published_links(session)))


def published_links(session: Session) -> list[LegalLink]:
    """The published pages, for the footer (Jinja global ``legal_links``) and the sitemap."""
    return [
        LegalLink(kind, document.title, f"/legal/{kind}")
        for kind, document in latest_by_kind(session).items()
    ]


def versions(session: Session, kind: str) -> list[LegalDocument]:
    """Every version of ``kind``, newest first."""
    return list(
        session.scalars(
            select(LegalDocument)
            .where(LegalDocument.kind == check_kind(kind))
            .order_by(LegalDocument.version.desc())
        )
    )


def find_version(session: Session, kind: str, version: int) -> LegalDocument:
    document = session.scalar(
        select(LegalDocument).where(
            LegalDocument.kind == check_kind(kind), LegalDocument.version == version
        )
    )
    if document is None:
        raise NotFound(f"The {kind} page has no version {version}.", code="legal_page_not_found")
    return document


def publish(
    session: Session,
    kind: str,
    *,
    title: str,
    body: str,
    actor: User | None = None,
    actor_name: str | None = None,
    ip: str | None = None,
    write_lock: bool = True,
) -> LegalDocument:
    """Publish ``body`` (Markdown) as the next version of ``kind``; recorded in the audit
    log. Two admins publishing at once: the unique (kind, version) settles it and the
    loser's request is retried (pyramid_retry), becoming the next version. The same
    title and text as the published version is refused (422): a version that changes
    nothing would only make orders' accepted versions harder to read.

    On SQLite the newest version is read as the writer (take_write_lock), not from a
    snapshot. That step commits what the transaction wrote before it, so a caller that
    has written already (the demo seed, in one transaction) passes ``write_lock=False``."""
    check_kind(kind)
    if write_lock:
        take_write_lock(session)
    current = latest(session, kind)
    if current is not None and (current.title, current.body) == (title, body):
        raise ValidationFailed(
            {"body": f"the same as version {current.version}: change something to publish"}
        )
    document = LegalDocument(
        kind=kind,
        version=(current.version if current is not None else 0) + 1,
        title=title,
        body=body,
        body_html=render_markdown(body),
        published_at=utcnow(),
        published_by=actor.id if actor is not None else None,
    )
    session.add(document)
    session.flush()
    record_change(
        session,
        action="legal.publish",
        object_type="legal_document",
        object_id=kind,
        actor=actor,
        actor_name=actor_name,
        summary={"kind": kind, "version": document.version, "title": title},
        ip=ip,
    )
    return document


def accepted_terms_version(session: Session, accepted: bool) -> int | None:
    """The terms version a checkout's buyer accepts: None when the shop publishes no
    terms (nothing to accept); TermsNotAccepted when terms exist and ``accepted`` is not
    true. Read before the order is written, so a refusal changes nothing."""
    version = session.scalar(
        select(func.max(LegalDocument.version)).where(LegalDocument.kind == "terms")
    )
    if version is None:
        return None
    if not accepted:
        raise TermsNotAccepted()
    return version
