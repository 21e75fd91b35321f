"""What the SDK returns (spec/runtime.md §5.3): small frozen records with compact, stable reprs that
always show the evidence label, because the model only sees what its code prints.

Reads are plain calls whose results may also be awaited (models mix the two up), so every record
here, and the list and dict subclasses below, return themselves from `__await__`.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from sleuth.format.spans import PageSpan

if TYPE_CHECKING:
    from sleuth.sdk.matches import Match

T = TypeVar("T")
#: The most of a snippet a hit's repr quotes (a snippet is `sdk.matches.SNIPPET_CHARS` at most).
SNIPPET_SHOWN = 300


def _short(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class SelfAwaitable:
    """`await x` gives back `x`: a read's result works whether or not the model awaits it."""

    def __await__(self: T) -> Generator[Any, None, T]:
        return self
        yield  # pragma: no cover - makes this a generator


class AwaitableList(list[T], SelfAwaitable):
    pass


class AwaitableDict(dict[str, Any], SelfAwaitable):
    pass


@dataclass(frozen=True, kw_only=True)
class Span(PageSpan, SelfAwaitable):
    """A verbatim piece of one page."""

    ref: str
    context: str
    text: str
    section_path: list[str]
    via: str  # "chunk" | "artifact" | "table"
    artifact_name: str | None = None

    def __repr__(self) -> str:
        return f"Span({self.ref} {self.where} {_short(self.text)!r})"


@dataclass(frozen=True)
class Hit(SelfAwaitable):
    """One search hit. A chunk's `chunk_text` is the chunk as a reader reads it (issue 43, item 3):
    without the page's running headers, footers and page number, its wrapped lines joined
    (`format.reading`); its span (`span.text`, `start`, `end`) stays the page's verbatim text, which
    is what a citation points at. `match` is where the search matched in `chunk_text` (offsets) and
    `snippet` a short slice of `chunk_text` around it (`sdk.matches`)."""

    id: str
    score: float
    kind: str  # "chunk" | "artifact" | "provenance"
    name: str
    context: str
    fields: dict[str, Any] = field(default_factory=dict)
    # chunk and provenance hits
    source_path: str | None = None
    page: int | None = None
    chunk_text: str | None = None
    start: int | None = None
    end: int | None = None
    section_path: list[str] = field(default_factory=list)
    artifact: str | None = None
    #: A chunk of a table's rows below its header: the table's caption, column headers and unit.
    table_header: str | None = None
    # artifact hits
    type: str | None = None
    artifact_kind: str | None = None
    scope: str | None = None
    sources: list[str] = field(default_factory=list)
    #: A chunk hit: a slice of `chunk_text` around the match; an artifact hit: its body's start.
    snippet: str | None = None
    #: A chunk hit found by a search: `chunk_text[match[0]:match[1]]` is what matched (None: the
    #: hit holds none of the query's words, or it was read, not searched).
    match: tuple[int, int] | None = None
    #: A hybrid chunk hit: the features of its page that moved its rank most (weight × standardised
    #: value, `store.version.ranker`); empty when no learned ranker ranked it.
    why: dict[str, float] = field(default_factory=dict, repr=False)
    span_: Span | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        """`fields` carries the documented keys too (spec/runtime.md §5.3), so `h.fields["chunk_text"]`,
        the form every example shows, works as well as `h.chunk_text`."""
        if self.kind == "artifact":
            documented: dict[str, Any] = {
                "type": self.type,
                "artifact_kind": self.artifact_kind,
                "scope": self.scope,
                "sources": list(self.sources),
                "snippet": self.snippet,
                "context": self.context,
            }
        else:
            documented = {
                "source_path": self.source_path,
                "page": self.page,
                "chunk_text": self.chunk_text,
                "start": self.start,
                "end": self.end,
                "section_path": list(self.section_path),
                "context": self.context,
                "snippet": self.snippet,
                "match": self.match,
            }
            if self.kind == "provenance" or self.artifact:
                documented["artifact"] = self.artifact
            if self.table_header is not None:
                documented["table_header"] = self.table_header
        object.__setattr__(self, "fields", {**self.fields, **documented})

    @classmethod
    def from_span(
        cls,
        hit_id: str,
        score: float,
        kind: str,
        span: Span,
        table_header: str | None = None,
        *,
        text: str | None = None,
        found: Match | None = None,
        why: dict[str, float] | None = None,
    ) -> Hit:
        """A chunk or provenance hit: everything a citation needs comes from its span; `text` is the
        span as a reader reads it (default: the span's own text) and `found` where the search matched
        in it."""
        shown = span.text if text is None else text
        at = None if found is None or found.start is None or found.end is None else (found.start, found.end)
        return cls(
            id=hit_id,
            score=score,
            kind=kind,
            name=span.source_path,
            context=span.context,
            source_path=span.source_path,
            page=span.page,
            chunk_text=shown,
            snippet=None if found is None else shown[found.snippet_start : found.snippet_end],
            match=at,
            start=span.start,
            end=span.end,
            section_path=span.section_path,
            artifact=span.artifact_name,
            why=why or {},
            table_header=table_header,
            span_=span,
        )

    @property
    def span(self) -> Span | None:
        return self.span_

    @property
    def ref(self) -> str | None:
        return self.span_.ref if self.span_ is not None else None

    def __repr__(self) -> str:
        if self.kind == "artifact":
            return (
                f"Hit(artifact {self.type} {self.name!r} score={self.score:.2f} "
                f"sources={len(self.sources)} {_short(self.snippet or '')!r})"
            )
        section = f" §{' > '.join(self.section_path)}" if self.section_path else ""
        columns = f" columns=[{self.table_header}]" if self.table_header else ""
        return (
            f"Hit({self.ref} {self.kind} {self.source_path} p.{self.page}{section} "
            f"score={self.score:.2f}{columns} {self._shown()!r})"
        )

    def _shown(self) -> str:
        """What the repr quotes: the snippet, marked `…` where the text goes on; else the text's start."""
        text = self.chunk_text or ""
        if self.snippet is None:
            return _short(text)
        before = "" if text.startswith(self.snippet) else "…"
        after = "" if text.endswith(self.snippet) else "…"
        return before + _short(self.snippet, SNIPPET_SHOWN) + after


