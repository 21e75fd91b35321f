"""Explore (issue 27, item 4): which manifest template fits a context's sources, and why, with no model.

A sample of the sources is read as a curate would read them (the parsers, the document identity, the
table finder), and each template is scored by what it is built for: filings by their document types
and tables, contracts by agreements, papers by abstracts and references, a glossary by definitions,
code by source files, paged documents by long PDFs, a knowledge base by many short notes. The
proposal is the best score, a confidence (its share of the evidence and its lead over the next) and
the reasons, each a count a person can check. The sample is bounded (files and bytes), so exploring a
large context costs what reading a few documents costs.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from sleuth.compile.identity import identify
from sleuth.compile.pages import ParsedSource
from sleuth.compile.parse import parse_source, pdf
from sleuth.compile.sources import list_source_files
from sleuth.format.text import collapsed

SAMPLE_FILES = 24
SAMPLE_BYTES = 40 * 1024 * 1024
SAMPLE_PAGES = 12  # of a PDF: its cover, contents and first sections say what it is
_CODE = {
    ".py",
    ".js",
    ".ts",
    ".tsx",
    ".go",
    ".rs",
    ".java",
    ".kt",
    ".c",
    ".h",
    ".cpp",
    ".rb",
    ".php",
    ".cs",
    ".swift",
}
_FILINGS = {"annual report", "quarterly report", "current report", "earnings release", "proxy statement"}
_NOTES = {"minutes", "letter", "transcript", "presentation"}  # what a team's knowledge base is made of
#: Below it no template fits clearly: General documents is proposed, the best fit named in a reason.
CONFIDENCE_FLOOR = 0.4
_DEFINITION = re.compile(
    r"^\s*(?:[-*]\s*)?(?:\*\*[^*\n]{2,60}\*\*\s*[:—-]|\"[^\"\n]{2,60}\"\s+means\b)", re.MULTILINE
)
_CONTRACT = re.compile(
    r"\b(?:hereinafter|hereby|party|parties|shall|termination|governing law)\b", re.IGNORECASE
)
_PAPER = re.compile(
    r"^\s*(?:abstract|references|bibliography|related work)\s*$", re.IGNORECASE | re.MULTILINE
)


@dataclass
class Proposal:
    template: str
    confidence: float  # 0–1
    reasons: list[str]
    scores: dict[str, float]
    sampled: int
    total: int
    found: dict[str, int] = field(default_factory=dict)  # document types, tables, … counted in the sample
    #: What each sampled source looks like, for a model that refines the proposal (`explore_model`).
    documents: list[SampledDocument] = field(default_factory=list)


@dataclass(frozen=True)
class SampledDocument:
    """One sampled source in brief: enough for a model to tell what the corpus holds, bounded."""

    path: str
    format: str
    pages: int  # read, not in the file: a PDF's first `SAMPLE_PAGES`
    doc_type: str | None
    title: str
    headings: list[str]  # its first `DIGEST_HEADINGS` headings
    tables: list[str]  # a line per table: caption or header
    lead: str  # the first `DIGEST_LEAD_CHARS` of its text

    def describe(self) -> str:
        kind = self.doc_type or "unknown"
        read = f"{self.pages} page{'' if self.pages == 1 else 's'} read"
        lines = [f"## {self.path} ({self.format}, {read}, type: {kind})"]
        lines.append(f"title: {self.title}")
        if self.headings:
            lines.append("headings: " + " | ".join(self.headings))
        if self.tables:
            lines.append("tables: " + " | ".join(self.tables))
        lines.append("text: " + self.lead)
        # a file name the file system gave as bytes (`caf\udce9.md`) cannot be sent as JSON
        return "\n".join(lines).encode("utf-8", "replace").decode("utf-8")


DIGEST_HEADINGS = 12
DIGEST_TABLES = 4
DIGEST_LEAD_CHARS = 700
DIGEST_LINE_CHARS = 120


def _digest(rel: str, parsed: ParsedSource, doc_type: str | None) -> SampledDocument:
    headings = [
        collapsed(h.text)[:DIGEST_LINE_CHARS] for p in parsed.pages for h in (p.outline or p.headings)
    ][:DIGEST_HEADINGS]
    tables = []
    for page in parsed.pages:
        for table in page.tables:
            head = table.title or (" · ".join(table.rows[0].cells) if table.rows else "")
            if head:
                tables.append(collapsed(head)[:DIGEST_LINE_CHARS])
    text = collapsed(" ".join(p.text[: DIGEST_LEAD_CHARS * 2] for p in parsed.pages[:2]))
    return SampledDocument(
        rel,
        parsed.format,
        len(parsed.pages),
        doc_type,
        collapsed(parsed.title or "")[:DIGEST_LINE_CHARS] or Path(rel).stem,
        headings,
        tables[:DIGEST_TABLES],
        text[:DIGEST_LEAD_CHARS],
    )


def _sample(root: Path, files: list[str]) -> list[str]:
    """Up to `SAMPLE_FILES` sources, spread over the tree (every k-th), within `SAMPLE_BYTES`."""
    step = max(1, len(files) // SAMPLE_FILES)
    chosen, size = [], 0
    for rel in files[::step]:
        try:
            length = (root / rel).stat().st_size
        except OSError:
            continue
        if size + length > SAMPLE_BYTES:
            continue
        chosen.append(rel)
        size += length
        if len(chosen) >= SAMPLE_FILES:
            break
    return chosen


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def explore(sources: Path, *, max_text_bytes: int) -> Proposal:
    """The rules' proposal from a sample of `sources`, each parsed as a curate would (`max_text_bytes`:
    the process's setting)."""
    files = list_source_files(sources)
    suffixes = Counter(Path(f).suffix.lower() for f in files)
    code = sum(n for s, n in suffixes.items() if s in _CODE)
    sample = _sample(sources, [f for f in files if Path(f).suffix.lower() not in _CODE])
    types: Counter[str] = Counter()
    documents: list[SampledDocument] = []
    tables = definitions = contract_words = paper_marks = long_pdfs = short_notes = read = 0
    for rel in sample:
        path = sources / rel
        try:
            if path.suffix.lower() == ".pdf":
                parsed = pdf.parse(path.read_bytes(), fonts=False, max_pages=SAMPLE_PAGES)
            else:
                parsed = parse_source(path, max_text_bytes=max_text_bytes)
        except Exception:  # a file that cannot be read is no evidence either way
            continue
        read += 1
        text = "\n".join(p.text for p in parsed.pages[:20])
        who = identify(rel, parsed.title or "", parsed.pages)
        if who.doc_type:
            types[who.doc_type] += 1
        documents.append(_digest(rel, parsed, who.doc_type))
        tables += sum(len(p.tables) for p in parsed.pages)
        definitions += len(_DEFINITION.findall(text))
        # A filing's risk factors say "shall" and "party" as often as a contract: only a document of no
        # other known type counts as reading like an agreement
        if who.doc_type in (None, "agreement", "report", "letter"):
            contract_words += len(_CONTRACT.findall(text)) > 20
        paper_marks += len(_PAPER.findall(text)) >= 2
        long_pdfs += parsed.format == "pdf" and len(parsed.pages) >= 10  # (10 of its first 12 read)
        short_notes += parsed.format in ("markdown", "text") and len(text) < 6000
    n = max(read, 1)
    filings = sum(types[t] for t in _FILINGS)
    notes = sum(types[t] for t in _NOTES)
    scores = {
        # tables count towards filings only as far as the documents are filings: minutes have tables too
        "financial-filings": (filings / n) * (2 + min(tables / n, 5) / 5),
        "contracts": (types["agreement"] + contract_words) / n * 1.5,
        "research-papers": (types["paper"] + paper_marks) / n * 1.5,
        "glossary": min(definitions / max(n * 8, 1), 1.0) * 1.4,
        "codebase": (code / max(len(files), 1)) * 2,
        "paged-documents": (long_pdfs / n) * 0.9,
        "knowledge-base": (max(short_notes, notes) / n) * 0.8 if read >= 3 else 0.0,
        "general": 0.35,
    }
    best = max(scores, key=lambda k: scores[k])
    ranked = sorted(scores.values(), reverse=True)
    lead = ranked[0] - ranked[1]
    confidence = round(max(0.0, min(1.0, 0.5 * min(ranked[0], 1.0) + lead)), 2)
    reasons = [f"read {read} of {_count(len(files), 'source')}"]
    if types:
        reasons.append("document types: " + ", ".join(f"{t} ×{c}" for t, c in types.most_common(5)))
    counted = [
        (tables, f"{_count(tables, 'table')} found in their pages"),
        (definitions, f"{_count(definitions, 'definition')} (“**Term**:” or “… means …”)"),
        (
            contract_words,
            f"{_count(contract_words, 'document')} {'reads' if contract_words == 1 else 'read'} like "
            f"{'an agreement' if contract_words == 1 else 'agreements'} (shall, party, termination)",
        ),
        (paper_marks, f"{_count(paper_marks, 'document')} with an abstract and references"),
        (code, f"{_count(code, 'source-code file')}"),
        (long_pdfs, f"{_count(long_pdfs, 'PDF')} of 10 pages or more"),
    ]
    reasons += [reason for count, reason in counted if count]
    if best != "general" and confidence < CONFIDENCE_FLOOR:
        reasons.append(
            f"no template fits clearly (the closest, {best}, at {confidence:.0%}): General documents "
            "builds what any corpus needs; choose another once you know what you will ask"
        )
        best, confidence = "general", 0.5  # it fits any corpus; what it misses is said above
    elif best == "general":
        reasons.append("nothing points at a more specific template")
    found = {"tables": tables, "definitions": definitions, "code_files": code, **dict(types)}
    return Proposal(
        best,
        confidence,
        reasons,
        {k: round(v, 3) for k, v in scores.items()},
        read,
        len(files),
        found,
        documents,
    )
