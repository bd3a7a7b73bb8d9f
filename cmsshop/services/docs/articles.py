"""Documentation articles: the listing (catalogue.listing, the same as products') and
their content management. Bodies are Markdown, stored with their sanitised HTML."""

from __future__ import annotations

import dataclasses
import functools

from sqlalchemy import Select, bindparam, func, select
from sqlalchemy.orm import Session

from cmsshop.errors import NotFound
from cmsshop.hotsql import DIALECTS, HotStatement, raw_reads
from cmsshop.models import Article
from cmsshop.services.docs.markdown import render_markdown
from cmsshop.services.paging import Page, PageRequest
from cmsshop.services.store.listing import (
    HotListing,
    ListingStatements,
    fetch_hot_listing,
    fetch_listing,
    json_select_text,
    listing_statements,
    ordered_json_array,
    search_sql,
    utc_seconds_sql,
)
from cmsshop.services.store.text import ensure_slug_free, is_slug, like_pattern
from cmsshop.util import utcnow

# What an article's JSON shows; a row of these reads like an Article (row.slug, ...).
ARTICLE_COLUMNS = (
    Article.id,
    Article.slug,
    Article.title,
    Article.summary,
    Article.category,
    Article.body,
    Article.body_html,
    Article.published,
    Article.published_at,
    Article.created_at,
    Article.updated_at,
)


@functools.cache
def _article_statements(public: bool, search: bool, by_category: bool) -> ListingStatements:
    filters = [Article.category == bindparam("category")] if by_category else []
    if public:
        filters.append(Article.published.is_(True))
    order = (
        # published DESC: fixed by the filter, and the order of ix_articles_listing
        # walked backwards (PostgreSQL otherwise sorts every match of a search).
        (Article.published.desc(), Article.published_at.desc(), Article.id.desc())
        if public
        else (Article.title, Article.id)
    )
    return listing_statements(
        Article,
        ARTICLE_COLUMNS,
        order=order,
        filters=filters,
        search_in=(Article.title, Article.summary) if search else (),
    )


@functools.cache
def _find_article_statement(public: bool) -> Select:
    stmt = select(Article).where(Article.slug == bindparam("slug"))
    if public:
        stmt = stmt.where(Article.published.is_(True))
    return stmt


def list_articles(
    session: Session,
    request: PageRequest,
    *,
    q: str | None = None,
    category: str | None = None,
    public: bool = True,
) -> Page:
    """Published articles newest first (all articles by title for admins): a page of
    rows of ARTICLE_COLUMNS."""
    statements = _article_statements(public, bool(q), category is not None)
    return fetch_listing(session, statements, request, q=q, category=category)


def list_categories(session: Session, *, public: bool = True) -> list[tuple[str, int]]:
    """The categories in use, by name, with how many (published) articles each has.

    A category is no table of its own: it is the slug an article is filed under, so the
    list is whatever the articles use.
    """
    stmt = select(Article.category, func.count()).group_by(Article.category)
    if public:
        stmt = stmt.where(Article.published.is_(True))
    return [(name, count) for name, count in session.execute(stmt.order_by(Article.category))]


def find_article(session: Session, slug: str, *, public: bool) -> Article:
    article = None
    if is_slug(slug):
        article = session.scalar(_find_article_statement(public), {"slug": slug})
    if article is None:
        raise NotFound(f"There is no article {slug!r}.", code="article_not_found")
    return article


def _publish(article: Article, published: bool) -> None:
    article.published = published
    if published and article.published_at is None:
        # Kept when an article is unpublished and published again.
        article.published_at = utcnow()


def create_article(session: Session, data: dict) -> Article:
    ensure_slug_free(session, Article, data["slug"])
    article = Article(
        slug=data["slug"],
        title=data["title"],
        summary=data["summary"],
        category=data["category"],
        body=data["body"],
        body_html=render_markdown(data["body"]),
        published=False,
    )
    _publish(article, data["published"])
    session.add(article)
    session.flush()
    return article


