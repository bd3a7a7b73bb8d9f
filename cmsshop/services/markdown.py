"""Markdown to safe HTML: CommonMark (markdown-it-py), then an allow-list sanitiser (nh3).

Rendering never trusts its input: raw HTML in the source is escaped by the renderer
(``html=False``), and nh3 (Rust's ammonia) removes anything outside the allow-list
(scripts, event handlers, ``javascript:``/``data:`` URLs) from what remains.
"""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt

_md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")

ALLOWED_TAGS = {
    "a",
    "blockquote",
    "br",
    "code",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "img",
    "li",
    "ol",
    "p",
    "pre",
    "strong",
    "table",
    "tbody",
    "td",
    "th",
    "thead",
    "tr",
    "ul",
    "del",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title"},
    "code": {"class"},
    "th": {"style"},
    "td": {"style"},
}
ALLOWED_SCHEMES = {"http", "https", "mailto"}


def render_markdown(source: str) -> str:
    """Sanitised HTML for a Markdown ``source``."""
    html = _md.render(source or "")
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=ALLOWED_SCHEMES,
        link_rel="nofollow noopener noreferrer",
    )
