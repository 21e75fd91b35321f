"""Route: the built-in manifest templates (spec/api.md §7.2, spec/context.md §9)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
from pydantic import Field

from sleuth.api.auth import AnyKey
from sleuth.api.curation import model_or_400
from sleuth.api.errors import ApiError
from sleuth.api.state import api_state
from sleuth.compile.explore_model import propose
from sleuth.compile.extraction.cache import ExtractionCache
from sleuth.compile.manifest import Manifest
from sleuth.compile.templates import TEMPLATES, without_model
from sleuth.models.base import Model
from sleuth.server.context_files import StrictBody, find_context
from sleuth.server.state import Server

router = APIRouter()


@router.get("/manifest/templates")
def manifest_templates(_who: AnyKey) -> dict[str, Any]:
    """The built-in templates; a client preselects `default_id`. A context created without a
    manifest uses `{}`, not the default template. Each says what it builds `without_model`."""
    templates = [{**t, "without_model": without_model(t)} for t in TEMPLATES]
    return {"version": 1, "default_id": "general", "templates": templates}


@router.get("/manifest/schema")
def manifest_schema(_who: AnyKey) -> dict[str, Any]:
    """The manifest's JSON Schema, from the model that validates it: a client builds its form from it
    (choices for the enumerated fields, the optional fields a manifest does not have yet)."""
    schema: dict[str, Any] = Manifest.model_json_schema()
    return schema


class ExploreRequest(StrictBody):
    #: A catalog id or tier: the model that adapts the rules' proposal to the corpus. Omitted, the
    #: rules' proposal alone (no tokens are spent unless someone asks).
    model: str | None = Field(None, min_length=1, max_length=256)


def _explore_model(state: Server, name: str, admin: bool) -> tuple[str, Model]:
    """The provider model a request names; 400 when it cannot run here, 403 for a query key (a model
    spends the operator's tokens, as a curate does)."""
    if not admin:
        raise ApiError(403, "forbidden", "exploring with a model spends tokens: an admin key is needed")
    config = model_or_400(state, name)
    if config.provider == "offline":
        raise ApiError(400, "model_unavailable", f"{config.id} is the offline planner", field="model")
    return config.id, state.runtime.model_factory(config)


@router.post("/contexts/{slug}/explore")
def explore_context(
    request: Request,
    slug: str,
    who: AnyKey,
    body: Annotated[ExploreRequest | None, Body()] = None,
) -> dict[str, Any]:
    """The template that fits the context's sources (`compile.explore`): its manifest, a confidence and
    the reasons, from a bounded sample of the sources as a curate reads them. With `model`, that model
    adapts the proposal to the corpus (`compile.explore_model`); when it fails, the rules' proposal
    comes back with `model_note` saying why. Nothing is stored; the design view offers it before the
    first curate."""
    state = api_state(request)
    ctx = find_context(state, slug)
    asked = None
    if body and body.model:  # the context's extraction cache keeps the reply: asking again is free
        asked = (*_explore_model(state, body.model, who.is_admin), ExtractionCache.of(ctx))
    answer = propose(ctx.sources, asked, settings=state.settings)
    if answer is None:
        raise ApiError(409, "no_sources", "the context has no sources to explore: upload files first")
    return answer
