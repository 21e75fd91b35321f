"""Routes: the page viewer's reads (issue 14, item 5) over the live version of a context.

- `GET /contexts/{slug}/pages/{path}?page=N` → the stored text of that page (every format), how many
  pages the source has, and the chunks and artifact quotes on the page (`store.page_marks`);
- `GET /contexts/{slug}/pages/{path}/image?page=N&width=W` → a PDF page as a PNG;
- `GET /contexts/{slug}/pages/{path}/boxes?page=N&start=S&end=E` → where `text[S:E]` is on the page,
  from the PDF's text layer (one box per line, PDF points from the top left).

A path is looked up among the live version's own sources (a key, never a join), so a request cannot
name a file outside the context; the PDF read is the file in the source tree now, and `current` says
whether its page still has the text the version stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from sleuth.api.auth import AnyKey
from sleuth.api.errors import ApiError
from sleuth.api.file_trees import resolve_file
from sleuth.api.state import api_state
from sleuth.server.context_files import find_context, live_version_dir
from sleuth.store.version.page_images import MAX_IMAGE_WIDTH, NotAPdf, PageNotFound, render_png, span_boxes
from sleuth.store.version.page_marks import page_marks
from sleuth.store.version.search import VersionReader

router = APIRouter()
PageNumber = Annotated[int, Query(ge=1, le=1_000_000)]
Offset = Annotated[int, Query(ge=0, le=100_000_000)]


def _read_page(request: Request, slug: str, path: str, page: int) -> tuple[Any, str, VersionReader]:
    ctx = find_context(api_state(request), slug)
    reader = VersionReader(live_version_dir(ctx))
    if path not in reader.page_files:
        raise ApiError(404, "path_not_found", f"no source {path!r} in the live version", path=path)
    text = reader.page_text(path, page)
    if text is None:
        raise ApiError(404, "page_not_found", f"{path} has no page {page}", path=path, page=page)
    return ctx, text, reader


@contextmanager
def _pdf_errors(path: str, page: int) -> Iterator[None]:
    """What reading the PDF itself can answer: another format (415) or a page it lacks (404)."""
    try:
        yield
    except NotAPdf as exc:
        raise ApiError(415, "not_a_pdf", str(exc), path=path) from None
    except PageNotFound as exc:
        raise ApiError(404, "page_not_found", str(exc), path=path, page=page) from None


@router.get("/contexts/{slug}/pages/{path:path}/image")
def page_image(
    request: Request, slug: str, path: str, _who: AnyKey, page: PageNumber, width: int = 1200
) -> Response:
    ctx, _text, _reader = _read_page(request, slug, path, page)
    if not 100 <= width <= MAX_IMAGE_WIDTH:
        raise ApiError(400, "invalid_request", f"width must be 100–{MAX_IMAGE_WIDTH}", field="width")
    with _pdf_errors(path, page):
        png = render_png(resolve_file(ctx.sources, path), page, width)
    return Response(png, media_type="image/png", headers={"cache-control": "private, max-age=300"})


def _check_span(start: int, end: int, size: int) -> None:
    """`400 invalid_request` naming the offset that is out of place: `start` when it is past the
    page (no `end` could follow it), else `end` (past the page, or not after `start`)."""
    if start >= size:
        raise ApiError(
            400, "invalid_request", f"start must be below the page's {size} characters", field="start"
        )
    if not start < end <= size:
        raise ApiError(400, "invalid_request", f"end must be from {start + 1} to {size}", field="end")


@router.get("/contexts/{slug}/pages/{path:path}/boxes")
def page_boxes(
    request: Request, slug: str, path: str, _who: AnyKey, page: PageNumber, start: Offset, end: Offset
) -> dict[str, Any]:
    ctx, text, _reader = _read_page(request, slug, path, page)
    _check_span(start, end, len(text))
    with _pdf_errors(path, page):
        found = span_boxes(resolve_file(ctx.sources, path), page, text, start, end)
    return {**asdict(found), "text": text[start:end]}


@router.get("/contexts/{slug}/pages/{path:path}")
def page_text(request: Request, slug: str, path: str, _who: AnyKey, page: PageNumber) -> dict[str, Any]:
    _ctx, text, reader = _read_page(request, slug, path, page)
    marks = page_marks(reader.root, path, page)
    return {
        "path": path,
        "page": page,
        "pages": reader.page_count(path),
        "label": reader.page_label(path, page),
        "text": text,
        "pdf": path.lower().endswith(".pdf"),
        "chunks": [asdict(c) for c in marks.chunks],
        "artifacts": [asdict(a) for a in marks.artifacts],
    }
