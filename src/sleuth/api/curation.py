"""Routes: curation (spec/api.md §6.3): start a curate, read the ledger, delete sources with a
deletion-only curate. A curate is `CompileRun` under `curate_lock`, run as a background task
(api/tasks.py).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Request
from pydantic import Field

from sleuth.api.auth import AdminKey, AnyKey
from sleuth.api.errors import ApiError
from sleuth.api.file_trees import resolve_in
from sleuth.api.state import api_state, task_service
from sleuth.compile.extraction.cache import ExtractionCache
from sleuth.compile.extraction.choose import curation_model, needs_model
from sleuth.compile.extraction.profile import current_pages, profile_curate
from sleuth.compile.manifest import parse_manifest
from sleuth.compile.preview import preview_curate
from sleuth.models.base import ModelConfig
from sleuth.models.catalog import CatalogError
from sleuth.server.context_files import (
    EXCLUSIVE_WORKFLOWS,
    StrictBody,
    conflict_check,
    find_context,
    has_sources,
    manifest_or_400,
    safe_rel,
    tree_lock,
)
from sleuth.server.curation import start_curate_task
from sleuth.server.state import Server
from sleuth.store.contexts.ledger import Ledger
from sleuth.store.files import prune_empty_dirs

router = APIRouter()


class CurateRequest(StrictBody):
    force: bool = False
    model: str | None = Field(None, min_length=1, max_length=256)
    legs: list[Literal["chunks", "artifacts"]] | None = Field(None, min_length=1, max_length=2)
    #: Sleuth: stop model extraction once this many tokens are spent (overrides the manifest's).
    max_tokens: int | None = Field(None, ge=1_000, le=10_000_000_000)
    # Contract fields Sleuth accepts and ignores (§13).
    pinecone_api_key: Any = None
    batch_size: Any = None
    scope: Any = None
    trigger: Any = None


class DeleteSourcesRequest(StrictBody):
    sources: list[str] = Field(min_length=1, max_length=10_000)


def model_or_400(state: Server, name: str) -> ModelConfig:
    """The catalog entry a request's `model` names (an id or a tier), or `400 model_unavailable`
    saying why it cannot run on this server (`Catalog.usable`)."""
    return state.runtime.catalog.usable(name)


@router.post("/contexts/{slug}/curate")
def start_curate(
    request: Request,
    slug: str,
    who: AdminKey,
    body: Annotated[CurateRequest | None, Body()] = None,
) -> dict[str, Any]:
    """Start a curate task: incremental, or with `force` a full rebuild (ledger discarded)."""
    state, service = api_state(request), task_service(request)
    ctx = find_context(state, slug)
    body = body or CurateRequest()
    if body.model is not None:
        model_or_400(state, body.model)
    if not has_sources(ctx):
        raise ApiError(409, "no_sources", "the context has no sources: upload files first")
    task_input = {
        "force": body.force,
        "model": body.model,
        "max_tokens": body.max_tokens,
        "legs": body.legs,
        "trigger": "api",
    }
    with service.claiming():
        conflict_check(service, ctx, EXCLUSIVE_WORKFLOWS)
        chunks_only = body.legs is not None and "artifacts" not in body.legs
        task = start_curate_task(state, service, ctx, who.name, task_input, body.force, chunks_only)
    return {"task_id": task["id"], "state": "curating"}


class ProfileRequest(StrictBody):
    model: str | None = Field(None, min_length=1, max_length=256)
    #: A manifest to preview instead of the saved one (the design view's unsaved edits); checked like
    #: `PUT /contexts/{slug}`, never stored.
    manifest: dict[str, Any] | None = None


@router.post("/contexts/{slug}/curate/profile")
def profile_curation(
    request: Request,
    slug: str,
    _who: AdminKey,
    body: Annotated[ProfileRequest | None, Body()] = None,
) -> dict[str, Any]:
    """What a curate would build (`preview`: each type's builder, the new, changed and removed
    sources) and, with a model, what it would cost (calls, tokens, time, cost per type, low/high),
    before anything is spent. `model: null` means no model would be called, and `reason` says why."""
    state = api_state(request)
    ctx = find_context(state, slug)
    asked = body or ProfileRequest()
    written = ctx.manifest_data() if asked.manifest is None else manifest_or_400(asked.manifest)
    manifest = parse_manifest(written)
    catalog = state.runtime.catalog
    config, reason = None, "nothing in the manifest needs a model"
    if needs_model(manifest):
        try:
            config, note = curation_model(manifest, catalog, asked.model, allow_specs=False)  # as curate does
        except CatalogError as exc:
            raise ApiError(400, "model_unavailable", str(exc), field="model") from None
        reason = note or "artifact_model maps to the offline planner"
    plan = preview_curate(manifest, ctx, config.id if config is not None else None).to_json()
    if config is None:
        return {"model": None, "reason": reason, "preview": plan}
    settings = state.settings
    estimate = profile_curate(
        manifest,
        current_pages(ctx, max_text_bytes=settings.max_text_bytes),
        config,
        ExtractionCache.of(ctx),
        Ledger.load(ctx.ledger_file).extraction,
        concurrency=settings.curate_concurrency,
    )
    return {**estimate.to_json(), "preview": plan}


@router.get("/contexts/{slug}/curate")
def curation_state(request: Request, slug: str, _who: AnyKey) -> dict[str, Any]:
    """The curation ledger (`CurationState`, spec/context.md §6)."""
    ctx = find_context(api_state(request), slug)
    return Ledger.load(ctx.ledger_file).model_dump(mode="json")


@router.post("/contexts/{slug}/curate/delete-sources")
def delete_sources(request: Request, slug: str, body: DeleteSourcesRequest, who: AdminKey) -> dict[str, Any]:
    """Delete the named sources and start a deletion-only curate (no model calls)."""
    state, service = api_state(request), task_service(request)
    ctx = find_context(state, slug)
    wanted = [str(safe_rel(p)) for p in body.sources]
    deleted: list[str] = []
    not_found: list[str] = []
    with service.claiming():
        conflict_check(service, ctx, EXCLUSIVE_WORKFLOWS)
        with tree_lock(ctx), ctx.editing():  # shared before the curate that drops them starts
            for rel in wanted:
                target = resolve_in(ctx.sources, rel)
                if target.is_file() and not target.is_symlink():
                    target.unlink()
                    prune_empty_dirs(target.parent, ctx.sources)
                    deleted.append(rel)
                else:
                    not_found.append(rel)
        task_input = {"sources": wanted, "trigger": "delete-sources", "deletion_only": True}
        task = start_curate_task(state, service, ctx, who.name, task_input)
    return {"task_id": task["id"], "state": "curating", "deleted": deleted, "not_found": not_found}
