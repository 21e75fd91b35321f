"""HTML: main text and headings with selectolax; navigation, scripts and page chrome removed.

The page text is built block by block (a heading or paragraph per line, a table row per line with
its cells joined by ` | `), recording each heading's and row's offset as it is written.
"""

from __future__ import annotations

from selectolax.lexbor import LexborHTMLParser, LexborNode

from sleuth.compile.pages import Page, ParsedSource, TextBuilder
from sleuth.compile.parse.text import decode

_DROP = "script, style, noscript, template, nav, footer, header, aside, form, svg, iframe"
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_BLOCKS = {
    "p",
    "div",
    "section",
    "article",
    "main",
    "li",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "blockquote",
    "pre",
    "figure",
    "figcaption",
    "body",
    "html",
    "table",
    "tr",
    "br",
    "hr",
    "details",
    "summary",
    "address",
    "caption",
}


def parse(data: bytes) -> ParsedSource:
    tree = LexborHTMLParser(decode(data))
    title_node = tree.css_first("title")
    title = " ".join(title_node.text().split()) if title_node else None
    for node in tree.css(_DROP):
        node.decompose()
    out = TextBuilder()
    root = tree.css_first("main") or tree.css_first("article") or tree.body
    if root is not None:
        _walk(root, out)
    return ParsedSource("html", [Page(1, out.text(), out.headings, out.tables)], title=title or None)


def _walk(node: LexborNode, out: TextBuilder) -> None:
    inline: list[str] = []

    def flush() -> None:
        text = " ".join("".join(inline).split())
        if text:
            out.paragraph(text)
        inline.clear()

    for child in node.iter(include_text=True):
        tag = child.tag
        if tag == "-text":
            inline.append(child.text_content or "")
        elif tag in _HEADINGS:
            flush()
            out.heading(_HEADINGS[tag], child.text(deep=True, separator=" "))
        elif tag == "table":
            flush()
            out.table(_table_rows(child))
        elif tag in _BLOCKS or _has_block(child):
            flush()
            _walk(child, out)
            if tag in {"p", "ul", "ol", "dl", "pre", "blockquote"}:
                out.blank()
        else:
            inline.append(child.text(deep=True, separator=""))
    flush()


def _has_block(node: LexborNode) -> bool:
    return any(c.tag in _BLOCKS or c.tag in _HEADINGS for c in node.iter(include_text=False))


def _table_rows(table: LexborNode) -> list[list[str]]:
    rows: list[list[str]] = []
    for tr in table.css("tr"):
        cells = [cell.text(deep=True, separator=" ") for cell in tr.iter() if cell.tag in {"td", "th"}]
        if cells:
            rows.append(cells)
    return rows