@dataclass(frozen=True)
class Passage(SelfAwaitable):
    """Consecutive chunks of one document read together (`read_around`, `read_page`, `read_section`):
    `text` shows each chunk after its evidence label, so what the model prints is citable as it reads."""

    context: str
    source_path: str
    pages: list[int]
    section_path: list[str]
    hits: list[Hit]  # the chunks, in reading order, each a citable hit with its own label
    text: str  # "[E3] first chunk\n[E4] next chunk…"
    truncated: bool  # cut at `max_chars`: more follows in the document

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, index: int) -> Hit:
        return self.hits[index]

    def __repr__(self) -> str:
        if not self.hits:
            return f"Passage({self.source_path}: no chunks)"
        first, last = self.pages[0], self.pages[-1]
        pages = f"p.{first}" if first == last else f"p.{first}-{last}"
        section = f" §{' > '.join(self.section_path)}" if self.section_path else ""
        more = "\n[cut at max_chars: more follows]" if self.truncated else ""
        return f"Passage({self.source_path} {pages}{section}, {len(self.hits)} chunks)\n{self.text}{more}"


@dataclass(frozen=True)
class ArtifactRef(SelfAwaitable):
    name: str
    type: str
    kind: str
    scope: str
    context: str
    sources_count: int


@dataclass(frozen=True)
class Edge(SelfAwaitable):
    type: str
    from_name: str
    to_name: str
    direction: str  # "out" | "in", seen from the artifact read
    attributes: dict[str, Any]
    evidence: Span | None


@dataclass(frozen=True)
class Artifact(SelfAwaitable):
    id: str
    name: str
    type: str
    kind: str
    scope: str
    context: str
    body: str
    fields: dict[str, Any]
    edges: list[Edge]
    sources: list[str]
    provenance: list[Span]

    def __repr__(self) -> str:
        refs = ", ".join(s.ref for s in self.provenance[:8])
        more = f" +{len(self.provenance) - 8}" if len(self.provenance) > 8 else ""
        body = self.body if len(self.body) <= 500 else self.body[:500] + "…"
        return (
            f"Artifact({self.type} {self.name!r} kind={self.kind} scope={self.scope} "
            f"sources={len(self.sources)} edges={len(self.edges)} provenance=[{refs}{more}])\n{body}"
        )


