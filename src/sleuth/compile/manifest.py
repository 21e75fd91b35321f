"""The manifest: the one JSON document that configures a compile (spec/context.md §3).

Every field is optional and `{}` is a working manifest. Bounds come from the Nexus contract;
the cross-field rules of §3.6 are Sleuth's own. Validation reports every problem with its JSON
path, so a user fixes a manifest in one round trip instead of one error at a time.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sleuth.errors import Invalid
from sleuth.format.names import slugify

Kind = Literal["summary", "topic", "entity", "event", "doc", "page", "glossary"]
Scope = Literal["document", "corpus"]
Format = Literal["markdown", "sqlite"]
ColumnType = Literal["TEXT", "INTEGER", "REAL", "NUMERIC"]
Strategy = Literal["markdown_heading", "sliding_window", "html", "csv", "code"]

#: Kinds built without a model (spec/context.md §4).
DETERMINISTIC_KINDS: frozenset[str] = frozenset({"doc", "page", "glossary"})
#: Allowed (scopes, formats) per kind (spec/context.md §4).
KIND_RULES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "doc": (frozenset({"document"}), frozenset({"markdown"})),
    "page": (frozenset({"document"}), frozenset({"markdown"})),
    "glossary": (frozenset({"corpus"}), frozenset({"markdown"})),
    "summary": (frozenset({"document", "corpus"}), frozenset({"markdown"})),
    "topic": (frozenset({"document", "corpus"}), frozenset({"markdown", "sqlite"})),
    "entity": (frozenset({"document", "corpus"}), frozenset({"markdown", "sqlite"})),
    "event": (frozenset({"document", "corpus"}), frozenset({"markdown", "sqlite"})),
}
#: Ids accepted by `curate.chunks.embedding_model`; "default" is MiniLM int8.
EMBEDDING_MODELS: tuple[str, ...] = ("default", "minilm-l6-v2-int8", "minilm-l6-v2-static")

Str64 = Annotated[str, Field(max_length=64)]
Str128 = Annotated[str, Field(max_length=128)]
#: `format.text.text_fingerprint` of a text: what `Manifest.model_written` holds.
Fingerprint = Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")]
#: Every description a manifest can hold (types, their columns, edges), with room to spare.
MAX_MODEL_WRITTEN = 4096


class _Model(BaseModel):
    """Unknown fields are errors: a typo must not silently fall back to a default."""

    # A field's docstring is its description in the JSON Schema (`GET /manifest/schema`): the console's
    # design form shows it as the field's help.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, use_attribute_docstrings=True)


#: How the dense index reads a chunk (`Chunking.vectors`):
#: - `windows`: one vector per embedder window of the chunk, and a chunk scores its best window. Chunks
#:   keep `target_size` (evidence-sized), and every word is embedded about once.
#: - `fit`: a chunk is cut where the embedder stops reading, and has one vector (before issue 24).
#: - `head`: one vector per chunk, of what the embedder reads of it (MiniLM: the first 256 pieces).
VectorLayout = Literal["windows", "fit", "head"]


class Chunking(_Model):
    strategy: Strategy = "markdown_heading"
    """How sources are cut into chunks: at Markdown headings (default), by a sliding window, or by HTML,
    CSV or code structure."""
    #: 256 since issue 44: page-sized evidence in one embedder window each; 512-token chunks (two windows)
    #: ranked the evidence page lower (grouped-CV R@10 0.775 against 0.822 on FinanceBench).
    target_size: int = Field(256, ge=64, le=4096)
    """The chunk size to aim for, in embedder tokens (64–4096)."""
    #: Tokens a chunk repeats from the one before. 0 by default: chunks are whole evidence, every
    #: word of them is embedded (`vectors: windows`), and a repeat costs embedding and output space.
    overlap: int = Field(0, ge=0, le=1024)
    """Tokens a chunk repeats from the one before (0: chunks are whole evidence, nothing embedded twice)."""
    respect_sections: bool = True
    """Never let a chunk run across a heading, so each chunk sits in one section."""
    vectors: VectorLayout = "windows"
    """How the dense index reads a chunk: `windows` (one vector per embedder window; default), `fit`
    (chunks cut to what the embedder reads) or `head` (one vector of the chunk's start)."""

    @model_validator(mode="before")
    @classmethod
    def _fit_embedder(cls, data: Any) -> Any:
        """`fit_embedder` (true: `fit`, false: `head`) from manifests written before `vectors`."""
        if isinstance(data, dict) and "fit_embedder" in data:
            data = dict(data)
            fit = data.pop("fit_embedder")
            if not isinstance(fit, bool):
                raise ValueError("fit_embedder must be true or false (it is now `vectors`)")
            data.setdefault("vectors", "fit" if fit else "head")
        return data


class Keyword(_Model):
    enabled: bool = True
    """Build the keyword (BM25) index beside the dense one."""


class ChunksConfig(_Model):
    enabled: bool = True
    """Chunk and index the sources; off, only artifacts are built."""
    embedding_model: str = Field("default", max_length=128)
    """The embedder of the dense index: `default` (MiniLM int8, in the package) or a listed id."""
    chunking: Chunking = Field(default_factory=Chunking)
    """How sources are cut into chunks."""
    keyword: Keyword = Field(default_factory=Keyword)
    """The keyword index."""


class Column(_Model):
    name: Str64
    """The column's name in the SQL table."""
    type: ColumnType = "TEXT"
    """Its SQL type: TEXT, INTEGER, REAL or NUMERIC."""
    description: str | None = Field(None, max_length=256)
    """What the column holds, for the model that fills it and the one that queries it."""


class ArtifactType(_Model):
    name: Str64
    """The type's name (`Product`, `Risk factor`); its SQL table is the snake_case of it."""
    kind: Kind = "topic"
    """What is built: doc and page cards or a glossary (no model needed), or summaries, topics, entities,
    events (a model extracts them)."""
    scope: Scope | None = None
    """One artifact per document, or across the whole corpus; omitted, the kind's only scope."""
    icon: Str64 | None = None
    """An icon name for the console."""
    description: str | None = Field(None, max_length=512)
    """What an artifact of this type is: the extraction prompt reads it."""
    coverage: list[Str128] = Field(default_factory=list, max_length=32)
    """Aspects each artifact should cover (for summaries and topics)."""
    sections: list[Str128] = Field(default_factory=list, max_length=64)
    """The sections each artifact's Markdown has."""
    min_doc_count: int | None = Field(None, ge=1, le=64)
    """Keep a corpus artifact only when this many documents mention it."""
    format: Format = "markdown"
    """`markdown` documents, or `sqlite` rows of a typed table with the columns below."""
    columns: list[Column] = Field(default_factory=list, max_length=64)
    """The typed table's columns (format `sqlite`)."""
    natural_key: list[Str64] = Field(default_factory=list, max_length=16)
    """Columns that identify a row: rows with the same key are one artifact."""

    @property
    def resolved_scope(self) -> Scope:
        """A kind with a single allowed scope takes it when `scope` is omitted (§3.3)."""
        if self.scope is not None:
            return self.scope
        scopes = KIND_RULES[self.kind][0]
        return "document" if scopes == {"document"} else "corpus"

    @property
    def table_name(self) -> str:
        return snake_case(self.name)

    @property
    def slug(self) -> str:
        return slugify(self.name)


class EdgeType(_Model):
    name: Str64
    """The relation's name (`supplies`, `reports_to`)."""
    from_: Str64 = Field(alias="from")
    """The artifact type an edge starts at."""
    to: Str64
    """The artifact type it ends at."""
    description: str | None = Field(None, max_length=512)
    """What the relation means, for the model that finds it."""
    attributes: list[Str64] = Field(default_factory=list, max_length=16)
    """Fields an edge carries (a date, an amount)."""


class ArtifactsConfig(_Model):
    enabled: bool | None = None
    """Build artifacts; unset, on when types are declared."""
    artifact_model: str = Field("lite", max_length=128)
    """The model that extracts artifacts: a catalog id or a tier (`lite`, `standard`, `pro`; a tier counts
    only where config.toml maps it)."""
    artifact_types: list[ArtifactType] = Field(default_factory=list, max_length=32)
    """The artifact types to build."""
    edge_types: list[EdgeType] = Field(default_factory=list, max_length=32)
    """The relations between artifacts to find."""
    min_doc_count: int = Field(1, ge=1, le=64)
    """Keep a corpus artifact only when this many documents mention it (the default for every type)."""
    max_tokens: int = Field(1500, ge=128, le=8192)
    """Most output tokens of one extraction call."""
    max_doc_chars: int = Field(60000, ge=1000, le=2_000_000)
    """Characters of a document one extraction reads; longer ones are read in windows."""
    extraction_window_chars: int = Field(0, ge=0, le=1_000_000)
    """Characters per extraction window (0: `max_doc_chars`)."""
    mention_max_chars: int = Field(400, ge=100, le=4000)
    """Most characters of one quoted mention."""
    max_mentions_per_artifact: int = Field(40, ge=1, le=500)
    """Most mentions kept per artifact."""
    mention_context_chars: int = Field(8000, ge=1000, le=100_000)
    """Characters around mentions a corpus artifact's writer reads."""
    max_artifacts_per_type: int = Field(10000, ge=1, le=10_000)
    """Most artifacts of one type."""
    #: Sleuth: the most tokens (input + output) one curate may spend on model extraction; it stops
    #: cleanly with what it built. Unset: no limit. `sleuth compile --max-tokens` overrides it.
    token_budget: int | None = Field(None, ge=1_000, le=10_000_000_000)
    """The most tokens one curate may spend on model extraction; it stops cleanly with what it built.
    Unset: no limit."""

    @property
    def is_enabled(self) -> bool:
        """Sleuth: absent + types declared means on; an explicit `false` wins (§3.2)."""
        if self.enabled is None:
            return bool(self.artifact_types)
        return self.enabled


class CurateManifest(_Model):
    chunks: ChunksConfig = Field(default_factory=ChunksConfig)
    """Chunking and the indexes."""
    artifacts: ArtifactsConfig = Field(default_factory=ArtifactsConfig)
    """Curated artifacts: summaries, entities, typed tables, edges."""


class OptimizeManifest(_Model):
    """Stored so Nexus manifests round-trip; Sleuth has no optimize workflow yet (§3.5)."""

    schedule: str = Field("0 * * * *", max_length=128)
    """When optimization would run (cron); stored, not used yet."""
    latency_threshold_ms: int = Field(60000, ge=0, le=600_000)
    """Turns slower than this would be optimized; stored, not used yet."""
    min_group_size: int = Field(2, ge=1, le=100)
    """Smallest group of similar questions to optimize; stored, not used yet."""
    eval_pass_rate_threshold: float = Field(1.0, ge=0, le=1)
    """Pass rate an optimization must keep; stored, not used yet."""
    max_iterations: int = Field(20, ge=1, le=100)
    """Most optimization rounds; stored, not used yet."""


class SearchManifest(_Model):
    instructions: str | None = Field(None, max_length=16000)
    """Instructions every turn over this context follows (the model reads them with the orientation)."""


class Manifest(_Model):
    curate: CurateManifest = Field(default_factory=CurateManifest)
    """What a compile builds: chunks, indexes and artifacts."""
    optimize: OptimizeManifest = Field(default_factory=OptimizeManifest)
    """Optimization settings (kept for the Nexus contract; Sleuth has no optimize workflow yet)."""
    search: SearchManifest = Field(default_factory=SearchManifest)
    """How turns over this context search and answer."""
    #: Outside `curate`, so marking a text changes no build and no cache key.
    model_written: list[Fingerprint] = Field(default_factory=list, max_length=MAX_MODEL_WRITTEN)
    """Fingerprints of the descriptions a model proposed (explore) that no person has changed yet: a
    turn's prompt leaves such a description out. Edit the text, or delete its fingerprint here, to let
    turns read it (from the next version on: a turn reads its pinned version's manifest)."""

    @model_validator(mode="after")
    def _check_rules(self) -> Manifest:
        problems = list(_rule_problems(self))
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def type_named(self, name: str) -> ArtifactType | None:
        folded = name.casefold()
        return next((t for t in self.curate.artifacts.artifact_types if t.name.casefold() == folded), None)

    def curate_hash(self) -> str:
        """Hash of the `curate` section: a change re-runs the compile legs (§5.2)."""
        # The budget bounds what a run may spend, not what it builds: changing it redoes nothing.
        payload = self.curate.model_dump(mode="json", by_alias=True, exclude={"artifacts": {"token_budget"}})
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def chunk_leg_hash(self) -> str:
        """Hash of what decides chunks and their vectors: a change re-chunks every source."""
        chunks = self.curate.chunks
        payload = chunks.model_dump(mode="json")
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class ManifestError(Invalid, ValueError):
    """A manifest broke a bound or a rule; `problems` lists each as `path: message`."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid manifest:\n" + "\n".join(f"  - {p}" for p in problems))


def _rule_problems(m: Manifest) -> list[str]:
    problems: list[str] = []
    chunks = m.curate.chunks
    chunking = chunks.chunking
    if chunking.overlap >= chunking.target_size:
        problems.append(
            f"curate.chunks.chunking.overlap: must be < target_size "
            f"({chunking.overlap} >= {chunking.target_size})"
        )
    if not chunks.enabled and not chunks.keyword.enabled:
        problems.append(
            "curate.chunks: enabled=false (no dense vectors) with keyword.enabled=false "
            "(no BM25) leaves nothing to search"
        )
    if chunks.embedding_model not in EMBEDDING_MODELS:
        problems.append(
            f"curate.chunks.embedding_model: unknown model {chunks.embedding_model!r}; "
            f"available: {', '.join(EMBEDDING_MODELS)}"
        )
    arts = m.curate.artifacts
    seen_names: dict[str, int] = {}
    seen_tables: dict[str, int] = {}
    for i, t in enumerate(arts.artifact_types):
        path = f"curate.artifacts.artifact_types[{i}]"
        if not t.name.strip():
            problems.append(f"{path}.name: must not be empty")
        if t.name.startswith("_"):
            problems.append(f"{path}.name: must not start with '_' ({t.name!r})")
        if t.table_name.startswith("sqlite_"):  # SQLite reserves these table names for itself
            problems.append(
                f"{path}.name: its table would be {t.table_name!r}; names starting sqlite_ are SQLite's"
            )
        folded = t.name.casefold()
        if folded in seen_names:
            problems.append(
                f"{path}.name: {t.name!r} duplicates artifact_types[{seen_names[folded]}] "
                "(names are case-insensitive)"
            )
        else:
            seen_names[folded] = i
            table = t.table_name
            if table in seen_tables:
                problems.append(
                    f"{path}.name: table name {table!r} collides with artifact_types[{seen_tables[table]}]"
                )
            seen_tables.setdefault(table, i)
        scopes, formats = KIND_RULES[t.kind]
        if t.resolved_scope not in scopes:
            problems.append(
                f"{path}.scope: kind {t.kind!r} allows scope {' or '.join(sorted(scopes))}, "
                f"not {t.resolved_scope!r}"
            )
        if t.format not in formats:
            problems.append(
                f"{path}.format: kind {t.kind!r} allows format {' or '.join(sorted(formats))}, "
                f"not {t.format!r}"
            )
        if t.format == "sqlite":
            if not t.columns:
                problems.append(f"{path}.columns: a sqlite type must declare at least one column")
            column_names = {snake_case(c.name) for c in t.columns}
            for k, key in enumerate(t.natural_key):
                if snake_case(key) not in column_names:
                    problems.append(f"{path}.natural_key[{k}]: {key!r} is not a declared column")
        else:
            if t.columns:
                problems.append(f"{path}.columns: only allowed with format 'sqlite'")
            if t.natural_key:
                problems.append(f"{path}.natural_key: only allowed with format 'sqlite'")
        if t.kind == "glossary":
            if not t.sections:
                problems.append(f"{path}.sections: a glossary type needs at least one section")
        elif t.sections:
            problems.append(f"{path}.sections: only allowed with kind 'glossary'")
    types_by_name = {t.name.casefold(): t for t in arts.artifact_types}
    edge_names: set[str] = set()
    for i, e in enumerate(arts.edge_types):
        path = f"curate.artifacts.edge_types[{i}]"
        if e.name in edge_names:
            problems.append(f"{path}.name: duplicate edge type {e.name!r}")
        edge_names.add(e.name)
        for end, value in (("from", e.from_), ("to", e.to)):
            target = types_by_name.get(value.casefold())
            if target is None:
                problems.append(f"{path}.{end}: {value!r} is not a declared artifact type")
            elif target.format != "markdown":
                problems.append(
                    f"{path}.{end}: {value!r} has format {target.format!r}; edges join markdown types only"
                )
    return problems


def parse_manifest(data: Any) -> Manifest:
    """Validate a manifest document; raise `ManifestError` naming every problem."""
    if not isinstance(data, dict):
        raise ManifestError([f"(root): must be a JSON object, not {type(data).__name__}"])
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        raise ManifestError(_describe(exc)) from None


def read_manifest_file(path: Path) -> dict[str, Any]:
    """The JSON document in `path`, validated; unreadable or invalid JSON is a `ManifestError`."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError([f"(file): cannot read {path}: {exc}"]) from None
    except json.JSONDecodeError as exc:
        raise ManifestError([f"(file): {path} is not valid JSON: {exc}"]) from None
    parse_manifest(data)
    return data  # type: ignore[no-any-return]


def load_manifest(path: Path) -> Manifest:
    return parse_manifest(read_manifest_file(path))


def _describe(exc: ValidationError) -> list[str]:
    problems: list[str] = []
    for err in exc.errors():
        loc = ".".join(f"[{part}]" if isinstance(part, int) else str(part) for part in err["loc"]).replace(
            ".[", "["
        )
        msg = err["msg"]
        if msg.startswith("Value error, "):
            # Rule problems are already `path: message` strings joined by "; ".
            problems.extend(msg.removeprefix("Value error, ").split("; "))
            continue
        problems.append(f"{loc or '(root)'}: {msg}")
    return problems


def snake_case(name: str) -> str:
    """`Meeting Attendance` → `meeting_attendance`: the typed table and column naming rule."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", ascii_name)
    out = re.sub(r"[^0-9a-zA-Z]+", "_", spaced).strip("_").lower()
    if not out:
        out = "t"
    if out[0].isdigit():
        out = "t_" + out
    return out