def update_article(session: Session, article: Article, changes: dict) -> Article:
    slug = changes.get("slug")
    if slug is not None and slug != article.slug:
        ensure_slug_free(session, Article, slug, owner=article)
        article.slug = slug
    for key in ("title", "summary", "category"):
        if key in changes:
            setattr(article, key, changes[key])
    if "body" in changes:
        article.body = changes["body"]
        article.body_html = render_markdown(changes["body"])
    if "published" in changes:
        _publish(article, changes["published"])
    article.updated_at = utcnow()
    session.flush()
    return article


def delete_article(session: Session, article: Article) -> None:
    session.delete(article)
    session.flush()


# --- the public list on a pooled connection (see services.store.listing) ---------------


def _body_sql(dialect: str) -> str:
    """SQL of views.docs.api.article_body of the article ``a``, as JSON (a test compares
    the two, field for field, on both databases)."""
    build = "json_object({})" if dialect == "sqlite" else "json_build_object({})"
    return build.format(
        "'slug', a.slug, 'title', a.title, 'summary', a.summary, 'category', a.category, "
        "'body', a.body, 'bodyHtml', a.body_html, "
        f"'publishedAt', {utc_seconds_sql(dialect, 'a.published_at')}, "
        f"'updatedAt', {utc_seconds_sql(dialect, 'a.updated_at')}"
    )


# Newest first. published DESC (fixed by the filter): PostgreSQL then walks
# ix_articles_listing backwards and stops at the page's end instead of sorting every match.
_NEWEST_FIRST = "a.published DESC, a.published_at DESC, a.id DESC"
_PAGE_COLUMNS = (
    "a.id, a.slug, a.title, a.summary, a.category, a.body, a.body_html, a.published, "
    "a.published_at, a.updated_at"
)


def _hot_listing(searched: bool, by_category: bool) -> HotListing:
    """A page of public article bodies (one JSON array, as text) and its total."""
    where = {d: ["a.published = TRUE"] for d in DIALECTS}
    for dialect, parts in where.items():
        if by_category:
            parts.append("a.category = :category")
        if searched:
            parts.append(search_sql(dialect, "a.title", "a.summary"))
    clause = {d: " AND ".join(parts) for d, parts in where.items()}
    page = {
        d: f"SELECT {_PAGE_COLUMNS} FROM articles a WHERE {clause[d]} "  # noqa: S608 - constant SQL
        f"ORDER BY {_NEWEST_FIRST} LIMIT :limit OFFSET :offset"
        for d in DIALECTS
    }
    return HotListing(
        f"articles searched={searched} by_category={by_category}",
        {d: f"SELECT count(*) FROM articles a WHERE {clause[d]}" for d in DIALECTS},  # noqa: S608 - constant SQL
        {
            # The bodies are built for the page's rows only (the outer select).
            d: HotStatement(
                json_select_text(
                    d,
                    ordered_json_array(
                        d, _body_sql(d), _NEWEST_FIRST, f"FROM ({page[d]}) a", page=True
                    ),
                ),
                utf8=True,  # one JSON text, sent as it is
            )
            for d in DIALECTS
        },
        searched,
    )


_HOT_LISTINGS = {
    (searched, by_category): _hot_listing(searched, by_category)
    for searched in (False, True)
    for by_category in (False, True)
}


def public_article_bodies(
    engine, request: PageRequest, *, q: str | None = None, category: str | None = None
) -> tuple[Page, bytes]:
    """Published articles newest first, as :func:`list_articles` lists them, read without
    a session (one batch: the page with its total or the content version): the page
    (without items) and its items' API bodies, one JSON array the database wrote
    (views.docs.api.article_body's)."""
    params: dict = {}
    if q:
        params["pattern"] = like_pattern(q)
    if category is not None:
        params["category"] = category
    with raw_reads(engine) as conn:
        listing = _HOT_LISTINGS[bool(q), category is not None]
        page = fetch_hot_listing(conn, listing, request, params)
    text = page.items[0][0] if page.items else None
    return dataclasses.replace(page, items=[]), text or b"[]"
