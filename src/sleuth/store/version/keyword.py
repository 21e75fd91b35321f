"""The lexical index of a version: BM25 over chunks and artifacts (spec/stack.md §5).

`index/keyword/` is a tantivy index (the Rust engine behind Quickwit and ParadeDB, through its official
Python bindings): BM25 is precomputed per segment, so a query scores only the postings of its own terms
instead of every row an OR matches (FTS5 scored them all: ~106 ms a query on FinanceBench). One
analyzer (`en_stem`: lowercase, Snowball English) turns both the text and the query into terms. Two
indexes, chunks and artifacts; filters (the sources a search is limited to, an artifact's kind and
type) are term queries inside the engine, so `top_k` is always the best `top_k` of the filtered set.

Queries are built here rather than passed through: free text is OR-ed term by term, identifiers such
as `ERR-4012` or `parse_config` become phrase queries of their parts, and a phrase the user quotes
must match as a phrase; only word characters reach the engine's query parser, so its syntax never
leaks to a user. Versions compiled before tantivy keep `index/keyword.sqlite` (FTS5), still read.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt
import tantivy

from sleuth.store.version.stop_words import SEARCH_STOP_WORDS

TOKENIZER = "porter unicode61 remove_diacritics 2"
#: Column weights for bm25(): a title or section match counts more than one in the body.
CHUNK_WEIGHTS = (2.0, 1.5, 1.0)
ARTIFACT_WEIGHTS = (3.0, 1.0)

_WORD = re.compile(r"[\w][\w\-./:#@+']*[\w]|[\w]", re.UNICODE)
_PARTS = re.compile(r"[^\W_]+", re.UNICODE)
_YEAR = re.compile(r"(?<![0-9])(?:19|20)[0-9]{2}(?![0-9])")


@dataclass(frozen=True)
class KeywordHit:
    id: str
    score: float  # BM25 as a positive number: higher is better


_QUOTED = re.compile(r'"([^"]+)"')
#: `word_prefix`: the stemmer's longest cut, and the shortest prefix looked up (shorter ones match
#: most of the index).
PREFIX_SLACK = 3
MIN_PREFIX = 4
_PREFIX_WORD = re.compile(r"[^\W_]+")
#: Boosts per field: a title or section match counts more than one in the body.
CHUNK_FIELDS = {"title": 2.0, "section": 1.5, "text": 1.0}
ARTIFACT_FIELDS = {"name": 3.0, "text": 1.0}
WRITER_HEAP = 128 * 1024 * 1024  # the writer's memory, whatever the corpus (it flushes segments)


def _terms(text: str) -> list[str]:
    """The query's terms, each a space-joined run of word parts (one part: a word; more: a phrase)."""
    terms: list[str] = []
    for word in _WORD.findall(text):
        parts = _PARTS.findall(word)
        if not parts:
            continue
        terms.append(" ".join(parts).lower())
        # "FY2018" should also find "fiscal 2018": a year glued to letters counts on its own too.
        terms.extend(m.group(0) for m in _YEAR.finditer(word) if m.group(0) != word)
    return terms


def query_terms(query: str) -> tuple[list[str], list[str]]:
    """(phrases the user quoted, which must match; free terms, OR-ed), stop words dropped from the free
    terms unless nothing else is left."""
    quoted = [index_phrase(q) for q in _QUOTED.findall(query)]
    phrases = list(dict.fromkeys(p for p in quoted if p))
    free = _terms(_QUOTED.sub(" ", query))
    content = [t for t in free if t not in SEARCH_STOP_WORDS] or ([] if phrases else free)
    return phrases, list(dict.fromkeys(content))


#: A period written as one word ("FY2018", "Q3-23", "H1'24"): it names no one thing, as an identifier does.
_PERIOD = re.compile(r"(?i)^(?:fy|cy|q[1-4]|h[12])[-'’]?\d{2,4}$")
#: The longest query (in terms) whose whole text is also looked up as one phrase (`exact_phrases`).
WHOLE_QUERY_TERMS = 8


