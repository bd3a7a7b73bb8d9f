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
    "th": {"class"},
    "td": {"class"},
}
ALLOWED_SCHEMES = {"http", "https", "mailto"}
# No inline style at all: the pages' Content-Security-Policy (style-src 'self') would
# block it anyway. A table column's alignment becomes class="align-left|center|right"
# (site.css), and no other class may be set on a cell.
ALLOWED_STYLE_PROPERTIES: set[str] = set()
ALIGN_STYLE = re.compile(r"^text-align:(left|center|right)\Z")
CELL_CLASS = re.compile(r"^align-(left|center|right)\Z")
# A fenced block's info string becomes ``class="language-..."``; keep only plain language
# names so an author cannot borrow the site's own CSS classes.
CODE_CLASS = re.compile(r"^language-[A-Za-z0-9_+#.-]{1,40}\Z")


def _filter_attribute(element: str, attribute: str, value: str) -> str | None:
    if element == "code" and attribute == "class":
        return value if CODE_CLASS.match(value) else None
    if element in ("th", "td") and attribute == "class":
        return value if CELL_CLASS.match(value) else None
    return value


def _alignment_as_class(tokens) -> None:
    """markdown-it writes a column's alignment as ``style="text-align:x"``: make it a
    class instead (inline style is blocked by the CSP)."""
    for token in tokens:
        if token.type in ("th_open", "td_open") and token.attrs:
            style = token.attrs.pop("style", None)
            match = ALIGN_STYLE.match(str(style or ""))
            if match:
                token.attrSet("class", f"align-{match.group(1)}")


def _shift_headings(tokens, shift: int) -> None:
    """Move every heading ``shift`` levels down, at most to <h6>: text shown under a
    page's own <h1> (a product's description) must not open a second <h1>."""
    for token in tokens:
        if token.type in ("heading_open", "heading_close"):
            level = min(int(token.tag[1]) + shift, 6)
            token.tag = f"h{level}"


def render_markdown(source: str, *, heading_shift: int = 0) -> str:
    """Sanitised HTML for a Markdown ``source``; ``heading_shift`` levels added to its
    headings (1: ``#`` becomes <h2>), capped at <h6>."""
    tokens = _md.parse(source or "")
    _alignment_as_class(tokens)
    if heading_shift:
        _shift_headings(tokens, heading_shift)
    html = _md.renderer.render(tokens, _md.options, {})
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=ALLOWED_SCHEMES,
        filter_style_properties=ALLOWED_STYLE_PROPERTIES,
        attribute_filter=_filter_attribute,
        link_rel="nofollow noopener noreferrer",
    )
