"""What a curate would build, before it runs (issue 14, item 2: the design view's preview).

For each declared artifact type: who builds it (Sleuth's deterministic builders, the curation model,
or nobody because it needs a model and none is chosen); for the sources: which are new, which changed
since the last curate (size or modification time differ: a file only touched counts too, as curate's
own first check does) and which were removed. Nothing is parsed and no model is called, so the preview
is cheap enough to show on every save; the profile (`extraction.profile`) adds the cost.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from sleuth.compile.extraction.choose import type_needs_model
from sleuth.compile.manifest import ArtifactType, Manifest
from sleuth.compile.sources import list_source_files
from sleuth.store.contexts.home import ContextDir
from sleuth.store.contexts.ledger import Ledger

Builder = Literal["sleuth", "model", "skipped"]


@dataclass(frozen=True)
class TypePreview:
    type: str
    kind: str
    scope: str
    format: str
    built_by: Builder
    note: str


@dataclass(frozen=True)
class SourcesPreview:
    total: int
    new: list[str]
    changed: list[str]
    removed: list[str]
    unchanged: int


@dataclass(frozen=True)
class CuratePreview:
    model: str | None
    types: list[TypePreview]
    sources: SourcesPreview

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _type_preview(t: ArtifactType, has_model: bool) -> tuple[Builder, str]:
    if not type_needs_model(t):
        return "sleuth", "built from the parsed pages, no model"
    if t.format == "sqlite":
        if has_model:
            return "model", "rows from the sources' tables, and rows in prose by the model"
        return "sleuth", "rows from the sources' tables only; rows written in prose need a model"
    if has_model:
        return "model", f"kind {t.kind!r} is extracted by the model, each claim with a verified quote"
    return "skipped", f"kind {t.kind!r} needs a model and none is chosen (curate.artifacts.artifact_model)"


def preview_curate(manifest: Manifest, ctx: ContextDir, model_id: str | None) -> CuratePreview:
    """The plan of the next curate of `ctx` under `manifest`, `model_id` the curation model (or None)."""
    arts = manifest.curate.artifacts
    types = []
    if arts.is_enabled:
        for t in arts.artifact_types:
            built_by, note = _type_preview(t, model_id is not None)
            types.append(TypePreview(t.name, t.kind, t.resolved_scope, t.format, built_by, note))
    ledger = Ledger.load(ctx.ledger_file)
    on_disk = list_source_files(ctx.sources)
    new, changed = [], []
    for rel in on_disk:
        known = ledger.manifest.get(rel)
        st = (ctx.sources / rel).stat()
        if known is None:
            new.append(rel)
        elif (known.size, known.mtime) != (st.st_size, st.st_mtime):
            changed.append(rel)
    present = set(on_disk)
    removed = sorted(rel for rel in ledger.manifest if rel not in present)
    sources = SourcesPreview(len(on_disk), new, changed, removed, len(on_disk) - len(new) - len(changed))
    return CuratePreview(model_id, types, sources)