def is_identifier(word: str) -> bool:
    """`ERR-4012`, `FW-3.2.1`, `parse_config`, `FY2018`; not `10-K`, `3.5` or `e.g`."""
    letters = sum(ch.isalpha() for ch in word)
    return "_" in word or (letters >= 2 and any(ch.isdigit() for ch in word))


def quoted(query: str) -> list[str]:
    """The phrases a query quotes, as written ("…" around them)."""
    return [q.strip() for q in _QUOTED.findall(query) if q.strip()]


def index_phrase(text: str) -> str:
    """`text` as one phrase of the index's terms, as the index splits it (empty when it holds no
    word): `_terms`' extra year of "FY2018" is a free term's, not a word the text has in that place."""
    return " ".join(part.lower() for word in _WORD.findall(text) for part in _PARTS.findall(word))


def exact_phrases(query: str) -> list[str]:
    """What a chunk holding it verbatim is surely about (hybrid search keeps such chunks, `store.search`):
    the phrases the user quoted, the identifiers the query names, and the whole query when it is
    short (a question of several sentences is never found verbatim), each as the index's terms."""
    phrases, _free = query_terms(query)
    unquoted = _QUOTED.sub(" ", query)
    whole = [" ".join(_PARTS.findall(w)).lower() for w in _WORD.findall(unquoted)]
    if 2 <= len(whole) <= WHOLE_QUERY_TERMS:
        phrases.append(" ".join(w for w in whole if w))
    phrases += [
        " ".join(_PARTS.findall(w)).lower()
        for w in _WORD.findall(unquoted)
        if is_identifier(w) and not _PERIOD.match(w)
    ]
    return list(dict.fromkeys(p for p in phrases if p))


def match_expression(query: str) -> str | None:
    """An FTS5 MATCH string (versions compiled before tantivy): quoted phrases required, free terms
    OR-ed; None when the query holds no searchable term."""
    phrases, free = query_terms(query)
    either = " OR ".join(f'"{t}"' for t in free)
    parts = [f'"{p}"' for p in phrases] + ([f"({either})" if phrases else either] if free else [])
    return " AND ".join(parts) or None


def build_fts5(
    path: Path,
    chunks: Iterable[tuple[str, str, int, str, str, str]],
    artifacts: Iterable[tuple[str, str, str, str, str]],
) -> None:
    """The FTS5 index of versions compiled before tantivy (kept to test that they are still read)."""
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


class Fts5Index:
    """Read-only access to the FTS5 index of a version compiled before tantivy."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, check_same_thread=False)

    def close(self) -> None:
        self._db.close()

    def search_chunks(
        self, query: str, top_k: int = 10, sources: Sequence[str] | None = None, raw: bool = False
    ) -> list[KeywordHit]:
        expression = query if raw else match_expression(query)
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

    def search_phrases(
        self, phrases: Sequence[str], top_k: int = 10, sources: Sequence[str] | None = None
    ) -> list[KeywordHit]:
        if not phrases:
            return []
        return self.search_chunks(" OR ".join(f'"{p}"' for p in phrases), top_k, sources, raw=True)

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

    def search_prefix(
        self, prefix: str, top_k: int = 10, sources: Sequence[str] | None = None
    ) -> list[KeywordHit]:
        if not _PREFIX_WORD.fullmatch(prefix):
            return []
        # FTS5 stems a prefix query's term too ("employ" → "emploi", no longer a prefix of "employe"):
        # one letter fewer keeps clear of the stemmer's last-letter rules.
        shorter = prefix[:-1] if len(prefix) > MIN_PREFIX else prefix
        return self.search_chunks(f'text : "{shorter}" *', top_k, sources, raw=True)

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


class KeywordIndex(Protocol):
    """What searches need of a version's lexical index, whichever engine built it."""

    def close(self) -> None: ...
    def search_chunks(
        self, query: str, top_k: int = 10, sources: Sequence[str] | None = None
    ) -> list[KeywordHit]: ...
    def search_artifacts(
        self, query: str, top_k: int = 10, kind: str | None = None, type: str | None = None
    ) -> list[KeywordHit]: ...
    def search_phrases(
        self, phrases: Sequence[str], top_k: int = 10, sources: Sequence[str] | None = None
    ) -> list[KeywordHit]:
        """Chunks that hold any of `phrases` (`exact_phrases`) word for word, best BM25 first."""
        ...

    def document_frequency(self, word: str) -> int: ...
    def search_prefix(
        self, prefix: str, top_k: int = 10, sources: Sequence[str] | None = None
    ) -> list[KeywordHit]:
        """Chunks whose text holds a term (stemmed, lower case, as the index keeps it) that starts
        with `prefix` (`word_prefix`)."""
        ...


