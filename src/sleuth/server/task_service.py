"""The task service (spec/api.md §9): long jobs (curate, import, pack, restore) on a pool of worker
threads, each with a handle that records its progress, honours cancellation and writes its result
to the task store. The routes over it are in `tasks.py`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sleuth.errors import Failed
from sleuth.server.task_handle import Job, TaskCancelled, TaskHandle, do_part
from sleuth.server.task_inputs import TaskInput
from sleuth.store.contexts.lock import claims_lock
from sleuth.store.contexts.replica import Replica
from sleuth.store.records.outage import Reachability, patient
from sleuth.store.records.rows import TaskJob, TaskRow
from sleuth.store.records.tasks import (
    TERMINAL_STATES,
    TaskStore,
)

log = logging.getLogger("sleuth.server.tasks")
DEFAULT_WORKERS = 2
DEFAULT_STOP_TIMEOUT_S = 30.0


def _files_key(task_id: str) -> str:
    return f"tasks/{task_id}/files.json"


@dataclass
class _Live:
    handle: TaskHandle
    done: threading.Event = field(default_factory=threading.Event)


class TaskStopTimeout(Failed):
    """A task did not stop within the wait (`504 task_stop_timeout`)."""


class TaskQueue(Protocol):
    """Where a task waits for a worker (`queue.JobQueue`)."""

    def defer_task(self, task_id: str) -> None: ...

    def defer_parts(self, task_id: str, helpers: int) -> None: ...


JobKinds = dict[str, Callable[[dict[str, Any]], Job]]
PartKinds = dict[str, Callable[[dict[str, Any]], Callable[[str], object]]]  # a split task's one part
MAX_ATTEMPTS = 3  # a task whose worker died is begun again on another, at most this many times in all


class TaskService:
    """The bounded worker pool and the registry of live tasks of one process.

    Every task is a job kind (`kinds`: curate, sync, import, pack, restore) and its JSON arguments, the
    same on one machine and many. Without a queue the job runs on this process's pool; with one
    (PostgreSQL) it is queued for whichever worker takes it (`run_queued`): the worker holds it in the
    task table and renews the hold, and a task whose worker died is begun again elsewhere
    (`MAX_ATTEMPTS`)."""

    def __init__(
        self,
        store: TaskStore,
        files_root: Path,
        workers: int,
        stop_timeout_s: float,
        *,
        queue: TaskQueue | None = None,
        worker: str | None = None,
        heartbeat_s: float = 10.0,
        kinds: JobKinds | None = None,
        part_kinds: PartKinds | None = None,
        max_wait_s: float | None = None,
        shared: Replica | None = None,
        database_wait_s: float = 0.0,
    ) -> None:
        self.store = store
        self.database_wait_s = database_wait_s  # a running task's writes wait this long for PostgreSQL
        self._reach = Reachability(3 * heartbeat_s)
        self.last_beat: float | None = None  # when the heartbeat thread last ended a beat
        self.files_root = files_root
        self.shared = shared  # shared storage: task files travel through it
        self.stop_timeout_s = stop_timeout_s
        self.queue = queue
        self.worker = worker
        self.heartbeat_s = heartbeat_s
        self.kinds: JobKinds = dict(kinds or {})
        self.part_kinds: PartKinds = dict(part_kinds or {})
        self.max_wait_s = max_wait_s  # a queued task no worker began by then is failed
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="sleuth-task")
        self._live: dict[str, _Live] = {}
        self._lock = threading.Lock()
        self._claim = threading.Lock()
        self._closed = False
        self._releasing = False  # a worker stopping: queued tasks go back to the queue, not cancelled
        self._stop = threading.Event()
        if queue is not None and worker is not None:
            threading.Thread(target=self._heartbeat, name="sleuth-task-beat", daemon=True).start()

    def files_dir(self, task_id: str) -> Path:
        return self.files_root / task_id / "files"

    def readable_files(self, task_id: str) -> Path:
        """The task's files here; with shared storage, fetched first when another machine ran it."""
        local = self.files_dir(task_id)
        if self.shared is not None and not local.is_dir():
            self.shared.get_tree(_files_key(task_id), local)  # placed whole; a concurrent fetch wins
        return local

    def _publish_files(self, handle: TaskHandle) -> None:
        """With shared storage, the files a task wrote go there before it ends, so any server can serve
        them once the task shows ended."""
        if self.shared is None or not handle.files_dir.is_dir():
            return
        try:
            self.shared.put_tree(_files_key(handle.task_id), handle.files_dir)
        except Exception:
            log.exception("task %s: its files could not be stored", handle.task_id)

    @contextlib.contextmanager
    def claiming(self) -> Iterator[None]:
        """Held while a route checks for a conflicting task and records its own, so two requests, on
        this server or (PostgreSQL) on any other, cannot both pass the check."""
        with self._claim, claims_lock(self.store.database):
            yield

    def submit(self, task: TaskRow, kind: str, args: dict[str, Any], phases: Sequence[str] = ()) -> None:
        """Run the scheduled `task`, a job of `kind` built from its JSON `args`: queued for a worker when
        there is a queue, else on this process's pool. A job that cannot be built fails the task."""
        task_id = task["id"]
        if self.queue is not None:
            self.store.set_job(task_id, {"kind": kind, "args": args, "phases": list(phases)})
            try:
                self.queue.defer_task(task_id)
            except Exception as exc:
                log.exception("task %s could not be queued", task_id)
                self.store.finish(task_id, "failed", error=f"could not be queued: {type(exc).__name__}")
            return
        try:
            job = self.kinds[kind](args)
        except Exception as exc:
            self.store.finish(task_id, "failed", error=str(exc) or type(exc).__name__)
            return
        handle = TaskHandle(self.store, task_id, phases, self.files_dir(task_id))
        live = _Live(handle)
        with self._lock:
            if self._closed:
                self.store.finish(task_id, "failed", error="server stopping")
                return
            self._live[task_id] = live
        self._pool.submit(self._run, task_id, job, live)

    def run_queued(self, task_id: str) -> None:
        """A worker's job: hold the queued task and run it here, on the caller's thread. A task no longer
        scheduled (cancelled while queued, taken by another worker, ended) is left alone."""
        spec = self._job_spec(task_id, "scheduled")
        if spec is None:
            return
        build = self.kinds.get(str(spec.get("kind")))
        if build is None:
            self.store.finish(task_id, "failed", error=f"this worker cannot run a {spec.get('kind')!r} task")
            return
        queue = self.queue
        helpers = None if queue is None else (lambda n: queue.defer_parts(task_id, n))
        handle = TaskHandle(
            self.store, task_id, list(spec.get("phases") or []), self.files_dir(task_id), helpers=helpers
        )
        live = _Live(handle)
        with self._lock:
            self._live[task_id] = live
        try:
            job = build(dict(spec.get("args") or {}))
        except Exception as exc:
            with self._lock:
                self._live.pop(task_id, None)
            self.store.finish(task_id, "failed", error=str(exc) or type(exc).__name__)
            return
        self._run(task_id, job, live, hold=True)

    def run_parts(self, task_id: str, abort: Callable[[], bool] = lambda: False) -> None:
        """A worker's help with a split task: take its open parts until none is left or the task is
        no longer running."""
        spec = self._job_spec(task_id, "running")
        if spec is None or self.worker is None:
            return
        build = self.part_kinds.get(str(spec.get("kind")))
        if build is None:
            return
        do = build(dict(spec.get("args") or {}))
        with patient(self.database_wait_s):
            self._take_parts(task_id, do, abort)

    def _take_parts(self, task_id: str, do: Callable[[str], object], abort: Callable[[], bool]) -> None:
        assert self.worker is not None
        while self._state(task_id) == "running" and not abort():
            part = self.store.take_part(task_id, self.worker)
            if part is None:
                return
            do_part(do, part)
            self.store.finish_part(task_id, part)

    def _state(self, task_id: str) -> str | None:
        """The task's state now; None when it is gone."""
        task = self.store.get(task_id)
        return None if task is None else task["state"]

    def _job_spec(self, task_id: str, state: str) -> TaskJob | None:
        """What a worker runs the task from (`set_job`), while the task is in `state`; else None."""
        task = self.store.get(task_id)
        spec = None if task is None else task.get("job")
        return spec if task is not None and task["state"] == state and isinstance(spec, dict) else None

    def _heartbeat(self) -> None:
        """Renew the holds of the tasks running here, stop those a stop was asked for on any server,
        and begin again (or fail) the tasks of workers that died."""
        while not self._stop.wait(self.heartbeat_s):
            try:
                self.beat()
            finally:
                self.last_beat = time.monotonic()  # alive, database or not (`server.liveness`)

    def beat(self) -> None:
        if self.worker is None:
            return
        # The runs held before the renewal reads the holds: a run whose hold is taken meanwhile (its
        # `start` commits after the read) is not in the read, and is not lost.
        with self._lock:
            holding = {t: item.handle for t, item in self._live.items() if item.handle.holder is not None}
        try:
            self.store.renew_parts(self.worker)
            renewed = self.store.renew(self.worker, 3 * self.heartbeat_s)
            for task_id, state in renewed:
                with self._lock:
                    live = self._live.get(task_id)
                if state == "stopping" and live is not None and not live.handle.cancelled:
                    stored = self.store.get(task_id)
                    error = None if stored is None else stored["error"]
                    live.handle.request_cancel(error or "cancelled")
            held = {task_id for task_id, _ in renewed}
            lost = [h for task_id, h in holding.items() if task_id not in held and not h.cancelled]
            for handle in lost:  # its lease ran out while this process could not renew it
                log.warning("task %s: this process lost its hold; stopping it", handle.task_id)
                handle.request_cancel("cancelled: this worker lost its hold on the task")
            self._reach.reached()
            if not self._reach.trusted:  # back from an outage: the other holders renew first
                return
            if self.max_wait_s is not None:
                for task_id in self.store.fail_unstarted(self.max_wait_s):
                    log.warning("task %s failed: no worker began it in time", task_id)
                    self._drop_shared_input(task_id)
            requeued, ended = self.store.requeue_lost(MAX_ATTEMPTS)
            for task_id in ended:
                log.warning("task %s ended: its worker stopped answering", task_id)
                self._drop_shared_input(task_id)
            for task_id in requeued:
                log.warning("task %s queued again: its worker stopped answering", task_id)
                if self.queue is not None:
                    self.queue.defer_task(task_id)
        except Exception:  # the database is away: the next beat tries again
            log.warning("task heartbeat of %s failed", self.worker, exc_info=True)
            self._reach.lost()

    def _drop_shared_input(self, task_id: str) -> None:
        """A task ended here for a worker that never ran it to its end: its upload leaves the storage
        (`TaskInput`; the copy staged where it arrived stays in that context's `staging/`)."""
        spec = self._job_spec(task_id, "failed")
        upload = None if spec is None else TaskInput.of_args(dict(spec.get("args") or {}))
        if upload is not None and self.shared is not None:
            self.shared.storage.delete([upload.key])

    def _run(self, task_id: str, job: Job, live: _Live, *, hold: bool = False) -> None:
        with patient(self.database_wait_s):  # a database restart pauses the task; it does not lose it
            self._run_here(task_id, job, live, hold=hold)

    def _run_here(self, task_id: str, job: Job, live: _Live, *, hold: bool) -> None:
        handle = live.handle
        ended = False
        try:
            # With a queue every task is held, even one that runs where it was asked (an import): a
            # server that dies then has its tasks failed by the others, not left `running`.
            worker = self.worker if hold or self.queue is not None else None
            if not self.store.start(task_id, worker, 3 * self.heartbeat_s):
                return  # cancelled while it waited, or another worker took it
            handle.holder = worker
            handle.check()
            output = job(handle)
            if self._lost(task_id, handle, None):
                return
            self._publish_files(handle)
            self.store.finish(
                task_id,
                "completed",
                output=output,
                progress=handle.progress(100.0),
                steps=handle.steps("completed"),
                worker=handle.holder,
            )
            ended = True
        except TaskCancelled:
            if (
                hold
                and self._releasing
                and self.worker is not None
                and self.store.release(task_id, self.worker)
            ):
                log.warning("task %s handed back to the queue: this worker is stopping", task_id)
                if self.queue is not None:
                    self.queue.defer_task(task_id)
                return
            self._publish_files(handle)
            self.store.finish(
                task_id,
                "cancelled",
                output=handle.output,
                error=handle.cancel_message,
                progress=handle.progress(),
                steps=handle.steps("cancelled"),
                worker=handle.holder,
            )
            ended = True
        except Exception as exc:
            if self._lost(task_id, handle, exc):
                return
            log.exception("task %s failed", task_id)
            self._publish_files(handle)
            self.store.finish(
                task_id,
                "failed",
                output=handle.output,
                error=str(exc) or type(exc).__name__,
                progress=handle.progress(),
                steps=handle.steps("failed"),
                worker=handle.holder,
            )
            ended = True
        finally:
            for fn in handle.at_end if ended else ():
                try:
                    fn()
                except Exception:
                    log.warning("task %s: a clean-up after it failed", task_id, exc_info=True)
            live.done.set()
            with self._lock:
                self._live.pop(task_id, None)

    def _lost(self, task_id: str, handle: TaskHandle, exc: Exception | None) -> bool:
        """Whether this process's run ended after another worker took the task over (this one froze or
        was cut off past its lease): the successor's run is the one that counts, so this one publishes
        no files, runs no clean-up (the successor may still need the task's input) and is no failure."""
        if handle.holder is None:
            return False
        try:
            stored = self.store.get(task_id)
        except Exception:  # cannot tell: end it as usual (`finish` is refused if it was taken over)
            return False
        if (
            stored is not None
            and stored["worker"] == handle.holder
            and stored["state"] not in TERMINAL_STATES
        ):
            return False
        why = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
        log.warning("task %s: this process lost its hold; its run ends here%s", task_id, why)
        return True

    def stop(self, task_id: str, reason: str | None = None, timeout_s: float | None = None) -> TaskRow:
        """Cancel and wait (blocking: call from a worker thread). A terminal task is returned as is;
        `TaskStopTimeout` if it is still live after the wait."""
        task = self.store.request_stop(task_id, reason)
        if task["state"] in TERMINAL_STATES:
            return task
        with self._lock:
            live = self._live.get(task_id)
        if live is not None:
            live.handle.request_cancel(task["error"] or "cancelled")
            wait = self.stop_timeout_s if timeout_s is None else timeout_s
            if not live.done.wait(wait):
                raise TaskStopTimeout(f"task {task_id} did not stop within {wait:g} s")
        elif task.get("worker") is not None:  # held by a worker elsewhere: its heartbeat sees `stopping`
            wait = self.stop_timeout_s if timeout_s is None else timeout_s
            if not self._wait_ended(task_id, wait):
                raise TaskStopTimeout(f"task {task_id} did not stop within {wait:g} s")
        else:  # not ours (another process or lost): it can never report back
            self.store.finish(task_id, "cancelled", error=task["error"])
        return self.store.require(task_id)

    def _wait_ended(self, task_id: str, wait_s: float) -> bool:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.store.require(task_id)["state"] in TERMINAL_STATES:
                return True
            time.sleep(0.2)
        return False

    def stop_all(self, task_ids: Sequence[str], reason: str, timeout_s: float | None = None) -> None:
        """Cancel several tasks, then wait for them together within one timeout."""
        deadline = time.monotonic() + (self.stop_timeout_s if timeout_s is None else timeout_s)
        waits: list[tuple[str, _Live]] = []
        for task_id in task_ids:
            task = self.store.request_stop(task_id, reason)
            if task["state"] in TERMINAL_STATES:
                continue
            with self._lock:
                live = self._live.get(task_id)
            if live is None and task.get("worker") is not None:
                if not self._wait_ended(task_id, max(0.0, deadline - time.monotonic())):
                    raise TaskStopTimeout(f"task {task_id} did not stop within {self.stop_timeout_s:g} s")
                continue
            if live is None:
                self.store.finish(task_id, "cancelled", error=task["error"])
                continue
            live.handle.request_cancel(task["error"] or "cancelled")
            waits.append((task_id, live))
        for task_id, live in waits:
            if not live.done.wait(max(0.0, deadline - time.monotonic())):
                raise TaskStopTimeout(f"task {task_id} did not stop within {self.stop_timeout_s:g} s")

    def release_now(self, task_id: str) -> None:
        """The worker is stopping and its grace is over: stop the task at its next step and hand it back
        to the queue for another worker."""
        self._releasing = True
        with self._lock:
            live = self._live.get(task_id)
        if live is not None:
            live.handle.request_cancel("worker stopping")

    def release_held(self, wait_s: float | None = None) -> None:
        """A worker's drain: stop the queued tasks running here and hand them back to the queue, so
        another worker begins them again (a curate is idempotent up to its flip)."""
        self._releasing = True
        with self._lock:
            live = list(self._live.values())
        for item in live:
            item.handle.request_cancel("worker stopping")
        deadline = time.monotonic() + (self.stop_timeout_s if wait_s is None else wait_s)
        for item in live:
            item.done.wait(max(0.0, deadline - time.monotonic()))

    def close(self, wait_s: float = 5.0) -> None:
        """Server shutdown: cancel what is queued or running and give running jobs a moment to stop;
        anything still live is failed as `server restarted` at the next start."""
        self._stop.set()
        with self._lock:
            self._closed = True
            live = list(self._live.items())
        for _task_id, item in live:
            item.handle.request_cancel("cancelled: server stopping")
        self._pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + wait_s
        for task_id, item in live:
            if not item.done.wait(max(0.0, deadline - time.monotonic())):
                log.warning("task %s still running at shutdown", task_id)
        for task_id, _item in live:  # queued jobs the pool dropped
            task = self.store.get(task_id)
            if task is not None and task["state"] == "scheduled":
                self.store.finish(task_id, "cancelled", error="cancelled: server stopping")
        self.store.close()