@dataclass(frozen=True)
class RosterEntry(SelfAwaitable):
    name: str
    summary: str
    sources: list[str]


@dataclass(frozen=True)
class Roster(SelfAwaitable):
    name: str
    type: str | None
    count: int
    entries: list[RosterEntry]
    body: str
    context: str

    def __repr__(self) -> str:
        return f"Roster({self.name!r} count={self.count} context={self.context})"


@dataclass(frozen=True)
class Column(SelfAwaitable):
    name: str
    type: str
    description: str


@dataclass(frozen=True)
class TypeSpec(SelfAwaitable):
    name: str
    kind: str
    scope: str
    format: str
    description: str
    coverage: list[str]
    sections: list[str]
    columns: list[Column]
    natural_key: list[str]
    edge_types: list[dict[str, Any]]
    count: int
    table: str | None
    context: str


@dataclass(frozen=True)
class Table(SelfAwaitable):
    name: str
    type: str | None
    columns: list[Column]
    row_count: int
    natural_key: list[str]
    context: str


class Rows(AwaitableList[dict[str, Any]]):
    """Rows of one statement, with the columns, whether the row cap cut them, and timing."""

    def __init__(
        self, rows: list[dict[str, Any]], columns: list[str], truncated: bool, sql: str, elapsed_ms: float
    ) -> None:
        super().__init__(rows)
        self.columns = columns
        self.truncated = truncated
        self.sql = sql
        self.elapsed_ms = elapsed_ms

    def __repr__(self) -> str:
        note = f"\n[truncated at {len(self)} rows]" if self.truncated else ""
        return f"Rows({len(self)} rows, columns={self.columns}){list.__repr__(self)}{note}"


@dataclass(frozen=True)
class Graph(SelfAwaitable):
    start: ArtifactRef
    nodes: list[ArtifactRef]
    edges: list[Edge]
    truncated: bool


#: The most of a sentence a comparison's repr quotes (the record keeps it whole).
SENTENCE_SHOWN = 500


@dataclass(frozen=True)
class Sentence(SelfAwaitable):
    """One sentence of a compared section (`compare_sections`) as a reader reads it, with the
    verbatim page span it stands on: one span, or one per page where it runs over a page break."""

    text: str
    source_path: str
    evidence: list[Span]

    @property
    def pages(self) -> list[int]:
        return list(dict.fromkeys(s.page for s in self.evidence))

    @property
    def refs(self) -> list[str]:
        return [s.ref for s in self.evidence]

    @property
    def tag(self) -> str:
        """`E7 p.4`, or `E7+E8 p.4-5` for a sentence over a page break: what its repr shows."""
        pages = self.pages
        where = f"p.{pages[0]}" if len(pages) == 1 else f"p.{pages[0]}-{pages[-1]}"
        return f"{'+'.join(self.refs)} {where}"

    def __repr__(self) -> str:
        return f"[{self.tag}] {_short(self.text, SENTENCE_SHOWN)}"


@dataclass(frozen=True)
class Change(SelfAwaitable):
    """A sentence of the base document changed in the other: `similarity` is the share of their
    words in common (0-1), `edits` each `(old words, new words)` where they differ."""

    old: Sentence
    new: Sentence
    similarity: float
    edits: list[tuple[str, str]]

    @property
    def evidence(self) -> list[Span]:
        """Both sides' spans, old first: cite the old and the new wording together."""
        return [*self.old.evidence, *self.new.evidence]

    def __repr__(self) -> str:
        shown = "; ".join(f"{old or '∅'!s} → {new or '∅'!s}" for old, new in self.edits[:5])
        more = f"; +{len(self.edits) - 5} edits" if len(self.edits) > 5 else ""
        return (
            f"~ {self.similarity:.2f} [{self.old.tag} → {self.new.tag}] {_short(shown + more, 200)}\n"
            f"    - {_short(self.old.text, SENTENCE_SHOWN)}\n    + {_short(self.new.text, SENTENCE_SHOWN)}"
        )