def word_prefix(fragment: str) -> str | None:
    """What a chunk holding a word that starts with `fragment` surely holds a term starting with: the
    stemmer only ever cuts a word's end, but may cut it shorter than the fragment ("organiz" →
    "organ"), so the fragment's last `PREFIX_SLACK` letters are left off. None where that leaves fewer
    than `MIN_PREFIX` characters, or where the fragment is not one word."""
    word = fragment.lower()
    if not _PREFIX_WORD.fullmatch(word):
        return None
    kept = word[: max(MIN_PREFIX, len(word) - PREFIX_SLACK)]
    return kept if len(kept) >= MIN_PREFIX else None


def _chunk_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_unsigned_field("row", fast=True)  # the id's place in `ids.npy` (`IdMap`)
    builder.add_text_field("source", stored=True, tokenizer_name="raw", index_option="basic")
    for name in CHUNK_FIELDS:
        builder.add_text_field(name, tokenizer_name="en_stem", index_option="position")
    return builder.build()


def _artifact_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_unsigned_field("row", fast=True)  # the id's place in `ids.npy` (`IdMap`)
    builder.add_text_field("kind", tokenizer_name="raw", index_option="basic")
    builder.add_text_field("type", tokenizer_name="raw", index_option="basic")  # lowercased: NOCASE
    for name in ARTIFACT_FIELDS:
        builder.add_text_field(name, tokenizer_name="en_stem", index_option="position")
    return builder.build()


def build(
    directory: Path,
    chunks: Iterable[tuple[str, str, int, str, str, str]],
    artifacts: Iterable[tuple[str, str, str, str, str]],
) -> None:
    """Write `directory` (`index/keyword/`): chunks (id, source, page, title, section, text) and
    artifacts (id, type, kind, name, text). One writer thread and documents in the order given, so a
    rebuild from the same input ranks the same."""
    shutil.rmtree(directory, ignore_errors=True)
    for name, schema, rows in (
        ("chunks", _chunk_schema(), ((cid, s, t, sec, x) for cid, s, _p, t, sec, x in chunks)),
        ("artifacts", _artifact_schema(), artifacts),
    ):
        (directory / name).mkdir(parents=True)
        index = tantivy.Index(schema, path=str(directory / name))
        writer = index.writer(heap_size=WRITER_HEAP, num_threads=1)
        ids: list[str] = []
        for row in rows:
            if name == "chunks":
                cid, source, title, section, text = row
                doc = tantivy.Document(id=cid, source=source, title=title, section=section, text=text)
            else:
                cid, atype, kind, aname, text = row
                doc = tantivy.Document(id=cid, type=atype.lower(), kind=kind, name=aname, text=text)
            doc.add_unsigned("row", len(ids))
            ids.append(cid)
            writer.add_document(doc)
        writer.commit()
        writer.wait_merging_threads()
        _write_ids(directory / name, ids)
    for path in directory.rglob("*"):  # tantivy makes some files 0600; the sandbox's uid reads them
        path.chmod(0o755 if path.is_dir() else 0o644)


#: Beside each tantivy index: every document's id, by its `row` (its place in the build's input).
ID_MAP = "ids.npy"


