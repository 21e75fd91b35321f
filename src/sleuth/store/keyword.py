"""The lexical index (`index/keyword.sqlite`): SQLite FTS5 ranked by BM25 (spec/stack.md §5).

Two namespaces, chunks and artifacts, as contentless FTS5 tables (the text lives in the chunk and
artifact files; the index only needs to rank). Queries are built here rather than passed through:
free text is OR-ed term by term, and identifiers such as `ERR-4012` or `parse_config` become phrase
queries of their parts, so they match as one unit and FTS5 syntax never leaks to a user.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

TOKENIZER = "porter unicode61 remove_diacritics 2"
#: Column weights for bm25(): a title or section match counts more than one in the body.
CHUNK_WEIGHTS = (2.0, 1.5, 1.0)
ARTIFACT_WEIGHTS = (3.0, 1.0)

_WORD = re.compile(r"[\w][\w\-./:#@+']*[\w]|[\w]", re.UNICODE)
_PARTS = re.compile(r"[^\W_]+", re.UNICODE)
_YEAR = re.compile(r"(?<![0-9])(?:19|20)[0-9]{2}(?![0-9])")
_STOP = frozenset(
    (
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "their",
        "there",
        "these",
        "this",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "give",
        "provide",
        "show",
        "tell",
        "me",
        "please",
    )
)


@dataclass(frozen=True)
class KeywordHit:
    id: str
    score: float  # BM25 as a positive number: higher is better


def match_expression(query: str) -> str | None:
    """An FTS5 MATCH string for free text; None when the query holds no searchable term."""
    terms: list[str] = []
    for word in _WORD.findall(query):
        parts = _PARTS.findall(word)
        if not parts:
            continue
        terms.append(" ".join(parts).lower())
        # "FY2018" should also find "fiscal 2018": a year glued to letters counts on its own too.
        terms.extend(m.group(0) for m in _YEAR.finditer(word) if m.group(0) != word)
    content = [t for t in terms if t not in _STOP] or terms
    unique = list(dict.fromkeys(content))
    if not unique:
        return None
    return " OR ".join(f'"{t}"' for t in unique)


def build(
    path: Path,
    chunks: Iterable[tuple[str, str, int, str, str, str]],
    artifacts: Iterable[tuple[str, str, str, str, str]],
) -> None:
    """Write the index. chunks: (id, source, page, title, section, text);
    artifacts: (id, type, kind, name, text)."""
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path)
    try:
        db.executescript(
            f"""
            PRAGMA journal_mode=DELETE;
            CREATE TABLE chunks (rowid INTEGER PRIMARY KEY, id TEXT NOT NULL, source TEXT NOT NULL,
                                 page INTEGER NOT NULL);
            CREATE INDEX chunks_source ON chunks(source);
            CREATE VIRTUAL TABLE chunks_fts USING fts5(title, section, text, content='',
                                                       tokenize='{TOKENIZER}');
            CREATE TABLE artifacts (rowid INTEGER PRIMARY KEY, id TEXT NOT NULL, type TEXT NOT NULL,
                                    kind TEXT NOT NULL);
            CREATE VIRTUAL TABLE artifacts_fts USING fts5(name, text, content='',
                                                          tokenize='{TOKENIZER}');
            """
        )
        with db:
            for rowid, (cid, source, page, title, section, text) in enumerate(chunks, 1):
                db.execute("INSERT INTO chunks VALUES (?, ?, ?, ?)", (rowid, cid, source, page))
                db.execute(
                    "INSERT INTO chunks_fts (rowid, title, section, text) VALUES (?, ?, ?, ?)",
                    (rowid, title, section, text),
                )
            for rowid, (aid, atype, kind, name, text) in enumerate(artifacts, 1):
                db.execute("INSERT INTO artifacts VALUES (?, ?, ?, ?)", (rowid, aid, atype, kind))
                db.execute(
                    "INSERT INTO artifacts_fts (rowid, name, text) VALUES (?, ?, ?)",
                    (rowid, name, text),
                )
            db.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('optimize')")
            db.execute("INSERT INTO artifacts_fts(artifacts_fts) VALUES ('optimize')")
    finally:
        db.close()


class KeywordIndex:
    """Read-only access to one version's lexical index."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, check_same_thread=False)

    def close(self) -> None:
        self._db.close()

    def search_chunks(
        self, query: str, top_k: int = 10, sources: Sequence[str] | None = None
    ) -> list[KeywordHit]:
        expression = match_expression(query)
        if expression is None:
            return []
        params: list[object] = [*CHUNK_WEIGHTS, expression]
        if sources is None:  # rank first, then look up only the top ids (measured: 43 → 35 ms)
            sql = (
                "SELECT c.id, t.s FROM (SELECT rowid, bm25(chunks_fts, ?, ?, ?) AS s FROM chunks_fts "
                "WHERE chunks_fts MATCH ? ORDER BY s LIMIT ?) t "
                "JOIN chunks c ON c.rowid = t.rowid ORDER BY t.s"
            )
            return [KeywordHit(cid, -score) for cid, score in self._db.execute(sql, [*params, top_k])]
        sql = (
            "SELECT c.id, bm25(chunks_fts, ?, ?, ?) AS s FROM chunks_fts "
            "JOIN chunks c ON c.rowid = chunks_fts.rowid WHERE chunks_fts MATCH ?"
        )
        if sources is not None:
            sql += f" AND c.source IN ({','.join('?' * len(sources))})"
            params.extend(sources)
        sql += " ORDER BY s LIMIT ?"
        params.append(top_k)
        return [KeywordHit(cid, -score) for cid, score in self._db.execute(sql, params)]

    def document_frequency(self, word: str) -> int:
        """How many chunks hold `word` (as the index tokenizes it: stemmed, case-folded)."""
        parts = _PARTS.findall(word)
        if not parts:
            return 0
        phrase = '"' + " ".join(parts).lower() + '"'
        row = self._db.execute(
            "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (phrase,)
        ).fetchone()
        return int(row[0])

    def search_artifacts(
        self, query: str, top_k: int = 10, kind: str | None = None, type: str | None = None
    ) -> list[KeywordHit]:
        expression = match_expression(query)
        if expression is None:
            return []
        sql = (
            "SELECT a.id, bm25(artifacts_fts, ?, ?) AS s FROM artifacts_fts "
            "JOIN artifacts a ON a.rowid = artifacts_fts.rowid WHERE artifacts_fts MATCH ?"
        )
        params: list[object] = [*ARTIFACT_WEIGHTS, expression]
        if kind is not None:
            sql += " AND a.kind = ?"
            params.append(kind)
        if type is not None:
            sql += " AND a.type = ? COLLATE NOCASE"
            params.append(type)
        sql += " ORDER BY s LIMIT ?"
        params.append(top_k)
        return [KeywordHit(aid, -score) for aid, score in self._db.execute(sql, params)]
