"""Glossary artifacts: term/definition entries read verbatim from the headings a type lists
(spec/context.md §4, `glossary`). Recognized forms: `Term: definition`, `**Term** – definition`,
`"Term" means …`, two-column tables and definition lists (`Term` then `: definition`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sleuth.compile.artifacts import Artifact
from sleuth.compile.manifest import ArtifactType
from sleuth.compile.pages import Page
from sleuth.format.spans import Provenance

_NUMBERING = re.compile(r"^\s*(?:(?:section|§)\s*)?[\dIVXivx]+(?:\.\d+)*[.)]?\s+", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")
_BOLD = re.compile(r"^(?:\*\*|__)(?P<term>[^*_]{1,80}?)(?:\*\*|__)\s*(?:[:\u2013\u2014-]\s*)?(?P<def>\S.*)$")
_MEANS = re.compile(
    r"^[\"\u201c](?P<term>[^\"\u201d]{1,80})[\"\u201d]\s+(?P<def>(?:means|refers to|shall mean)\b.*)$",
    re.IGNORECASE,
)
_COLON = re.compile(r"^(?P<term>[A-Za-z0-9][^:.!?]{0,60}?)\s*:\s+(?P<def>\S.*)$")
_DL_DEF = re.compile(r"^:\s+(?P<def>\S.*)$")


@dataclass(frozen=True)
class Entry:
    term: str
    definition: str
    span: Provenance


def normalize_heading(text: str) -> str:
    text = text.strip().lstrip("#").strip()
    return " ".join(_NUMBERING.sub("", text).casefold().split())


def section_ranges(page: Page, wanted: set[str]) -> list[tuple[int, int]]:
    """Spans of the page under a heading whose normalized text is wanted, up to the next heading
    of the same or a higher level."""
    ranges: list[tuple[int, int]] = []
    headings = sorted(page.headings, key=lambda h: h.start)
    for i, h in enumerate(headings):
        if normalize_heading(h.text) not in wanted:
            continue
        end = len(page.text)
        for later in headings[i + 1 :]:
            if later.level <= h.level:
                end = later.start
                break
        body_start = page.text.find("\n", h.start)
        if body_start != -1 and body_start < end:
            ranges.append((body_start + 1, end))
    return ranges


def read_entries(source: str, page: Page, start: int, end: int) -> list[Entry]:
    entries: list[Entry] = []
    table_rows = {
        row.start: row for table in page.tables for row in table.rows[1:] if start <= row.start < end
    }
    header_rows = {table.rows[0].start for table in page.tables}
    previous: tuple[str, int, int] | None = None  # a candidate definition-list term
    offset = start
    for line in page.text[start:end].split("\n"):
        line_start, line_end = offset, offset + len(line)
        offset = line_end + 1
        stripped = line.strip()
        if not stripped:
            previous = None
            continue
        lead = line_start + (len(line) - len(line.lstrip()))
        row = table_rows.get(line_start)
        if row is not None:
            if len(row.cells) == 2 and row.cells[0] and row.cells[1]:
                entries.append(_entry(source, page, row.cells[0], row.cells[1], row.start, row.end))
            previous = None
            continue
        if line_start in header_rows or set(stripped) <= set("|-: "):
            previous = None
            continue
        dl = _DL_DEF.match(stripped)
        if dl and previous is not None:
            term, t_start, _ = previous
            entries.append(_entry(source, page, term, dl.group("def"), t_start, line_end))
            previous = None
            continue
        text = _BULLET.sub("", stripped)
        match = _BOLD.match(text) or _MEANS.match(text) or _COLON.match(text)
        if match:
            definition = match.group("def")
            if match.re is _MEANS:
                definition = text  # keep "X means …" whole: the definition reads as written
            entries.append(_entry(source, page, match.group("term"), definition, lead, line_end))
            previous = None
        else:
            previous = (text.strip("*_ "), lead, line_end) if len(text) <= 80 else None
    return entries


def _entry(source: str, page: Page, term: str, definition: str, start: int, end: int) -> Entry:
    return Entry(
        term=" ".join(term.strip().strip('*_"\u201c\u201d').split()),
        definition=definition.strip(),
        span=Provenance.of(source, page.page, page.text, start, end),
    )


def build_glossary(
    art_type: ArtifactType, pages_by_source: dict[str, list[Page]]
) -> tuple[Artifact | None, list[Entry]]:
    wanted = {normalize_heading(s) for s in art_type.sections}
    entries: list[Entry] = []
    for source in sorted(pages_by_source):
        for page in pages_by_source[source]:
            for a, b in section_ranges(page, wanted):
                entries.extend(read_entries(source, page, a, b))
    if not entries:
        return None, []
    entries.sort(key=lambda e: (e.term.casefold(), e.span.source_path, e.span.page, e.span.start))
    lines = [f"# {art_type.name}", ""]
    for e in entries:
        lines.append(f"- **{e.term}**: {e.definition} ({e.span.source_path}, p. {e.span.page})")
    sources = sorted({e.span.source_path for e in entries})
    artifact = Artifact(
        name=art_type.name,
        type=art_type.name,
        kind="glossary",
        scope="corpus",
        body="\n".join(lines) + "\n",
        sources=sources,
        provenance=[e.span for e in entries],
        fields={"terms": len({e.term.casefold() for e in entries})},
        group_key=art_type.name.casefold(),
        mentions=len(entries),
    )
    return artifact, entries
