"""Routes: the live version's knowledge tree: list, stats, read, and an artifact file with its front
matter parsed (spec/api.md §6.4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import FileResponse

from sleuth.api.auth import AnyKey
from sleuth.api.errors import ApiError
from sleuth.api.file_trees import EMPTY_LISTING, dir_listing, file_response, resolve_file, tree_stats
from sleuth.api.state import api_state
from sleuth.format.front_matter import split_front_matter
from sleuth.server.context_files import find_context, safe_rel
from sleuth.store.contexts.home import ContextDir

router = APIRouter()


def _knowledge_root(ctx: ContextDir) -> Path | None:
    live = ctx.live_version()
    return ctx.version_dir(live) / "knowledge" if live else None


@router.get("/contexts/{slug}/knowledge/list")
def list_knowledge_root(request: Request, slug: str, _who: AnyKey) -> dict[str, Any]:
    return list_knowledge(request, slug, "", _who)


@router.get("/contexts/{slug}/knowledge/list/{path:path}")
def list_knowledge(request: Request, slug: str, path: str, _who: AnyKey) -> dict[str, Any]:
    """The live version's knowledge tree; empty before the first flip."""
    root = _knowledge_root(find_context(api_state(request), slug))
    if root is None:
        if path.strip("/"):
            safe_rel(path)
            raise ApiError(404, "path_not_found", "the context has no live version yet", path=path)
        return EMPTY_LISTING.copy()
    return dir_listing(root, path, missing_root_is_empty=True)


@router.get("/contexts/{slug}/knowledge/stats")
def knowledge_stats(request: Request, slug: str, _who: AnyKey) -> dict[str, Any]:
    root = _knowledge_root(find_context(api_state(request), slug))
    return tree_stats(root) if root is not None else {"file_count": 0, "dir_count": 0, "total_size": 0}


def _live_file(request: Request, slug: str, path: str) -> Path:
    """`path` in the live knowledge tree; `404 path_not_found` before the first flip."""
    root = _knowledge_root(find_context(api_state(request), slug))
    if root is None:
        safe_rel(path)
        raise ApiError(404, "path_not_found", "the context has no live version yet", path=path)
    return resolve_file(root, path)


@router.get("/contexts/{slug}/knowledge/read/{path:path}")
def read_knowledge(request: Request, slug: str, path: str, _who: AnyKey) -> FileResponse:
    return file_response(_live_file(request, slug, path))


@router.get("/contexts/{slug}/knowledge/artifact/{path:path}")
def read_artifact_file(request: Request, slug: str, path: str, _who: AnyKey) -> dict[str, Any]:
    """An artifact or roster file of the live version, its YAML front matter parsed: what a client
    shows (type, provenance with quotes, sources) without a YAML parser of its own."""
    file = _live_file(request, slug, path)
    if not path.endswith(".md"):
        raise ApiError(
            400, "invalid_request", "only Markdown artifact and roster files have front matter", path=path
        )
    front, body = split_front_matter(file.read_text("utf-8", errors="replace"))
    return {"path": path, "front_matter": jsonable_encoder(front), "body": body}
