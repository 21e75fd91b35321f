"""`sleuth storage gc`: remove from the shared storage (docs/deploy.md, Shared storage) what nothing
refers to any more.

- **version indexes** (`versions/<ctx>/…`) and **extraction caches** (`contexts/<ctx>/…`) of contexts
  whose head is gone: a deleted context;
- **task files** (`tasks/<id>/…`) of tasks that no longer exist, and the vectors (`tasks/<id>/vectors/`)
  of tasks that ended;
- **uploads** (`uploads/<folder>/…`) that no live task's job names;
- **blobs** (`blobs/<sha>`) that no head's files, no version index and no task's files name (after the
  removals above).

Each only after the grace. The others once the object itself is older than it, by the storage's own
timestamps: publishing writes blobs first and its index or head last, so what a publish in flight wrote
is younger. A blob needs more: a working copy merges a push against the blob of its base
(`Replica._merge_json`), which the head may have stopped naming since that copy's pull, so a blob goes
only once nothing has named it for the grace. A run marks each blob it finds unnamed (`gc/marks/<xx>.json`,
when it first found it so), and a later run removes it if it is still unnamed, marked at least the grace
before, and itself older than the grace. A publish that reuses a blob already there freshens it
(`SharedTrees._upload`, `FRESHEN_AFTER_S`), so a reused blob is young too. All of this holds while a
publish or an edit takes less than the grace (minus `FRESHEN_AFTER_S`): hence `MIN_GRACE_S`.

The references are read first, then each blob folder is listed and what is due in it removed at once,
so a blob freshened after the references were read is seen young; only a reuse in the instant between a
folder's listing and its removals escapes (a lock that publishes share and a collection takes alone
would close it). A database that names none of the storage's contexts is refused (`GcRefused`): it is
most likely not this storage's, and every version would otherwise go.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import inspect, select

from sleuth.errors import Failed, Invalid
from sleuth.server.task_inputs import TaskInput
from sleuth.store.contexts.replica import heads_t
from sleuth.store.contexts.shared_trees import FRESHEN_AFTER_S, TRANSFERS
from sleuth.store.database import Database, loads
from sleuth.store.records.task_schema import tasks_t
from sleuth.store.records.tasks import ACTIVE_STATES, TERMINAL_STATES
from sleuth.store.storage import Listed, ObjectMissing, Storage

MIN_GRACE_S = FRESHEN_AFTER_S + 5 * 3600  # a publish or an edit has 5 hours to finish what it began
DEFAULT_GRACE_S = 24 * 3600.0
KINDS = ("blobs", "version indexes", "task files", "uploads", "extraction caches")
BY_AGE = KINDS[1:]  # removed by their own age; blobs by how long nothing has named them (`MARKS`)
MARKS = "gc/marks"  # gc/marks/<xx>.json: blob key → when a run first found nothing naming it
TASK_FILES = "files.json"  # `tasks/<id>/files.json`: a task's files, as an index of blobs


class GcRefused(Failed, RuntimeError):
    """The collection would remove what is most likely still in use; nothing was removed."""


class GraceTooShort(Invalid, ValueError):
    """A grace shorter than a publish may take."""


@dataclass
class Swept:
    """One kind of object: how many were removed (or would be, in a dry run) and their bytes, and how
    many that nothing refers to were kept for the grace."""

    removed: int = 0
    bytes: int = 0
    young: int = 0


@dataclass
class Collected:
    kinds: dict[str, Swept] = field(default_factory=lambda: {kind: Swept() for kind in KINDS})
    dry_run: bool = False

    @property
    def bytes(self) -> int:
        return sum(swept.bytes for swept in self.kinds.values())


@dataclass
class _Plan:
    """What the first pass decided: what to remove of the kinds removed by age, and the indexes still
    in use (what they name is kept)."""

    cutoff: float
    report: Collected
    remove: dict[str, list[Listed]] = field(default_factory=lambda: {kind: [] for kind in BY_AGE})
    indexes: list[str] = field(default_factory=list)

    def old(self, kind: str, item: Listed, in_use: bool) -> bool:
        """Mark `item` for removal when it is unused and old; count it when it is unused and young."""
        if in_use:
            return False
        if item.modified >= self.cutoff:
            self.report.kinds[kind].young += 1
            return False
        self.remove[kind].append(item)
        return True


def _tables(database: Database) -> None:
    with database.reading() as conn:
        present = set(inspect(conn).get_table_names())
    missing = [t.name for t in (heads_t, tasks_t) if t.name not in present]
    if missing:
        raise GcRefused(
            f"the database has no {', '.join(missing)} table: is SLEUTH_DATABASE_URL this deployment's? "
            "(`sleuth db check`)"
        )


def _heads(database: Database) -> tuple[set[str], set[str]]:
    """(the ids of the contexts, every blob their heads' files name)."""
    with database.reading() as conn:
        rows = conn.execute(select(heads_t.c.id, heads_t.c.files)).all()
    return {row.id for row in rows}, {str(sha) for row in rows for sha in (loads(row.files) or {}).values()}


def _tasks(database: Database) -> tuple[dict[str, str], set[str]]:
    """(task id → state, the upload folders that live tasks' jobs name)."""
    with database.reading() as conn:
        rows = conn.execute(select(tasks_t.c.id, tasks_t.c.state, tasks_t.c.job)).all()
    folders = set()
    for row in rows:
        job = loads(row.job) if row.state in ACTIVE_STATES and row.job else None
        upload = TaskInput.of_args(dict(job.get("args") or {})) if isinstance(job, dict) else None
        if upload is not None:
            folders.add(upload.folder_name)
    return {row.id: row.state for row in rows}, folders


def _part(key: str, index: int) -> str:
    parts = key.split("/")
    return parts[index] if len(parts) > index else ""


def _plan(storage: Storage, database: Database, cutoff: float, report: Collected) -> tuple[_Plan, set[str]]:
    """Decide on everything but the blobs; returns the plan and the blobs the heads name."""
    contexts, named = _heads(database)
    tasks, uploads = _tasks(database)
    plan = _Plan(cutoff, report)
    versions = list(storage.listing("versions"))
    stored = {_part(item.key, 1) for item in versions}
    if stored and not stored & contexts:
        raise GcRefused(
            f"none of the {len(stored)} contexts in the storage has a head in this database: is "
            "SLEUTH_DATABASE_URL this storage's? Nothing was removed"
        )
    for item in versions:
        if not plan.old("version indexes", item, _part(item.key, 1) in contexts):
            plan.indexes.append(item.key)
    for item in storage.listing("contexts"):
        plan.old("extraction caches", item, _part(item.key, 1) in contexts)
    for item in storage.listing("tasks"):
        task_id, rest = _part(item.key, 1), item.key.split("/", 2)[-1]
        state = tasks.get(task_id)
        in_use = state is not None and not (state in TERMINAL_STATES and rest.startswith("vectors/"))
        if not plan.old("task files", item, in_use) and rest == TASK_FILES:
            plan.indexes.append(item.key)
    for item in storage.listing("uploads"):
        plan.old("uploads", item, _part(item.key, 1) in uploads)
    return plan, named


def _named_blobs(storage: Storage, keys: list[str]) -> set[str]:
    """Every blob the indexes `keys` name (path → [sha, size]); one removed meanwhile names none."""

    def read(key: str) -> Iterable[str]:
        try:
            index: dict[str, Any] = json.loads(storage.get_bytes(key))
        except ObjectMissing:
            return ()
        return (str(entry[0]) for entry in index.values())

    with ThreadPoolExecutor(TRANSFERS) as pool:
        return {sha for shas in pool.map(read, keys) for sha in shas}


def _remove(storage: Storage, swept: Swept, items: list[Listed], dry_run: bool) -> None:
    if items and not dry_run:
        storage.delete([item.key for item in items])
    swept.removed += len(items)
    swept.bytes += sum(item.size for item in items)


def collect(
    storage: Storage, database: Database, *, grace_s: float = DEFAULT_GRACE_S, dry_run: bool = False
) -> Collected:
    """Remove (with `dry_run`, only count) what nothing refers to and is older than `grace_s`."""
    if grace_s < MIN_GRACE_S:
        raise GraceTooShort(
            f"the grace must be at least {MIN_GRACE_S / 3600:.0f} h: a curate publishing meanwhile may "
            "have blobs nothing names yet"
        )
    _tables(database)
    report = Collected(dry_run=dry_run)
    plan, named = _plan(storage, database, time.time() - grace_s, report)
    for kind in BY_AGE:
        _remove(storage, report.kinds[kind], plan.remove[kind], dry_run)
    named |= _named_blobs(storage, plan.indexes)
    for shard in range(256):  # listed one folder at a time, right before its removals
        _sweep_blobs(storage, f"{shard:02x}", named, plan, grace_s)
    return report


def _sweep_blobs(storage: Storage, shard: str, named: set[str], plan: _Plan, grace_s: float) -> None:
    """Remove the blobs of `blobs/<shard>` that are due; mark the others nothing names (not in a dry
    run, which changes nothing)."""
    key = f"{MARKS}/{shard}.json"
    try:
        marks: dict[str, float] = json.loads(storage.get_bytes(key))
    except ObjectMissing:
        marks = {}
    now = plan.cutoff + grace_s
    due, kept = [], {}
    for item in storage.listing(f"blobs/{shard}"):
        if item.key.rsplit("/", 1)[-1] in named:
            continue
        since = float(marks.get(item.key, now))
        if item.modified < plan.cutoff and since <= plan.cutoff:
            due.append(item)
        else:
            kept[item.key] = since
    swept = plan.report.kinds["blobs"]
    swept.young += len(kept)
    _remove(storage, swept, due, plan.report.dry_run)
    if plan.report.dry_run or kept == marks:
        return
    if kept:
        storage.put_bytes(key, json.dumps(kept, sort_keys=True).encode())
    else:
        storage.delete([key])
