"""What a version records of each source document beyond its pages and chunks: what `identify` reads
from it, the header the dense index reads above each of its chunks, its row in `_sources`, and the
sample questions its headings suggest.
"""

from __future__ import annotations

import re
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from sleuth.compile.identity import identify
from sleuth.compile.pages import Page
from sleuth.compile.version_files import SourceState
from sleuth.format.chunks import Chunk


def context_header(state: SourceState) -> str:
    """The document's title, plus its file name when the title does not already say it: filings
    often carry a title such as `0001410636-21-000101`, while the file is
    `AMERICANWATERWORKS_2020_10K.pdf`."""
    stem = re.sub(r"[_\-.]+", " ", Path(state.path).stem).strip()
    if stem and " ".join(stem.casefold().split()) not in " ".join(state.title.casefold().split()):
        return f"{state.title} ({stem})"
    return state.title


def identified(state: SourceState, pages: list[Page]) -> SourceState:
    """`state` with what `identify` reads from its pages: for a fresh parse, and for a carried-over
    source after a newer `identify`."""
    who = identify(state.path, state.title, pages)
    return replace(
        state,
        issuer=who.issuer,
        doc_type=who.doc_type,
        period=who.period,
        year=who.year,
        aliases=" ".join(who.aliases),
    )


def embed_header(state: SourceState, section_path: list[str]) -> str:
    """The line the dense index reads above a chunk: the document header and section path give a
    chunk the context its own words often lack ("Item 7" alone does not say which company)."""
    header = context_header(state)
    if section_path:
        header += " — " + " > ".join(section_path[-2:])
    return header


def chunk_embed_text(chunk: Chunk, states: dict[str, SourceState]) -> str:
    """What the dense index sees: `embed_header`, a newline, the chunk."""
    return f"{embed_header(states[chunk.source_path], chunk.section_path)}\n{chunk.text}"


def source_row(state: SourceState) -> dict[str, Any]:
    row = asdict(state)
    row.pop("images_skipped")
    return row


def sample_queries(states: dict[str, SourceState], pages_by_source: dict[str, list[Page]]) -> list[str]:
    queries: list[str] = []
    for rel in sorted(states):
        pages = pages_by_source.get(rel, [])
        headings = [h.text for p in pages for h in p.headings if h.text != states[rel].title]
        if headings:
            queries.append(f"What does {states[rel].title} say about {headings[0]}?")
        if len(queries) >= 5:
            break
    return queries