def _write_ids(directory: Path, ids: list[str]) -> None:
    width = max((len(i.encode("utf-8")) for i in ids), default=1)
    np.save(directory / ID_MAP, np.array([i.encode("utf-8") for i in ids], dtype=f"S{width}"))


class IdMap:
    """Document ids by `row`, memory-mapped (bytes, not Python strings: at a million chunks this is
    20 MB, not 80). A search reads its hits' rows from the fast `row` column instead of each hit's
    stored document (measured: reading 50 stored documents took 80 % of a keyword search). An index
    written before rows existed has no map (the map and the column came together), and its
    documents are read."""

    def __init__(self, directory: Path, searcher: tantivy.Searcher) -> None:
        self.ids: npt.NDArray[np.bytes_] | None = None
        path = directory / ID_MAP
        if path.is_file():
            ids = np.load(path, mmap_mode="r", allow_pickle=False)
            if len(ids) == searcher.num_docs:
                self.ids = ids

    def ids_of(self, searcher: tantivy.Searcher, addresses: list[tantivy.DocAddress]) -> list[str]:
        if self.ids is None:
            return [searcher.doc(address)["id"][0] for address in addresses]
        rows = searcher.fast_field_values("row", addresses)
        return [
            searcher.doc(address)["id"][0] if row is None else bytes(self.ids[int(row)]).decode("utf-8")
            for address, row in zip(addresses, rows, strict=True)
        ]


def _openable(directory: Path) -> Path:
    """`directory`, or where tantivy can open it. Opening takes a lock file beside the index, which a
    read-only mount (a turn's sandbox mounts its versions read-only) refuses: there, the index is seen
    through a directory of links to its files, made in the temporary directory, where the lock goes."""
    if os.access(directory, os.W_OK):
        return directory
    # TMPDIR as it is now (the sandbox sets it after `tempfile` may have cached another directory)
    shadow = Path(tempfile.mkdtemp(prefix="keyword-", dir=os.environ.get("TMPDIR") or None))
    for entry in directory.iterdir():
        if entry.is_file() and not entry.name.endswith(".lock"):
            (shadow / entry.name).symlink_to(entry)
    return shadow


