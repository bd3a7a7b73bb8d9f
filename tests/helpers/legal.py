"""Legal pages for the tests: a published version written straight to the database,
as the console would publish it (services.legal.documents)."""

from __future__ import annotations

from cmsshop.services.legal import documents

TERMS_BODY = "## Scope\n\nThese terms apply to every order.\n\n## Refunds\n\nSee the refund policy."


def publish_legal(dbsession, kind: str = "terms", *, title="Terms of sale", body=TERMS_BODY):
    """Publish the next version of ``kind`` and commit; returns the LegalDocument."""
    document = documents.publish(dbsession, kind, title=title, body=body, actor_name="test")
    dbsession.commit()
    return document
