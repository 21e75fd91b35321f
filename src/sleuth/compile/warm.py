"""Warm one source ahead of a curate: its chunks' vectors computed into the shared embedding cache.

Embedding is most of a compile's cost (hundreds of pages/s parse, about ten embed, spec stack.md). A
curate on many workers therefore splits the corpus into sources that any worker warms (parse, chunk,
embed into `$SLEUTH_HOME/embedding-cache`), then one finalize runs the ordinary compile, which finds the
vectors cached. Nothing here writes the context: a warm that dies, or warms a text the compile then
chunks differently, costs time, never correctness, since the compile embeds whatever is not cached.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np

from sleuth.compile import artifacts as cards
from sleuth.compile.build import EMBED_BATCH, chunk_window, embedder_window, read_window
from sleuth.compile.chunking import chunk_pages
from sleuth.compile.documents import chunk_embed_texts, identified
from sleuth.compile.manifest import Manifest
from sleuth.compile.pages import ParseError
from sleuth.compile.parse import parse_source
from sleuth.compile.version_files import SourceState
from sleuth.models.embedder import EmbeddingCache, Vectors, embed_cached, get_embedder, text_sha
from sleuth.settings import Settings
from sleuth.store.contexts.home import ContextDir, Home


def warm_source(
    ctx: ContextDir,
    home: Home,
    manifest: Manifest,
    rel: str,
    hand_over: Callable[[dict[str, Vectors]], None] | None = None,
    *,
    settings: Settings,
) -> int:
    """Embed `rel`'s chunks into the cache as the compile will, under the process's `settings`; returns
    how many texts were computed (0 when all were cached, chunks are not embedded, or the source cannot
    be read). `hand_over` gets the source's vectors when the compile runs on another machine, with a
    cache of its own."""
    chunks_config = manifest.curate.chunks
    if not chunks_config.enabled:
        return 0
    try:
        parsed = parse_source(ctx.sources / rel, max_text_bytes=settings.max_text_bytes)
    except ParseError:
        return 0  # the compile reports it
    state = identified(
        SourceState(
            path=rel,
            title=cards.document_title(rel, parsed.title, parsed.pages),
            format=parsed.format,
            pages=len(parsed.pages),
            chars=parsed.chars,
            sha256="",
            size=0,
            mtime=0.0,
            curated_at="",
            images_skipped=parsed.images_skipped,
        ),
        parsed.pages,
    )
    window = embedder_window(manifest, state, embed_threads=settings.embed_threads)
    chunking = chunks_config.chunking
    chunks = chunk_pages(rel, parsed.pages, chunking, chunk_window(chunking, window))
    read_in = read_window(chunking, window)
    texts = [text for chunk in chunks for text in chunk_embed_texts(chunk, state, read_in)]
    embedder = get_embedder(chunks_config.embedding_model, threads=settings.embed_threads)
    cache = EmbeddingCache.for_embedder(home.embedding_cache_dir, embedder)
    computed = 0
    try:
        for begin in range(0, len(texts), EMBED_BATCH):
            computed += embed_cached(embedder, cache, texts[begin : begin + EMBED_BATCH])[1]
        if hand_over is not None and texts:
            hand_over(cache.get_many([text_sha(t) for t in texts]))
    finally:
        cache.close()
    return computed


def pack_vectors(items: dict[str, Vectors]) -> bytes:
    """Vectors by text SHA as one `.npz` (no pickles: only a string and a float32 array)."""
    buffer = io.BytesIO()
    shas = np.array(list(items), dtype="U64")
    vectors = np.stack(list(items.values())) if items else np.zeros((0, 0), dtype=np.float32)
    np.savez(buffer, shas=shas, vectors=vectors.astype(np.float32))
    return buffer.getvalue()


def take_vectors(home: Home, manifest: Manifest, packed: bytes, *, embed_threads: int | None) -> int:
    """Put vectors another worker computed (`pack_vectors`) into this node's cache; returns how many.
    Vectors of another dimension (another model) are ignored. `embed_threads`: the process's setting,
    which names its embedder."""
    with np.load(io.BytesIO(packed), allow_pickle=False) as data:
        shas, vectors = [str(s) for s in data["shas"]], data["vectors"]
    embedder = get_embedder(manifest.curate.chunks.embedding_model, threads=embed_threads)
    if not shas or vectors.shape != (len(shas), embedder.dim):
        return 0
    cache = EmbeddingCache.for_embedder(home.embedding_cache_dir, embedder)
    try:
        cache.put_many(dict(zip(shas, vectors, strict=True)))
    finally:
        cache.close()
    return len(shas)
