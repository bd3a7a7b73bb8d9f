"""Markdown to safe HTML: CommonMark (markdown-it-py), then an allow-list sanitiser (nh3).

Rendering never trusts its input: raw HTML in the source is escaped by the renderer
(``html=False``), and nh3 (Rust's ammonia) removes anything outside the allow-list
(scripts, event handlers, ``javascript:``/``data:`` URLs) from what remains.
"""

from __future__ import annotations

import re

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
# Table cells carry the column alignment as inline style; nothing else may pass, so a
# style attribute can never smuggle in url(...) or positioning tricks.
ALLOWED_STYLE_PROPERTIES = {"text-align"}
# A fenced block's info string becomes ``class="language-..."``; keep only plain language
# names so an author cannot borrow the site's own CSS classes.
CODE_CLASS = re.compile(r"^language-[A-Za-z0-9_+#.-]{1,40}\Z")


def _filter_attribute(element: str, attribute: str, value: str) -> str | None:
    if element == "code" and attribute == "class":
        return value if CODE_CLASS.match(value) else None
    return value


def render_markdown(source: str) -> str:
    """Sanitised HTML for a Markdown ``source``."""
    html = _md.render(source or "")
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=ALLOWED_SCHEMES,
        filter_style_properties=ALLOWED_STYLE_PROPERTIES,
        attribute_filter=_filter_attribute,
        link_rel="nofollow noopener noreferrer",
    )
