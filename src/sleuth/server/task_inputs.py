"""A task's input file (an uploaded archive or pack), readable by whichever machine runs the task.

An upload arrives at one API server, but with workers (docs/deploy.md) any machine may run its task. The
file is staged in the context's `staging/<folder>/` where it arrived and, with shared storage, also kept
under `uploads/<folder>/<name>` until the task ends; a worker that does not have it fetches it into its own
`staging/`. The task's arguments name it (`TaskInput.args`), so a task is still a name plus JSON
arguments.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from sleuth.store.contexts.home import ContextDir
from sleuth.store.storage import Storage


@dataclass(frozen=True)
class TaskInput:
    """The uploaded file of one task: `staging/<folder>/<name>` of its context."""

    folder_name: str
    name: str

    def __post_init__(self) -> None:
        for part in (self.folder_name, self.name):
            if PurePosixPath(part).name != part or part in ("", ".", ".."):
                raise ValueError(f"not a file name: {part!r}")

    @classmethod
    def of_args(cls, args: dict[str, Any]) -> TaskInput | None:
        """The upload a task's arguments name, if any."""
        if "upload" not in args:
            return None
        return cls(str(args["upload"]), str(args["input"]))

    def args(self) -> dict[str, str]:
        return {"upload": self.folder_name, "input": self.name}

    def folder(self, ctx: ContextDir) -> Path:
        return ctx.staging / self.folder_name

    def staged(self, ctx: ContextDir) -> Path:
        return self.folder(ctx) / self.name

    @property
    def key(self) -> str:
        return f"uploads/{self.folder_name}/{self.name}"

    def share(self, ctx: ContextDir, storage: Storage | None) -> None:
        """After it is staged here: kept in the shared storage for a worker on another machine."""
        if storage is not None:
            storage.put_file(self.key, self.staged(ctx))

    def fetch(self, ctx: ContextDir, storage: Storage | None) -> Path:
        """The staged file on this machine, fetched from the shared storage when it arrived elsewhere."""
        path = self.staged(ctx)
        if not path.is_file() and storage is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            storage.get_file(self.key, path)
        return path

    def discard(self, ctx: ContextDir, storage: Storage | None) -> None:
        """Once its task ended: the staged folder here and the shared copy."""
        shutil.rmtree(self.folder(ctx), ignore_errors=True)
        if storage is not None:
            storage.delete([self.key])