@dataclass(frozen=True)
class Compared(SelfAwaitable):
    """What a comparison read of one document: its section (the heading path found; [] for a page
    range alone), its pages, how many sentences it compared and whether `max_sentences` cut it."""

    context: str
    source_path: str
    section_path: list[str]
    pages: list[int]
    sentences: int
    truncated: bool

    def __repr__(self) -> str:
        pages = "no text" if not self.pages else f"p.{self.pages[0]}-{self.pages[-1]}"
        section = f" §{' > '.join(self.section_path)}" if self.section_path else ""
        cut = " (cut at max_sentences)" if self.truncated else ""
        return f"{self.source_path} {pages}{section}: {self.sentences} sentences{cut}"


@dataclass(frozen=True)
class SectionDiff(SelfAwaitable):
    """The base document's section against one other's: the sentences only the other has
    (`added`), only the base has (`removed`), and those reworded (`changed`); `unchanged` and
    `moved` (the same sentence elsewhere in the section) are counted, not listed, and so are
    differences past what one call lists (`unlisted`)."""

    base: Compared
    other: Compared
    added: list[Sentence]
    removed: list[Sentence]
    changed: list[Change]
    unchanged: int
    moved: int
    unlisted: int = 0

    @property
    def evidence(self) -> list[Span]:
        """Every span of what differs: the added, the removed, then both sides of each change."""
        spans = [s for item in [*self.added, *self.removed] for s in item.evidence]
        return spans + [s for change in self.changed for s in change.evidence]

    def __repr__(self) -> str:
        counts = (
            f"{len(self.added)} added, {len(self.removed)} removed, {len(self.changed)} changed, "
            f"{self.unchanged} unchanged" + (f", {self.moved} moved" if self.moved else "")
        )
        lines = [f"{self.base.source_path} → {self.other.source_path}: {counts}"]
        lines += [f"+ {item!r}" for item in self.added]
        lines += [f"- {item!r}" for item in self.removed]
        lines += [repr(change) for change in self.changed]
        if self.unlisted:
            lines.append(
                f"[{self.unlisted} more differences not listed: compare a narrower section or pages]"
            )
        return "\n".join(lines)


@dataclass(frozen=True)
class Comparison(SelfAwaitable):
    """One section (or page range) of several documents compared with the first, sentence by
    sentence (`compare_sections`): `documents` as read, `diffs` the base against each other one.
    `added`, `removed` and `changed` gather every diff's (each sentence names its document)."""

    section: str | None
    documents: list[Compared]
    diffs: list[SectionDiff]

    @property
    def added(self) -> list[Sentence]:
        return [item for diff in self.diffs for item in diff.added]

    @property
    def removed(self) -> list[Sentence]:
        return [item for diff in self.diffs for item in diff.removed]

    @property
    def changed(self) -> list[Change]:
        return [item for diff in self.diffs for item in diff.changed]

    @property
    def evidence(self) -> list[Span]:
        return [s for diff in self.diffs for s in diff.evidence]

    def __repr__(self) -> str:
        what = f"§{self.section!r}" if self.section else "pages"
        lines = [f"Comparison({what} of {len(self.documents)} documents; the first is the base)"]
        lines += [f"  {document!r}" for document in self.documents]
        lines += [repr(diff) for diff in self.diffs]
        return "\n".join(lines)


#: How many of a search's hits its trace entry places, scores and explains (`traced_hits`).
TRACED_HITS = 3


def traced_hits(hits: Sequence[Hit]) -> dict[str, Any]:
    """What a search call's trace entry says of its hits (never their text): the top hit's place, and
    the first `TRACED_HITS` places with their scores and the features that ranked them (`Hit.why`)."""
    ranked = [
        {"where": _place(hit), "score": round(hit.score, 4)} | ({"why": dict(hit.why)} if hit.why else {})
        for hit in hits[:TRACED_HITS]
    ]
    return {"top": ranked[0]["where"], "ranked": ranked} if ranked else {}


def _place(hit: Hit) -> str:
    return (f"{hit.type} {hit.name}" if hit.kind == "artifact" else f"{hit.name} p.{hit.page}")[:200]
