"""Markdown rendering: CommonMark output, and nothing executable survives hostile input."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from cmsshop.services.docs.markdown import render_markdown

HOSTILE = [
    "<script>alert(1)</script>",
    "<SCRIPT SRC=//evil.example/x.js></SCRIPT>",
    '<img src=x onerror="alert(1)">',
    "<svg/onload=alert(1)>",
    '<a href="javascript:alert(1)">x</a>',
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click](java\tscript:alert(1))",
    "[click](&#106;avascript:alert(1))",
    "[click](javascript&colon;alert(1))",
    "[click](%6Aavascript:alert(1))",
    "[click](vbscript:msgbox(1))",
    "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "![img](javascript:alert(1))",
    "![img](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    "<javascript:alert(1)>",
    '[x](http://ok.example "title\\" onmouseover=\\"alert(1)")',
    '[x][ref]\n\n[ref]: javascript:alert(1) "t"',
    '<iframe src="https://evil.example"></iframe>',
    '<div style="background:url(javascript:alert(1))">x</div>',
    '<a href="https://ok.example" onclick="alert(1)">x</a>',
    '```"><script>alert(1)</script>\ncode\n```',
    "<!-- <script>alert(1)</script> -->",
    "<style>body{display:none}</style>",
    '<form action="https://evil.example"><input name=p></form>',
    "<object data=x></object><embed src=x>",
    '<meta http-equiv="refresh" content="0;url=https://evil.example">',
    "\x00<script>alert(1)</script>",
]

ALLOWED_TAGS = {
    "a", "blockquote", "br", "code", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "img",
    "li", "ol", "p", "pre", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul", "del",
}  # fmt: skip


class TagCollector(HTMLParser):
    """The real elements and attributes of rendered HTML (escaped text is not markup)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag


def executable_parts(html: str) -> list[str]:
    """Everything in ``html`` a browser could run: unknown tags, event handlers, styles
    other than text-align, and links to a scheme other than http(s)/mailto."""
    collector = TagCollector()
    collector.feed(html)
    collector.close()
    problems = []
    for tag, attrs in collector.elements:
        if tag not in ALLOWED_TAGS:
            problems.append(f"tag {tag}")
        for name, value in attrs.items():
            value = value or ""
            if name.startswith("on"):
                problems.append(f"handler {name}")
            if name == "style":
                problems.append(f"style {value}")
            cell_class = name == "class" and tag in ("td", "th")
            if cell_class and not re.fullmatch(r"align-(left|right|center)", value):
                problems.append(f"class {value}")
            if name in ("href", "src"):
                cleaned = re.sub(r"[\x00-\x20]", "", value).lower()
                # As a browser's URL parser: a scheme is a letter then [a-z0-9+.-] then ":";
                # anything else (e.g. "%6Aavascript:") is a relative URL.
                scheme = re.match(r"([a-z][a-z0-9+.-]*):", cleaned)
                if scheme and scheme.group(1) not in ("http", "https", "mailto"):
                    problems.append(f"{name} {value}")
    return problems


@pytest.mark.parametrize("source", HOSTILE)
def test_hostile_markdown_renders_nothing_executable(source):
    html = render_markdown(source)
    assert executable_parts(html) == [], html


def test_raw_html_is_shown_as_text():
    assert render_markdown("<b>bold</b>") == "<p>&lt;b&gt;bold&lt;/b&gt;</p>\n"


def test_commonmark_basics():
    html = render_markdown("# Title\n\n*em* **strong** `code`\n\n- a\n- b\n\n> quote")
    assert "<h1>Title</h1>" in html
    assert "<em>em</em>" in html and "<strong>strong</strong>" in html
    assert "<code>code</code>" in html
    assert "<ul>" in html and "<li>a</li>" in html
    assert "<blockquote>" in html


def test_links_are_kept_with_safe_rel():
    html = render_markdown("[docs](https://example.com/docs) [mail](mailto:a@example.com)")
    assert '<a href="https://example.com/docs" rel="nofollow noopener noreferrer">' in html
    assert 'href="mailto:a@example.com"' in html


def test_table_alignment_is_a_class_never_inline_style():
    """The pages' CSP blocks inline style: column alignment is an align-* class."""
    html = render_markdown("| a | b | c |\n|:-|-:|:-:|\n| 1 | 2 | 3 |")
    assert '<th class="align-left">a</th>' in html
    assert '<td class="align-right">2</td>' in html
    assert '<td class="align-center">3</td>' in html
    assert "style" not in html


def test_code_block_language_class_is_kept_only_when_plain():
    assert '<code class="language-python">' in render_markdown("```python\nx = 1\n```")
    html = render_markdown('```x" class="admin-banner\nx\n```')
    assert "class=" not in html


def test_empty_and_none():
    assert render_markdown("") == ""
    assert render_markdown(None) == ""


def test_pathological_input_finishes_and_stays_safe():
    # Deep nesting, many unclosed brackets and emphasis runs: bounded by the renderer.
    sources = [
        ">" * 2000 + " deep",
        "[" * 3000 + "x",
        "*" * 3000 + "x",
        "- " * 2000 + "x",
        ("<script>" * 1000) + "x",
        "[a](" + "(" * 1000 + "javascript:alert(1)" + ")" * 1000 + ")",
    ]
    for source in sources:
        assert executable_parts(render_markdown(source)) == []


def test_the_checker_itself_catches_executable_markup():
    assert executable_parts('<a href=" JavaScript:alert(1)">x</a>')
    assert executable_parts('<img src="x" onerror="alert(1)">')
    assert executable_parts("<script>alert(1)</script>")
    assert executable_parts('<td style="background:url(x)">')
    assert executable_parts('<a href="https://ok.example">x</a>') == []
    assert executable_parts('<a href="%6Aavascript:x">relative</a>') == []
