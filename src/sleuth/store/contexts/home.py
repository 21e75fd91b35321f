"""The data directory and the contexts in it (spec/context.md §7).

Contexts live under `contexts/<ctx_id>/` so renaming a slug moves nothing; `context.json` maps the
slug to the id. Every JSON file is written to a temporary name and renamed into place, so a crash
never leaves half a file behind.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from sleuth.errors import Invalid, NotFound
from sleuth.store.files import link_tree, write_json_atomic, write_text_atomic

SLUG_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")


#: A project's own home: a `.sleuth` folder with contexts in it, in the working directory or a folder
#: above it (`make demo` makes one in the checkout).
PROJECT_HOME = ".sleuth"
#: In a shared context's working copy: present once the copy holds its sources and keeps them up to date
#: (`ContextDir.sources`).
SOURCES_MARK = ".replica-sources"


@dataclass(frozen=True)
class HomeChoice:
    """The home a process runs with and why: every entry point (CLI, server, MCP, eval) resolves it by
    `resolve_home`, and `sleuth contexts` prints it, so a context is never "missing" from a home nobody
    named."""

    path: Path
    #: `SLEUTH_HOME`, `project` (a `.sleuth` found from the working directory), `XDG_DATA_HOME` or
    #: `default` (`~/.local/share/sleuth`).
    source: str

    def describe(self) -> str:
        why = {
            "SLEUTH_HOME": "from $SLEUTH_HOME",
            "project": f"the project's {PROJECT_HOME}, found from the working directory",
            "XDG_DATA_HOME": "from $XDG_DATA_HOME",
            "default": "the default; set SLEUTH_HOME to use another",
        }[self.source]
        return f"{self.path} ({why})"


def resolve_home(cwd: Path | None = None) -> HomeChoice:
    """`$SLEUTH_HOME`; else the nearest `.sleuth/` holding `contexts/` in the working directory or a
    folder above it (as git finds `.git`); else `$XDG_DATA_HOME/sleuth`; else `~/.local/share/sleuth`."""
    env = os.environ.get("SLEUTH_HOME")
    if env:
        return HomeChoice(Path(env).expanduser(), "SLEUTH_HOME")
    try:
        here = (cwd or Path.cwd()).resolve()
    except OSError:  # the working directory was removed
        here = None
    for folder in [here, *here.parents] if here is not None else []:
        if (folder / PROJECT_HOME / "contexts").is_dir():
            return HomeChoice(folder / PROJECT_HOME, "project")
    xdg = os.environ.get("XDG_DATA_HOME")
    if xdg:
        return HomeChoice(Path(xdg).expanduser() / "sleuth", "XDG_DATA_HOME")
    return HomeChoice(Path.home() / ".local" / "share" / "sleuth", "default")


def sleuth_home() -> Path:
    """The home this process runs with (`resolve_home`)."""
    return resolve_home().path


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ContextNotFound(NotFound, LookupError):
    pass


class InvalidSlug(Invalid, ValueError):
    pass


def check_slug(slug: str) -> str:
    if not SLUG_PATTERN.match(slug):
        raise InvalidSlug(
            f"invalid context name {slug!r}: use 1-64 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    return slug


@dataclass
class ContextInfo:
    """`context.json`: identity and description of one context."""

    id: str
    slug: str
    name: str
    description: str = ""
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)
    last_curated_at: str | None = None
    sample_queries: list[str] = field(default_factory=list)


class HeadView(Protocol):
    """What a home needs to know of a shared context's head (`replica.Head`)."""

    @property
    def id(self) -> str: ...
    @property
    def revision(self) -> int: ...


class SharedContexts(Protocol):
    """The port a home syncs its contexts through when many machines share them (`replica.Replica`):
    without one, the contexts on this disk are the only copy."""

    def heads(self) -> Sequence[HeadView]: ...
    def head(self, slug_or_id: str) -> HeadView | None: ...
    def register(self, ctx_id: str, slug: str) -> None: ...
    def forget(self, ctx_id: str) -> None: ...
    def pull(self, ctx: ContextDir, head: Any = None, *, sources: bool = False) -> None: ...
    def push(self, ctx: ContextDir) -> None: ...
    def fetch_version(self, ctx_id: str, directory: Path) -> None: ...
    def versions(self, ctx_id: str) -> list[str]: ...


