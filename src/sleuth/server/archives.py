"""Archive imports (spec/api.md §6.2): the `import` task that expands a staged zip or tar into the source
tree, reading it with `compile/archives.py` (bounded by what it expands to). Per member: an unsafe name
(one over `MAX_SOURCE_PATH_BYTES` or deeper than `MAX_SOURCE_PATH_DEPTH` included), a link or a device
is skipped, and only a cut of its name is kept in the report; the entries (`max_archive_members`) and the
bytes written (`max_expanded_bytes`) of the whole archive, and each member's bytes as actually read
(`max_file_bytes`), are counted: passing an archive-wide limit fails the import, a member over the
per-file limit is skipped.

An import is atomic. Members are written to a staging folder beside the archive; only once the whole
archive was read are they moved into the source tree, under the tree lock, after every conflict was
checked: in one rename when the target folder is new, else one rename per file. A failed or cancelled
import leaves the source tree as it was.

The task output is a summary: counts of every member by action, and at most `MAX_RESULT_ROWS` rows
(`truncated: true` when some were left out).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any, cast

from sleuth.compile.archives import (
    EXPANSION_ALLOWANCE_BYTES,
    MEMBER_ERRORS,
    READ_ERRORS,
    ArchiveRefused,
    Checked,
    Member,
    SourceLimits,
    copy_capped,
    member_label,
    members,
    zip_directory,
)
from sleuth.compile.connectors import registry
from sleuth.compile.sources import UnsafePath, archive_stem, safe_join, safe_source_path
from sleuth.errors import ToldConflict
from sleuth.server.context_files import tree_lock, update_extra
from sleuth.server.state import Server
from sleuth.server.task_handle import Job, TaskHandle
from sleuth.server.task_inputs import TaskInput
from sleuth.server.task_service import TaskService
from sleuth.store.contexts.home import ContextDir, now_iso
from sleuth.store.contexts.replica import context_storage
from sleuth.store.contexts.trees import walk_files
from sleuth.store.records.rows import TaskRow

#: Rows of the import report; the counts always cover every member.
MAX_RESULT_ROWS = 1000


@dataclass
class SourceUsage:
    """Files and bytes in a source tree."""

    files: int = 0
    bytes: int = 0

    @classmethod
    def of(cls, ctx: ContextDir) -> SourceUsage:
        usage = cls()
        for _rel, st in walk_files(ctx.sources):
            usage.files += 1
            usage.bytes += st.st_size
        return usage


# --- the import task ----------------------------------------------------------------------------


class _Report:
    """Counts of every member by action; the first `MAX_RESULT_ROWS` rows."""

    def __init__(self, archive: str) -> None:
        self.archive = archive
        self.rows: list[dict[str, Any]] = []
        self.counts = {"extracted": 0, "skipped": 0, "failed": 0}

    def add(self, row: dict[str, Any]) -> None:
        self.counts[row["action"]] += 1
        if len(self.rows) < MAX_RESULT_ROWS:
            self.rows.append(row)

    def output(self) -> dict[str, Any]:
        return {
            "archive": self.archive,
            "files": self.rows,
            "counts": self.counts,
            "truncated": sum(self.counts.values()) > len(self.rows),
        }


def _blocked(root: Path, rel: PurePosixPath) -> str | None:
    """Why `rel` cannot be written under `root`: a directory at the path or a file above it."""
    dest = root.joinpath(*rel.parts)
    if dest.is_dir():
        return "a directory exists at that path"
    for parent in rel.parents:
        if str(parent) != "." and root.joinpath(*parent.parts).is_file():
            return "a parent of the path is a file"
    return None


class _Expansion:
    """One archive expanded into `staging` (paths relative to `target`), with the running totals the
    limits are checked against."""

    def __init__(
        self,
        ctx: ContextDir,
        staging: Path,
        target: PurePosixPath,
        limits: SourceLimits,
        check: Callable[[], None],
    ) -> None:
        self.ctx, self.staging, self.target, self.limits = ctx, staging, target, limits
        self.check = check  # the task's cancel check, run before every read of a member's data
        self.usage = SourceUsage.of(ctx)  # the tree before the import; re-counted at the commit
        self.staged: dict[PurePosixPath, int] = {}  # path below the target → size
        self.entries = 0
        self.expanded = 0
        self.new_files = 0
        self.new_bytes = 0

    def entry(self, member: Member) -> dict[str, Any] | None:
        """Stage one entry; its report row (None for a directory). `ArchiveRefused` past an
        archive-wide limit."""
        self.entries += 1
        if self.entries > self.limits.max_archive_members:
            raise ArchiveRefused(f"the archive has more than {self.limits.max_archive_members} members")
        if member.kind == "dir":
            return None
        row: dict[str, Any] = {
            "member": member_label(member.name),
            "path": None,
            "action": "skipped",
            "reason": None,
        }
        if member.kind != "file":
            row["reason"] = "not a regular file (link or device)"
            return row
        try:
            inner = safe_source_path(member.name)
            rel = safe_source_path(str(self.target / inner))
        except UnsafePath as exc:
            row["reason"] = str(exc)
            return row
        row["path"] = str(rel)
        row["reason"] = self._refusal(member, inner, rel)
        if row["reason"] is None:
            try:
                row.update(self._write(member, inner), action="extracted")
            except _Skip as skip:
                row["reason"] = str(skip)
            except MEMBER_ERRORS as exc:
                row["action"], row["reason"] = "failed", str(exc)[:500] or type(exc).__name__
        return row

    def _refusal(self, member: Member, inner: PurePosixPath, rel: PurePosixPath) -> str | None:
        """Why a member is skipped before it is read, from what the archive declares."""
        limits = self.limits
        if member.size > limits.max_file_bytes:
            return f"file_too_large: over {limits.max_file_bytes} bytes"
        if member.packed is not None and member.size > EXPANSION_ALLOWANCE_BYTES + (
            limits.max_expansion_ratio * member.packed
        ):
            return (
                f"compression_ratio: {member.size} bytes from {member.packed} compressed, over "
                f"{limits.max_expansion_ratio}:1"
            )
        if self.expanded + member.size > limits.max_expanded_bytes:
            raise ArchiveRefused(f"the archive expands beyond {limits.max_expanded_bytes} bytes")
        blocked = _blocked(self.staging, inner) or _blocked(self.ctx.sources, rel)
        if blocked is not None:
            return blocked
        return self._over_context(inner, rel, member.size)

    def _over_context(self, inner: PurePosixPath, rel: PurePosixPath, size: int) -> str | None:
        limits = self.limits
        old = self._old_size(inner, rel)
        files = self.usage.files + self.new_files + (1 if old is None else 0)
        if files > limits.max_files_per_context:
            return (
                f"context_file_limit: the context would hold {files} files; "
                f"the limit is {limits.max_files_per_context}"
            )
        if self.usage.bytes + self.new_bytes - (old or 0) + size > limits.max_context_bytes:
            return f"context_byte_limit: the context would hold more than {limits.max_context_bytes} bytes"
        return None

    def _old_size(self, inner: PurePosixPath, rel: PurePosixPath) -> int | None:
        """The size this member replaces: an earlier member of the same name, or a source file."""
        if inner in self.staged:
            return self.staged[inner]
        live = self.ctx.sources.joinpath(*rel.parts)
        return live.stat().st_size if live.is_file() else None

    def _write(self, member: Member, inner: PurePosixPath) -> dict[str, Any]:
        limits = self.limits
        budget = limits.max_expanded_bytes - self.expanded
        cap = min(limits.max_file_bytes, budget)
        tmp = self.staging.parent / f"{os.urandom(8).hex()}.partial"
        try:
            with member.open() as opened:
                src = cast(IO[bytes], Checked(opened, self.check))
                try:
                    size, sha = copy_capped(src, tmp, cap)
                except OverflowError:
                    if budget < limits.max_file_bytes:
                        raise ArchiveRefused(
                            f"the archive expands beyond {limits.max_expanded_bytes} bytes"
                        ) from None
                    raise _Skip(f"file_too_large: over {limits.max_file_bytes} bytes") from None
            rel = self.target / inner
            reason = self._over_context(inner, rel, size)  # the bytes read, not the size declared
            if reason is not None:
                raise _Skip(reason)
            dest = self.staging.joinpath(*inner.parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(tmp, 0o644)
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        old = self._old_size(inner, rel)
        self.new_files += 1 if old is None else 0
        self.new_bytes += size - (old or 0)
        self.expanded += size
        self.staged[inner] = size
        return {"size": size, "sha256": sha}

    def commit(self) -> None:
        """Move every staged file into the source tree, or nothing (`ArchiveRefused`)."""
        if not self.staged:
            return
        sources = self.ctx.sources
        with tree_lock(self.ctx):
            if not self.ctx.info_file.exists():
                raise ArchiveRefused("the context was deleted during the import")
            usage = SourceUsage.of(self.ctx)  # other uploads may have landed meanwhile
            files, size = usage.files, usage.bytes
            moves: list[tuple[Path, Path]] = []
            for inner, staged_size in self.staged.items():
                rel = self.target / inner
                dest = safe_join(sources, str(rel))
                blocked = _blocked(sources, rel)
                if blocked is not None:
                    raise ArchiveRefused(f"{rel}: {blocked}")
                old = dest.stat().st_size if dest.is_file() else None
                files += 1 if old is None else 0
                size += staged_size - (old or 0)
                moves.append((self.staging.joinpath(*inner.parts), dest))
            if files > self.limits.max_files_per_context:
                raise ArchiveRefused(f"context_file_limit: the context would hold {files} files")
            if size > self.limits.max_context_bytes:
                raise ArchiveRefused(f"context_byte_limit: the context would hold {size} bytes")
            root = safe_join(sources, str(self.target))
            if not root.exists():
                root.parent.mkdir(parents=True, exist_ok=True)
                os.replace(self.staging, root)  # the whole archive appears at once
                return
            for src, dest in moves:
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(src, dest)


class _Skip(Exception):
    """This member is skipped (the message is the reason); the import goes on."""


def expand_archive(
    ctx: ContextDir, archive: Path, target: PurePosixPath, limits: SourceLimits, handle: TaskHandle
) -> dict[str, Any]:
    """The import task: expand `archive` (staged in its own folder) under `target` in the source
    tree, all of it or nothing."""
    report = _Report(archive.name)
    total = 0
    if archive.name.lower().endswith(".zip"):
        with suppress(ArchiveRefused, OSError):
            total = zip_directory(archive)[0]
    handle.start("extract", total)
    staging = archive.parent / "expanded"
    staging.mkdir()
    expansion = _Expansion(ctx, staging, target, limits, handle.check)
    try:
        for member in members(archive, limits, handle.check):
            handle.advance("extract")  # also the cancel check
            row = expansion.entry(member)
            if row is not None:
                report.add(row)
    except READ_ERRORS as exc:
        raise ArchiveRefused(f"{archive.name} is not a readable archive: {exc}") from None
    except RecursionError:  # a chain of extended headers
        raise ArchiveRefused(f"{archive.name} is not a readable archive: headers nested too deep") from None
    except ArchiveRefused as exc:
        raise ArchiveRefused(f"{archive.name}: {exc}; nothing was imported") from None
    expansion.commit()
    handle.finish("extract")
    if report.counts["extracted"]:
        with suppress(FileNotFoundError):
            update_extra(ctx, last_source_import_at=now_iso())
    return report.output()


def refuse_connector_folder(ctx: ContextDir, rel: PurePosixPath) -> None:
    """`409 connector_folder` when `rel` lies in a connector's folder (`sources/<connector>/…`): only
    that connector's syncs write there. An upload there would be replaced by the next sync, or deleted
    with the connector, and a client could pass its own file off as the connector's."""
    top = rel.parts[0] if rel.parts else ""
    if top and top in registry.load(ctx):
        raise ToldConflict(
            "connector_folder",
            f"{top}/ is the folder of connector {top!r}: only its syncs write there; upload to another "
            "folder (uploads/ by default)",
            field="path",
            connector=top,
        )


