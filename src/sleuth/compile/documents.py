"""What a version records of each source document beyond its pages and chunks: what `identify` reads
from it, the header the dense index reads above each of its chunks, its row in `_sources`, and the
sample questions its headings suggest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from sleuth.compile import fiscal
from sleuth.compile.chunking import Window, window_spans
from sleuth.compile.identity import identify, with_year_end
from sleuth.compile.pages import Page
from sleuth.compile.version_files import SourceState
from sleuth.format.chunks import Chunk
from sleuth.format.identity import DocumentIdentity


def identity_title(state: SourceState) -> str | None:
    """A title from what the document is, for one whose pages name no title (issue 39, item 10):
    `Netflix, Inc. — Annual report FY2017` rather than `NETFLIX_2017_10K`. None unless both its issuer
    and its type are known."""
    if not state.issuer or not state.doc_type:
        return None
    when = state.period or (str(state.year) if state.year else "")
    kind = state.doc_type[:1].upper() + state.doc_type[1:]
    return f"{state.issuer} — {kind}{f' {when}' if when else ''}"


def index_title(state: SourceState) -> str:
    """The title the keyword index and the dense header read: the file name where the title was made
    from the identity, so that naming a document for people re-ranks nothing (and re-embeds nothing)."""
    if state.title == identity_title(state):
        return Path(state.path).stem
    return state.title


def context_header(state: SourceState) -> str:
    """The document's title, plus its file name when the title does not already say it: filings
    often carry a title such as `0001410636-21-000101`, while the file is
    `AMERICANWATERWORKS_2020_10K.pdf`."""
    stem = re.sub(r"[_\-.]+", " ", Path(state.path).stem).strip()
    shown = index_title(state)
    if shown != state.title:
        state = replace(state, title=shown)
    title = " ".join(re.sub(r"[_\-.]+", " ", state.title).casefold().split())
    if stem and title == " ".join(stem.casefold().split()):
        return stem if "_" in state.title else state.title  # said once, in words
    if stem and " ".join(stem.casefold().split()) not in " ".join(state.title.casefold().split()):
        return f"{state.title} ({stem})"
    return state.title


def identified(state: SourceState, pages: list[Page]) -> SourceState:
    """`state` with what `identify` reads from its pages: for a fresh parse, and for a carried-over
    source after a newer `identify`."""
    return _known(state, identify(state.path, index_title(state), pages))


def _known(state: SourceState, who: DocumentIdentity) -> SourceState:
    """`state` with the identity `who`; a title we made from the identity follows it."""
    named_by_file = state.title == Path(state.path).stem  # its pages named no title
    known = replace(
        state,
        issuer=who.issuer,
        doc_type=who.doc_type,
        period=who.period,
        year=who.year,
        aliases=" ".join(who.aliases),
        period_start=who.period_start,
        period_end=who.period_end,
        fiscal_quarter=who.fiscal_quarter,
        fiscal_differs=who.fiscal_differs,
        fiscal_year=who.fiscal_year,
        fiscal_year_end=who.fiscal_year_end,
        fiscal_basis=who.fiscal_basis,
        calendar_year=who.calendar_year,
        calendar_quarter=who.calendar_quarter,
        calendar_period=who.calendar_period,
        fiscal_year_named=who.fiscal_year_named,
    )
    if named_by_file or state.title == identity_title(state):  # named by us: follow the identity
        return replace(known, title=identity_title(known) or Path(state.path).stem)
    return known


def _identity(state: SourceState) -> DocumentIdentity:
    """What `state` records of the document, as the identity `identify` gave it."""
    fields = {
        name: getattr(state, name) for name in DocumentIdentity.__dataclass_fields__ if name != "aliases"
    }
    return DocumentIdentity(**fields, aliases=tuple(state.aliases.split()))


def with_issuer_year_ends(
    states: Mapping[str, SourceState], pages_of: Callable[[str], list[Page]]
) -> dict[str, SourceState]:
    """Every document that states no fiscal year end of its own, labelled by the one its issuer's
    other documents in the context state, where they agree (`fiscal.lenders`). One that borrowed
    from a document that is gone, or now says otherwise, is first identified again from its pages.
    Run over the whole context at every compile: a new annual report labels the quarters before it."""
    lends = fiscal.lenders(
        {
            path: fiscal.Dated(s.issuer, s.fiscal_year_end, s.fiscal_basis, _offset(s))
            for path, s in states.items()
        }
    )
    out = dict(states)
    for path, state in states.items():
        lender = lends.get(path)
        if fiscal.borrowed_from(state.fiscal_basis) is not None:
            if lender == (fiscal.borrowed_from(state.fiscal_basis), state.fiscal_year_end, _offset(state)):
                continue  # as it was
            state = identified(state, pages_of(path))
        if lender is not None and state.fiscal_year_end is None:
            source, month, offset = lender
            found = fiscal.YearEnd(month, fiscal.borrowed_basis(source), offset)
            state = _known(state, with_year_end(_identity(state), found))
        out[path] = state
    return out


def _offset(state: SourceState) -> int:
    """-1 where the company names a fiscal year by the calendar year it begins in, else 0."""
    if state.fiscal_year is None or state.fiscal_year_named is None:
        return 0
    return state.fiscal_year_named - state.fiscal_year


def embed_header(state: SourceState, section_path: list[str]) -> str:
    """The line the dense index reads above a chunk: the document header and section path give a
    chunk the context its own words often lack ("Item 7" alone does not say which company)."""
    header = context_header(state)
    if section_path:
        header += " — " + " > ".join(section_path[-2:])
    return header


def chunk_windows(chunk: Chunk, window: Window | None) -> list[tuple[int, int]]:
    """The spans of `chunk.text` the dense index reads, one vector each: its embedder windows
    (`chunking.window_spans`), or the whole chunk when there is no window to fit."""
    if window is None:
        return [(0, len(chunk.text))]
    return window_spans(chunk.text, window, chunk.section_path)


def window_text(chunk: Chunk, state: SourceState, span: tuple[int, int], first: bool) -> str:
    """What the dense index reads for one span of a chunk: `embed_header` above the first window and
    the document's `context_header` above the next ones (the section line costs a tenth of every
    window and says nothing the first window did not), a newline, the span. A chunk of one window
    reads the same text whatever the layout, so cached vectors carry."""
    header = embed_header(state, chunk.section_path) if first else context_header(state)
    return f"{header}\n{chunk.text[span[0] : span[1]]}"


def chunk_embed_texts(chunk: Chunk, state: SourceState, window: Window | None) -> list[str]:
    """Every text the dense index reads of a chunk (`chunk_windows`, `window_text`)."""
    return [window_text(chunk, state, span, i == 0) for i, span in enumerate(chunk_windows(chunk, window))]


def source_row(state: SourceState) -> dict[str, Any]:
    row = asdict(state)
    row.pop("images_skipped")
    return row


def sample_queries(states: dict[str, SourceState], pages_by_source: Mapping[str, list[Page]]) -> list[str]:
    queries: list[str] = []
    for rel in sorted(states):
        pages = pages_by_source.get(rel, [])
        headings = [h.text for p in pages for h in p.headings if h.text != states[rel].title]
        if headings:
            queries.append(f"What does {states[rel].title} say about {headings[0]}?")
        if len(queries) >= 5:
            break
    return queries