class TantivyIndex:
    """Read-only access to one version's tantivy index (safe to share between threads)."""

    def __init__(self, directory: Path) -> None:
        self._chunks = tantivy.Index.open(str(_openable(directory / "chunks")))
        self._artifacts = tantivy.Index.open(str(_openable(directory / "artifacts")))
        self._chunk_searcher = self._chunks.searcher()
        self._artifact_searcher = self._artifacts.searcher()
        self._chunk_ids = IdMap(directory / "chunks", self._chunk_searcher)
        self._artifact_ids = IdMap(directory / "artifacts", self._artifact_searcher)

    def close(self) -> None:
        pass  # memory-mapped segments go with the objects

    @staticmethod
    def _query(
        index: tantivy.Index, query: str, fields: dict[str, float], filters: list[tantivy.Query]
    ) -> tantivy.Query | None:
        phrases, free = query_terms(query)
        if not phrases and not free:
            return None
        names = list(fields)
        clauses = [
            (tantivy.Occur.Must, index.parse_query(f'"{p}"', names, field_boosts=fields)) for p in phrases
        ]
        if free:
            expression = " OR ".join(f'"{t}"' for t in free)
            occur = tantivy.Occur.Should if phrases else tantivy.Occur.Must
            clauses.append((occur, index.parse_query(expression, names, field_boosts=fields)))
        clauses += [(tantivy.Occur.Must, f) for f in filters]
        return tantivy.Query.boolean_query(clauses)

    @staticmethod
    def _hits(searcher: tantivy.Searcher, ids: IdMap, query: tantivy.Query, top_k: int) -> list[KeywordHit]:
        if top_k <= 0:
            return []
        hits = searcher.search(query, top_k, count=False).hits
        found = ids.ids_of(searcher, [address for _score, address in hits])
        return [KeywordHit(cid, float(score)) for cid, (score, _address) in zip(found, hits, strict=True)]

    def search_chunks(
        self, query: str, top_k: int = 10, sources: Sequence[str] | None = None
    ) -> list[KeywordHit]:
        if sources is not None and not sources:
            return []
        schema = self._chunks.schema
        filters = [] if sources is None else [tantivy.Query.term_set_query(schema, "source", list(sources))]
        built = self._query(self._chunks, query, CHUNK_FIELDS, filters)
        return [] if built is None else self._hits(self._chunk_searcher, self._chunk_ids, built, top_k)

    def search_phrases(
        self, phrases: Sequence[str], top_k: int = 10, sources: Sequence[str] | None = None
    ) -> list[KeywordHit]:
        if not phrases or (sources is not None and not sources):
            return []
        schema = self._chunks.schema
        names = list(CHUNK_FIELDS)
        either = [
            (tantivy.Occur.Should, self._chunks.parse_query(f'"{p}"', names, field_boosts=CHUNK_FIELDS))
            for p in phrases
        ]
        clauses = [(tantivy.Occur.Must, tantivy.Query.boolean_query(either))]
        if sources is not None:
            clauses.append(
                (tantivy.Occur.Must, tantivy.Query.term_set_query(schema, "source", list(sources)))
            )
        return self._hits(self._chunk_searcher, self._chunk_ids, tantivy.Query.boolean_query(clauses), top_k)

    def search_artifacts(
        self, query: str, top_k: int = 10, kind: str | None = None, type: str | None = None
    ) -> list[KeywordHit]:
        schema = self._artifacts.schema
        filters = []
        if kind is not None:
            filters.append(tantivy.Query.term_query(schema, "kind", kind))
        if type is not None:
            filters.append(tantivy.Query.term_query(schema, "type", type.lower()))
        built = self._query(self._artifacts, query, ARTIFACT_FIELDS, filters)
        return [] if built is None else self._hits(self._artifact_searcher, self._artifact_ids, built, top_k)

    def search_prefix(
        self, prefix: str, top_k: int = 10, sources: Sequence[str] | None = None
    ) -> list[KeywordHit]:
        if not _PREFIX_WORD.fullmatch(prefix) or (sources is not None and not sources):
            return []
        schema = self._chunks.schema
        clauses = [(tantivy.Occur.Must, tantivy.Query.regex_query(schema, "text", f"{prefix}.*"))]
        if sources is not None:
            clauses.append(
                (tantivy.Occur.Must, tantivy.Query.term_set_query(schema, "source", list(sources)))
            )
        return self._hits(self._chunk_searcher, self._chunk_ids, tantivy.Query.boolean_query(clauses), top_k)

    def sources(self) -> set[str]:
        """Every source with a chunk in the index (integrity checks: one pass over the stored fields)."""
        total = self._chunk_searcher.num_docs
        if not total:
            return set()
        found = self._chunk_searcher.search(tantivy.Query.all_query(), total, count=False)
        return {self._chunk_searcher.doc(address)["source"][0] for _score, address in found.hits}

    def document_frequency(self, word: str) -> int:
        """How many chunks hold `word` in any field (as the index analyzes it: stemmed, case-folded; a
        word of several parts as a phrase)."""
        parts = _PARTS.findall(word)
        if not parts:
            return 0
        query = self._chunks.parse_query('"' + " ".join(parts).lower() + '"', list(CHUNK_FIELDS))
        found = self._chunk_searcher.search(query, 1, count=True)
        return int(getattr(found, "count", 0) or 0)  # the stubs omit `count`


def open_index(index_dir: Path) -> KeywordIndex | None:
    """The version's lexical index: tantivy (`index/keyword/`), an FTS5 one of a version compiled
    before it (`index/keyword.sqlite`), or None when the manifest turned keyword search off."""
    if (index_dir / "keyword" / "chunks").is_dir():
        return TantivyIndex(index_dir / "keyword")
    if (index_dir / "keyword.sqlite").is_file():
        return Fts5Index(index_dir / "keyword.sqlite")
    return None