def import_job(state: Server, args: dict[str, Any]) -> Job:
    """`expand_archive` of the task's staged upload (`TaskInput`) into `args["target"]`, on whichever
    machine runs it; the upload is discarded once the task has ended."""
    ctx = state.home.find(str(args["context"]))
    upload, storage = TaskInput.of_args(args), context_storage(ctx)
    if upload is None:
        raise ValueError("an import task names its upload")
    target = PurePosixPath(str(args["target"]))

    def job(handle: TaskHandle) -> dict[str, Any]:
        handle.when_ended(lambda: upload.discard(ctx, storage))
        archive = upload.fetch(ctx, storage)
        with ctx.editing():
            refuse_connector_folder(ctx, target)  # again under the lock: a connector added meanwhile
            return expand_archive(ctx, archive, target, SourceLimits.of_settings(state.settings), handle)

    return job


def start_import(service: TaskService, ctx: ContextDir, task: TaskRow, upload: TaskInput) -> None:
    """Submit the recorded `import` task of an archive staged for `upload`, to be expanded into the
    folder named after the archive beside where it was uploaded (`task["input"]["path"]`)."""
    folder = PurePosixPath(str(task["input"]["path"]))
    upload.share(ctx, context_storage(ctx))
    target = folder / archive_stem(Path(upload.name))
    args = {"context": ctx.info().id, "target": str(target), **upload.args()}
    service.submit(task, "import", args, phases=("extract",))
