"""Which extractor a curate uses (spec/context.md §5.4): the run's model (`sleuth compile --model`, the
curate request's `model`), else the manifest's `curate.artifacts.artifact_model` (a tier or a catalog
id), resolved through the model catalog. A tier that maps to the offline planner, a model without its
key, or a manifest with nothing a model would build all give `NoModelExtractor`: the context is then
compiled exactly as without a model, and the skipped kinds are reported."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sleuth.compile.extract import Extractor, NoModelExtractor
from sleuth.compile.extraction.cache import ExtractionCache
from sleuth.compile.extraction.extractor import ModelExtractor
from sleuth.compile.manifest import DETERMINISTIC_KINDS, ArtifactType, Manifest
from sleuth.models.base import CompletionParams, Message, Model, ModelConfig, ModelError, Reply, ToolSpec
from sleuth.models.catalog import OFFLINE_ID, TIERS, Catalog, CatalogError, build_model
from sleuth.settings import Settings
from sleuth.store.contexts.home import ContextDir


@dataclass(frozen=True)
class Choice:
    extractor: Extractor
    note: str | None = None  # why no model is used, when one was asked for but cannot be


def type_needs_model(t: ArtifactType) -> bool:
    """Whether the type has something only a model builds: a model kind, or rows written in prose."""
    return t.kind not in DETERMINISTIC_KINDS or t.format == "sqlite"


def needs_model(manifest: Manifest) -> bool:
    """Whether any declared type has something only a model builds."""
    arts = manifest.curate.artifacts
    if not arts.is_enabled:
        return False
    return any(type_needs_model(t) for t in arts.artifact_types)


def curation_model(
    manifest: Manifest,
    catalog: Catalog,
    model: str | None = None,
    *,
    check_available: bool = True,
    allow_specs: bool = True,
) -> tuple[ModelConfig | None, str | None]:
    """The catalog entry curation would call, or None with why not. A model the run names must
    resolve and be available (`CatalogError`); the manifest's falls back to none with a note. A tier
    counts only when config.toml maps it, so no curate spends tokens unless someone asked it to."""
    wanted = model or manifest.curate.artifacts.artifact_model
    if model is None and wanted in TIERS and wanted not in catalog.tiers:
        # Spending is opted into: an unmapped tier does not fall back to the answering default.
        configured = [m for m in catalog.models if m != OFFLINE_ID]
        if not configured:
            return None, None  # no model at all, as asked: the types that need one say so
        return None, (
            f"artifact_model is the {wanted!r} tier, which {catalog.where} does not map: add "
            f'`{wanted} = "<model id>"` under [tiers] there (models here: {", ".join(configured)}), or '
            "name a model for this curate (sleuth compile --model)"
        )
    try:
        config = catalog.resolve(wanted, allow_specs=allow_specs and model is not None)
    except CatalogError as exc:
        if model is not None:
            raise
        return None, f"artifact_model {wanted!r}: {exc}"
    if config.provider == "offline":
        return None, None
    if check_available and not catalog.available(config):
        note = catalog.missing(config) or f"model {config.id!r} is not available here"
        if model is not None:
            raise CatalogError(note)
        return None, note
    return config, None


def choose_extractor(
    ctx: ContextDir,
    manifest: Manifest,
    catalog: Catalog,
    *,
    settings: Settings,
    model: str | None = None,
    token_budget: int | None = None,
    env: Mapping[str, str] | None = None,
    built: Model | None = None,
) -> Choice:
    """The extractor for one curate, its calls paced by the process's `settings`. `model` (the run's
    choice) must resolve, or `CatalogError`; the manifest's choice falls back to no model with a note.
    `built` replaces the adapter (tests)."""
    if not needs_model(manifest):
        return Choice(NoModelExtractor())
    config, note = curation_model(manifest, catalog, model, check_available=built is None)
    if config is None:
        return Choice(NoModelExtractor(), note)
    budget = token_budget if token_budget is not None else manifest.curate.artifacts.token_budget
    adapter = built if built is not None else build_model(config, catalog.env if env is None else env)
    return Choice(
        ModelExtractor(adapter, manifest, ExtractionCache.of(ctx), settings=settings, token_budget=budget)
    )


class CacheOnlyModel:
    """A model that is never reached: a restore rebuilds the model-made artifacts from the packed
    extraction cache (spec/api.md §6.4: a restore never needs a model). A miss fails that item, the
    extraction is then incomplete, and the next curate with a real model fills it in."""

    def __init__(self, model_id: str) -> None:
        self.config = ModelConfig(id=model_id, provider="offline", model=model_id)

    def complete(self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams) -> Reply:
        raise ModelError(f"{self.config.id}: not in the extraction cache, and a restore calls no model")


def restore_extractor(ctx: ContextDir, manifest: Manifest, recorded: str, settings: Settings) -> Extractor:
    """The extractor of a restore: the packed cache under the model that filled it (`recorded`, the
    pack ledger's extractor leg), else none; `settings` are the process's."""
    recorded = recorded.removesuffix("+incomplete")
    if recorded == "none" or not needs_model(manifest):
        return NoModelExtractor()
    model_id = recorded.split("|", 1)[0]
    cache = ExtractionCache.of(ctx)
    return ModelExtractor(CacheOnlyModel(model_id), manifest, cache, settings=settings, fingerprint=recorded)
