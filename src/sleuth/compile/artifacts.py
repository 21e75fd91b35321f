"""Artifacts: the typed, curated units of a context (spec/context.md §4, §7.3).

This module holds the artifact record and its Markdown file format, and the two per-source
builders that need no model: `doc` (one card per source) and `page` (one card per page). Every
card's provenance is an exact slice of a stored page, so it can be cited like a chunk.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from sleuth.compile.chunking import section_paths
from sleuth.compile.manifest import ArtifactType
from sleuth.compile.pages import Page
from sleuth.format.identity import period_dates, period_label
from sleuth.format.names import slugify
from sleuth.format.spans import Provenance

LEAD_CHARS = 1200
PAGE_CARD_CHARS = 800
MAX_OUTLINE = 50
_SENTENCE_END = re.compile(r"[.!?][\"')\]]?(?=\s)")
_JUNK_TITLES = re.compile(r"^(untitled|microsoft word\b.*|document\d*|[\d\s\-_./]*)$", re.IGNORECASE)


@dataclass(frozen=True)
class EdgeRef:
    type: str
    to: str
    to_type: str
    to_id: str
    evidence: Provenance | None
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass
class Artifact:
    name: str
    type: str
    kind: str
    scope: str  # document | corpus
    body: str
    sources: list[str]
    provenance: list[Provenance] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)
    edges: list[EdgeRef] = field(default_factory=list)
    group_key: str | None = None
    mentions: int = 0
    format: str = "markdown"
    model: str = "deterministic"
    id: str = ""
    slug: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            if self.kind == "page":
                basis = f"{self.sources[0]}#p{self.fields['page']}"
            elif self.scope == "document":
                basis = self.sources[0]
            else:
                basis = self.group_key or self.name
            self.id = artifact_id(self.type, basis)

    def search_text(self) -> str:
        return f"{self.name}\n{self.body}"

    def content_sha(self) -> str:
        return hashlib.sha256(self.body.encode("utf-8")).hexdigest()

    def to_markdown(self, created_version: str, updated_version: str) -> str:
        front: dict[str, Any] = {
            "sleuth_artifact": 1,
            "id": self.id,
            "name": self.name,
            "type": self.type,
            "kind": self.kind,
            "scope": self.scope,
            "format": self.format,
            "sources": self.sources,
            "provenance": [p.to_json() for p in self.provenance],
            "edges": [
                {
                    "type": e.type,
                    "to": e.to,
                    "to_type": e.to_type,
                    "attributes": e.attributes,
                    "evidence": None
                    if e.evidence is None
                    else {
                        "source": e.evidence.source_path,
                        "page": e.evidence.page,
                        "start": e.evidence.start,
                        "end": e.evidence.end,
                    },
                }
                for e in self.edges
            ],
            "fields": self.fields,
            "group_key": self.group_key,
            "mentions": self.mentions,
            "model": self.model,
            "created_version": created_version,
            "updated_version": updated_version,
            "content_sha256": self.content_sha(),
        }
        header = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=100)
        return f"---\n{header}---\n{self.body}\n"


def artifact_id(type_name: str, basis: str) -> str:
    payload = f"{type_name}\x1f{basis}".encode()
    return "art_" + hashlib.sha256(payload).hexdigest()[:16]


def assign_slugs(artifacts: list[Artifact]) -> None:
    """Slugs unique within a type: a collision appends `-` and 6 hex digits of the id (§7.3)."""
    seen: set[str] = set()
    for art in sorted(artifacts, key=lambda a: a.id):
        slug = slugify(art.name)
        if slug in seen:
            slug = f"{slug[:73]}-{art.id[4:10]}"
        seen.add(slug)
        art.slug = slug


#: Headings that say where in a document one is, not what the document is: "PART I", "Item 1.
#: Business", "Table of Contents", "Part I — Financial Information 3", or a line that opens with a
#: number (an address, "83 Tower Road North"; a footnote, "2 Excludes the impact …").
_STRUCTURAL = re.compile(
    r"^(?:(?:part|item|chapter|section|article|appendix|annex|schedule|exhibit|note|page)\b"
    r"|(?:table of )?contents\b|index\b|\d)",
    re.IGNORECASE,
)
TITLE_PAGES = 2  # a document says what it is on its first pages; a heading further in is a section's


def document_title(source_path: str, metadata_title: str | None, pages: list[Page]) -> str:
    """Document metadata, else the first heading of its first pages that names the document rather
    than a part of it, else the file name (§4, `doc`)."""
    if metadata_title and not _JUNK_TITLES.match(metadata_title):
        return " ".join(metadata_title.split())
    for page in pages[:TITLE_PAGES]:
        for heading in page.headings:
            if not _STRUCTURAL.match(heading.text.strip()):
                return heading.text
    name = source_path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[0] if "." in name else name


def lead_span(pages: list[Page], limit: int = LEAD_CHARS) -> Provenance | None:
    """The first ≤ `limit` chars of body text (headings skipped), cut at a sentence end."""
    for page in pages:
        heading_starts = {h.start for h in page.headings}
        offset = 0
        for line in page.text.split("\n"):
            if line.strip() and offset not in heading_starts:
                start = offset + (len(line) - len(line.lstrip()))
                end = _cut(page.text, start, min(len(page.text), start + limit))
                return Provenance.of("", page.page, page.text, start, end)
            offset += len(line) + 1
    return None


def _cut(text: str, start: int, limit: int) -> int:
    if limit >= len(text):
        return len(text.rstrip())
    window = text[start:limit]
    ends = [m.end() for m in _SENTENCE_END.finditer(window)]
    if ends:
        return start + ends[-1]
    space = window.rfind(" ")
    return start + (space if space > 0 else len(window))


def outline_entries(pages: list[Page]) -> list[tuple[int, int, str]]:
    """(level, page, text) of every heading, in order."""
    return [(h.level, p.page, h.text) for p in pages for h in p.headings]


def build_doc(
    art_type: ArtifactType,
    source_path: str,
    fmt: str,
    title: str,
    pages: list[Page],
    identity: dict[str, Any] | None = None,
) -> Artifact:
    """The `doc` card of one source; `identity` (issuer, doc_type, period, year) says what it is."""
    outline = outline_entries(pages)
    lead = lead_span(pages)
    known = {k: v for k, v in (identity or {}).items() if v is not None}
    lines = [f"# {title}", "", f"- Source: `{source_path}`", f"- Format: {fmt}", f"- Pages: {len(pages)}"]
    labels = {"issuer": "Issuer", "doc_type": "Type"}
    lines += [f"- {label}: {known[key]}" for key, label in labels.items() if key in known]
    period = period_label(known)  # the fiscal label, the calendar one beside it
    if period:
        lines.append(f"- Period: {period}")
    if "period_start" in known and "period_end" in known:
        lines.append(f"- Covers: {period_dates(known)}")
    lines.append("")
    if lead is not None:
        lines += ["## Summary", "", lead.quote.strip(), ""]
    if outline:
        lines += ["## Outline", ""]
        min_level = min(level for level, _, _ in outline)
        for level, page_no, text in outline[:MAX_OUTLINE]:
            lines.append(f"{'  ' * (level - min_level)}- {text} (p. {page_no})")
        if len(outline) > MAX_OUTLINE:
            lines.append(f"- … and {len(outline) - MAX_OUTLINE} more headings")
    provenance = [] if lead is None else [dataclasses.replace(lead, source_path=source_path)]
    return Artifact(
        name=title,
        type=art_type.name,
        kind="doc",
        scope="document",
        body="\n".join(lines).rstrip() + "\n",
        sources=[source_path],
        provenance=provenance,
        fields={
            "title": title,
            "pages": len(pages),
            "format": fmt,
            **known,
            "headings": [f"{text} (p. {page_no})" for _, page_no, text in outline[:MAX_OUTLINE]],
        },
    )


def build_pages(art_type: ArtifactType, source_path: str, title: str, pages: list[Page]) -> list[Artifact]:
    paths_by_page: dict[int, list[list[str]]] = {}
    for page, _a, _b, path in section_paths(pages):
        if path and path not in paths_by_page.setdefault(page.page, []):
            paths_by_page[page.page].append(path)
    cards: list[Artifact] = []
    for page in pages:
        if not page.text.strip():
            continue
        name = f"{title} — p. {page.page}"
        start = len(page.text) - len(page.text.lstrip())
        end = _cut(page.text, start, min(len(page.text), start + PAGE_CARD_CHARS))
        quote = page.text[start:end]
        sections = [" > ".join(p) for p in paths_by_page.get(page.page, [])]
        lines = [f"# {name}", ""]
        if sections:
            lines += ["Sections: " + "; ".join(sections), ""]
        lines.append(quote.strip())
        cards.append(
            Artifact(
                name=name,
                type=art_type.name,
                kind="page",
                scope="document",
                body="\n".join(lines) + "\n",
                sources=[source_path],
                provenance=[Provenance.of(source_path, page.page, page.text, start, end)],
                fields={"page": page.page, "title": title},
            )
        )
    return cards
