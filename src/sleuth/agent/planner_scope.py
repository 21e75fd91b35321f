"""What the offline planner knows before its first step (spec/runtime.md §10.2): per scoped context its
tables, artifact types and documents, read from the pinned versions on the host; and the target a
count or list question is matched to, and the class its words suggest (§10.1).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sleuth.agent.extractive import (
    identifier_tokens,
    normalize_word,
    raw_words,
)
from sleuth.sdk.errors import SleuthError
from sleuth.sdk.knowledge import Knowledge, ScopedContext
from sleuth.store.version.documents import DocumentResolver
from sleuth.store.version.stop_words import STOP_WORDS

QuestionClass = Literal["count", "list", "exact_id", "general"]
HOW_MANY = re.compile(r"\bhow many\b", re.IGNORECASE)
COUNT_WORDS = re.compile(r"\b(?:how many|number of|count of|how often|total number)\b", re.IGNORECASE)
LIST_WORDS = re.compile(
    r"\b(?:list|name all|enumerate|what are the|all the)\b|\bwhich\b(?=.*\bare\b)", re.IGNORECASE
)


# -------------------------------------------------------------------------------- classification
def classify(ask: str) -> QuestionClass:
    """The class the words of the ask suggest (§10.1), before tables and types are matched."""
    if COUNT_WORDS.search(ask):
        return "count"
    if LIST_WORDS.search(ask):
        return "list"
    if identifier_tokens(ask):
        return "exact_id"
    return "general"


def head_word(ask: str, trigger: re.Pattern[str]) -> str | None:
    """The first content word after the class trigger ("how many *products*"), as written."""
    match = trigger.search(ask)
    tail = ask[match.end() :] if match else ask
    for words in (raw_words(tail), raw_words(ask)):
        for word in words:
            if word not in STOP_WORDS and not word.isdigit():
                return word
    return None


# ---------------------------------------------------------------------------------------- scope
@dataclass(frozen=True)
class TableInfo:
    """One table of one context, as `list_tables` describes it."""

    context: str
    name: str
    columns: tuple[tuple[str, str], ...]  # (name, SQLite type)
    row_count: int
    natural_key: tuple[str, ...]
    type: str | None  # the artifact type it holds; None for system tables (`_sources`, …)

    @property
    def user_columns(self) -> list[tuple[str, str]]:
        """Columns the model may mean; `_provenance`, `_row_id` and the like are bookkeeping."""
        return [(c, t) for c, t in self.columns if not c.startswith("_")]

    def has_column(self, name: str) -> bool:
        return any(c == name for c, _t in self.columns)

    @property
    def words(self) -> frozenset[str]:
        """Words of the table name, its type name and its columns (§10.2)."""
        names = [self.name, self.type or "", *(c for c, _t in self.user_columns)]
        return frozenset(normalize_word(w) for n in names for w in raw_words(n) if w not in STOP_WORDS)


@dataclass(frozen=True)
class TypeInfo:
    """One artifact type of one context: its kind, count, whether its roster lists entries, its table."""

    context: str
    name: str
    kind: str
    count: int
    has_roster: bool  # a roster with entries (typed tables' rosters only point at the table)
    table: str | None

    @property
    def words(self) -> frozenset[str]:
        return frozenset(normalize_word(w) for w in raw_words(self.name) if w not in STOP_WORDS)


@dataclass(frozen=True)
class PlannerScope:
    """What the planner knows before the first step: per scoped context, its tables and types."""

    slugs: tuple[str, ...]
    tables: tuple[TableInfo, ...] = ()
    types: tuple[TypeInfo, ...] = ()
    documents: tuple[tuple[str, DocumentResolver], ...] = ()  # per context, from its `_sources`
    #: Documents whose company names a fiscal year by the calendar year it begins in (Ulta's "fiscal
    #: 2022" ends in January 2023): source path → the issuer's name (`_sources.fiscal_year_named`).
    named_by_start: tuple[tuple[str, str], ...] = ()

    def issuer_naming_by_start(self, path: str) -> str | None:
        """The issuer of `path` where it names fiscal years by the year they begin; else None."""
        return next((issuer for p, issuer in self.named_by_start if p == path), None)

    def named_documents(self, ask: str) -> list[tuple[str, str]]:
        """(context, source path) of the documents the ask names ("3M's FY2018 10-K"), the way a
        reader of the orientation's document list would pick them; empty when it names none."""
        return [(slug, path) for slug, resolver in self.documents for path in resolver.resolve(ask)]

    def has_table(self, slug: str, name: str) -> bool:
        return any(t.context == slug and t.name == name for t in self.tables)


def planner_scope(contexts: Mapping[str, Path]) -> PlannerScope:
    """Read the pinned versions' tables and types on the host (trusted code; metadata only)."""
    knowledge = Knowledge([ScopedContext(slug, Path(path)) for slug, path in contexts.items()])
    tables: list[TableInfo] = []
    types: list[TypeInfo] = []
    documents: list[tuple[str, DocumentResolver]] = []
    named_by_start: list[tuple[str, str]] = []
    try:
        for slug in contexts:
            rows: Sequence[Mapping[str, Any]]
            try:
                rows = knowledge.query_db(_DOCUMENTS_SQL, context=slug)
            except (SleuthError, OSError):
                rows = []
            if rows:
                documents.append((slug, DocumentResolver({str(r["path"]): dict(r) for r in rows})))
            named_by_start += [
                (str(r["path"]), str(r.get("issuer") or "The company"))
                for r in rows
                if isinstance(r.get("fiscal_year_named"), int)
                and isinstance(r.get("fiscal_year"), int)
                and r["fiscal_year_named"] == r["fiscal_year"] - 1
            ]
            try:
                listed = knowledge.list_tables(context=slug)
            except (SleuthError, OSError):
                listed = []
            tables += [
                TableInfo(
                    slug,
                    t.name,
                    tuple((c.name, c.type.upper()) for c in t.columns),
                    t.row_count,
                    tuple(t.natural_key),
                    t.type,
                )
                for t in listed
            ]
            rosters = {r.type: r for r in knowledge.read_rosters(context=slug) if r.type}
            names = list(rosters)
            for ref in knowledge.outline_knowledge(context=slug):
                if ref.kind != "roster" and ref.type not in names:
                    names.append(ref.type)
            for name in names:
                try:
                    spec = knowledge.describe_type(name, context=slug)
                except SleuthError:
                    continue
                roster = rosters.get(name)
                has_roster = roster is not None and len(roster.entries) > 0
                types.append(TypeInfo(slug, spec.name, spec.kind, spec.count, has_roster, spec.table))
    finally:
        knowledge.close()
    return PlannerScope(tuple(contexts), tuple(tables), tuple(types), tuple(documents), tuple(named_by_start))


# Every column: versions compiled before `aliases` existed lack it, and the resolver reads what is there.
_DOCUMENTS_SQL = "SELECT * FROM _sources ORDER BY path"


@functools.lru_cache(maxsize=64)
def pinned_planner_scope(contexts: tuple[tuple[str, Path], ...]) -> PlannerScope:
    """`planner_scope` of pinned versions, read once per process: a published version never changes,
    and reading its tables, rosters and types costs more than the rest of an offline turn's planning."""
    return planner_scope(dict(contexts))


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class Target:
    """What a count or list step reads, with its filter and wording."""

    how: Literal["table", "sources", "roster"]
    label: str
    table: TableInfo | None = None
    type: TypeInfo | None = None
    where: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    filter_phrase: str = ""
    source_slugs: tuple[str, ...] = ()
