"""Arranging the docs: published and draft articles."""

from __future__ import annotations

import datetime as dt

from cmsshop.models import Article
from cmsshop.services.docs.markdown import render_markdown
from cmsshop.util import utcnow


def add_article(dbsession, slug, *, published=True, days_ago=0, **fields) -> Article:
    body = fields.pop("body", f"Body of *{slug}*")
    article = Article(
        slug=slug,
        title=fields.pop("title", slug.replace("-", " ").title()),
        summary=fields.pop("summary", ""),
        category=fields.pop("category", "guides"),
        body=body,
        body_html=render_markdown(body),
        published=published,
        published_at=utcnow() - dt.timedelta(days=days_ago) if published else None,
    )
    dbsession.add(article)
    dbsession.commit()
    return article