@dataclass(frozen=True)
class ContextDir:
    """Paths of one context directory (with `shared`, a working copy of a context many machines share)."""

    root: Path
    shared: SharedContexts | None = field(default=None, compare=False, repr=False)

    @property
    def info_file(self) -> Path:
        return self.root / "context.json"

    @property
    def manifest_file(self) -> Path:
        return self.root / "manifest.json"

    @property
    def ledger_file(self) -> Path:
        return self.root / "ledger.json"

    @property
    def live_file(self) -> Path:
        return self.root / "LIVE"

    @property
    def extraction_cache(self) -> Path:
        """`cache/extract/`: validated model replies by content key (spec/context.md §7)."""
        return self.root / "cache" / "extract"

    @property
    def lock_file(self) -> Path:
        return self.root / "curate.lock"

    @property
    def sources(self) -> Path:
        """The context's source files. A shared context's working copy leaves them out until something
        reads them here (a curate, a pack, a page image, a listing of the sources): a node that only
        answers never copies them. From then on every pull keeps them up to date."""
        if self.shared is not None and not (self.root / SOURCES_MARK).is_file():
            self.shared.pull(self, sources=True)
        return self.root / "sources"

    @property
    def staging(self) -> Path:
        return self.root / "staging"

    @property
    def versions(self) -> Path:
        return self.root / "versions"

    def info(self) -> ContextInfo:
        return ContextInfo(**json.loads(self.info_file.read_text(encoding="utf-8")))

    def save_info(self, info: ContextInfo) -> None:
        write_json_atomic(self.info_file, asdict(info))

    def live_version(self) -> str | None:
        try:
            name = self.live_file.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        return name or None

    def version_dir(self, name: str) -> Path:
        """The version's directory; a shared context's is fetched into this node's cache on first read."""
        path = self.versions / name
        if self.shared is not None:
            self.shared.fetch_version(self.root.name, path)
        return path

    def published_versions(self) -> list[str]:
        """Names of this context's versions other machines may know of (none without shared storage)."""
        return [] if self.shared is None else self.shared.versions(self.root.name)

    @contextmanager
    def editing(self) -> Iterator[None]:
        """Around a change to the context's files: a shared context is brought up to date first and
        what changed is sent to every machine after (even when the change failed half-way: what it
        wrote is there, as on one machine)."""
        if self.shared is None:
            yield
            return
        self.shared.pull(self, sources=True)
        try:
            yield
        except BaseException:
            with suppress(Exception):  # the block's own error is the one to report
                if self.info_file.is_file():
                    self.shared.push(self)
            raise
        if self.info_file.is_file():  # not when the block deleted the context
            self.shared.push(self)

    def manifest_data(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads(self.manifest_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        return data


class Home:
    """One `$SLEUTH_HOME`: find, create and list contexts."""

    def __init__(self, root: Path | None = None, shared: SharedContexts | None = None) -> None:
        self.root = (root or sleuth_home()).resolve()
        self.shared = shared

    @property
    def contexts_dir(self) -> Path:
        return self.root / "contexts"

    @property
    def embedding_cache_dir(self) -> Path:
        return self.root / "cache" / "embeddings"

    def contexts(self) -> list[tuple[ContextDir, ContextInfo]]:
        if self.shared is not None:
            return self._shared_contexts(self.shared)
        found: list[tuple[ContextDir, ContextInfo]] = []
        if not self.contexts_dir.is_dir():
            return found
        for entry in sorted(self.contexts_dir.iterdir()):
            ctx = ContextDir(entry)
            if ctx.info_file.is_file():
                found.append((ctx, ctx.info()))
        return sorted(found, key=lambda pair: pair[1].slug)

    def _shared_contexts(self, shared: SharedContexts) -> list[tuple[ContextDir, ContextInfo]]:
        """Every context of the catalog, each working copy brought up to date; a copy here whose
        context was deleted on another machine is dropped."""
        found: list[tuple[ContextDir, ContextInfo]] = []
        heads = shared.heads()
        known = {head.id for head in heads}
        for head in heads:
            if not head.revision:  # being created: its files are not shared yet
                continue
            ctx = ContextDir(self.contexts_dir / head.id, shared)
            try:
                shared.pull(ctx, head)
                found.append((ctx, ctx.info()))
            except (ContextNotFound, FileNotFoundError):  # deleted while the catalog was read
                continue
        if self.contexts_dir.is_dir():
            for entry in self.contexts_dir.iterdir():
                stale = entry.name not in known and (entry / ".replica.json").is_file()
                if stale and shared.head(entry.name) is None:  # not one made since the catalog was read
                    shutil.rmtree(entry, ignore_errors=True)
        return sorted(found, key=lambda pair: pair[1].slug)

    def find(self, slug_or_id: str) -> ContextDir:
        if self.shared is not None:
            head = self.shared.head(slug_or_id)
            if head is not None and head.revision:  # revision 0: being created, nothing shared yet
                ctx = ContextDir(self.contexts_dir / head.id, self.shared)
                try:
                    self.shared.pull(ctx, head)
                    return ctx
                except ContextNotFound:
                    pass
            raise ContextNotFound(f"no context named {slug_or_id!r}")
        for ctx, info in self.contexts():
            if slug_or_id in (info.slug, info.id):
                return ctx
        raise ContextNotFound(f"no context named {slug_or_id!r} in {self.root}")

    def create(self, slug: str, name: str | None = None) -> ContextDir:
        check_slug(slug)
        try:
            self.find(slug)
        except ContextNotFound:
            pass
        else:
            raise FileExistsError(f"context {slug!r} already exists")
        ctx_id = "ctx_" + secrets.token_hex(8)
        ctx = ContextDir(self.contexts_dir / ctx_id, self.shared)
        if self.shared is not None:
            self.shared.register(ctx_id, slug)  # the name, claimed on every machine at once
        try:
            (ctx.root / "sources").mkdir(parents=True)
            ctx.versions.mkdir()
            ctx.save_info(ContextInfo(id=ctx_id, slug=slug, name=name or slug))
            write_json_atomic(ctx.manifest_file, {})
            if self.shared is not None:
                self.shared.push(ctx)
        except BaseException:
            if self.shared is not None:
                self.shared.forget(ctx_id)
            shutil.rmtree(ctx.root, ignore_errors=True)
            raise
        return ctx

    def fork(self, source: ContextDir, slug: str, name: str | None = None) -> ContextDir:
        """A new context that starts as `source` is now: its sources, manifest, ledger, model-reply
        cache and live version, so it answers at once and its next curate redoes only what changed.
        Files are hard-linked, not copied (copied only across devices): a fork costs no space until it
        diverges, and diverging never touches the original, because every file here is replaced by a
        new one (written aside, then renamed), never rewritten in place."""
        origin = source.info()
        live = source.live_version()
        fork = self.create(slug, name or slug)
        try:
            with fork.editing():
                link_tree(source.sources, fork.sources)
                if source.extraction_cache.is_dir():
                    link_tree(source.extraction_cache, fork.extraction_cache)
                for small in (source.manifest_file, source.ledger_file):
                    if small.is_file():
                        shutil.copy2(small, fork.root / small.name)
                if live is not None:
                    link_tree(source.version_dir(live), fork.versions / live)
                    write_text_atomic(fork.live_file, live)
                info = fork.info()
                info.description = origin.description
                info.last_curated_at = origin.last_curated_at
                info.sample_queries = list(origin.sample_queries)
                fork.save_info(info)
        except BaseException:
            self.delete(fork)
            raise
        return fork

    def delete(self, ctx: ContextDir) -> None:
        """Remove the context: from the catalog of every machine first, then this copy."""
        if self.shared is not None:
            self.shared.forget(ctx.root.name)
        shutil.rmtree(ctx.root)

    def find_or_create(self, slug: str) -> tuple[ContextDir, bool]:
        try:
            return self.find(slug), False
        except ContextNotFound:
            return self.create(slug), True
