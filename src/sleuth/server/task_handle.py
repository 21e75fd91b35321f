"""What a running task's job sees (`TaskHandle`): cancellation, progress by phase, steps, a partial
output, and what to do once the task has ended. The service that runs jobs is `task_service.py`."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sleuth.errors import Failed
from sleuth.store.records.rows import TaskProgress, TaskStep
from sleuth.store.records.tasks import TaskStore

log = logging.getLogger("sleuth.server.tasks")
PROGRESS_WRITE_INTERVAL_S = 0.5  # a compile advances per source and per batch: write at most this often


class TaskCancelled(Failed):
    """Raised inside a job at its next check once a stop was requested."""


class TaskHandle:
    """What a running job sees: cancellation, progress by phase, steps and a partial output.

    It implements the compiler's `Progress` protocol (`start`, `advance`, `finish`); each call first
    checks for a cancel, so a long compile stops at its next step. Progress is written to the store
    at phase boundaries and at most every `PROGRESS_WRITE_INTERVAL_S` in between.
    """

    def __init__(
        self,
        store: TaskStore,
        task_id: str,
        phases: Sequence[str],
        files_dir: Path,
        helpers: Callable[[int], None] | None = None,
    ) -> None:
        self.store = store
        self._helpers = helpers  # queue mode: asks that many other workers to take parts
        self.holder: str | None = None  # the worker holding the task: its writes count only while it does
        self.task_id = task_id
        self.phases = list(phases)
        self.files_dir = files_dir
        self.output: Any = None  # kept when the job fails or is cancelled half-way
        self.cancel_message = "cancelled"
        self._cancel = threading.Event()
        self._steps: list[TaskStep] = []
        self._phase: str | None = None
        self._done_phases: set[str] = set()
        self._total = 0
        self._count = 0
        self._began = time.monotonic()
        self._last_write = 0.0
        self.at_end: list[Callable[[], object]] = []

    def when_ended(self, fn: Callable[[], object]) -> None:
        """Call `fn` once the task has ended (completed, failed or cancelled), but not when this worker
        hands it back to the queue: what another attempt still needs, an upload, is kept until then."""
        self.at_end.append(fn)

    # cancellation
    def request_cancel(self, message: str) -> None:
        self.cancel_message = message
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def check(self) -> None:
        if self._cancel.is_set():
            raise TaskCancelled(self.cancel_message)

    # Progress protocol
    def start(self, phase: str, total: int) -> None:
        self.check()
        if phase not in self.phases:
            self.phases.append(phase)
        self._close_step("completed")
        self._phase, self._total, self._count = phase, max(0, total), 0
        self._steps.append(
            {
                "step_id": str(len(self._steps) + 1),
                "status": "running",
                "type": phase,
                "commentary": f"{phase}: 0/{total}",
                "path": None,
            }
        )
        self._write(force=True)

    def advance(self, phase: str, amount: int = 1) -> None:
        self.check()
        if phase == self._phase:
            self._count += amount
            self._write()

    def finish(self, phase: str) -> None:
        self.check()
        if phase == self._phase:
            self._count = self._total
        self._done_phases.add(phase)
        self._close_step("completed")
        self._write(force=True)

    def tokens(self, prompt: int, completion: int) -> None:
        """Model tokens spent so far: `GET /tasks/{id}/stats` sums them (they were always 0 before)."""
        self.check()
        self.store.report(
            self.task_id, tokens_prompt=prompt, tokens_completion=completion, worker=self.holder
        )

    # sharing a job's work with other workers
    @property
    def shared(self) -> bool:
        """Other workers can help with this task's parts (it runs from the queue, held by a worker)."""
        return self._helpers is not None and self.holder is not None

    def share(
        self,
        phase: str,
        parts: Sequence[str],
        do: Callable[[str], object],
        helpers: int,
        stale_after_s: float = 30.0,
    ) -> None:
        """Do `parts` (`do(part)` each, taken in the order given: put the biggest first), with up to
        `helpers` other workers taking parts too. Returns when every part is done, or when the only
        ones left are held by workers that stopped renewing them for `stale_after_s` (they died): those
        are opened again and done here. A part must only save later work: whatever is left undone,
        the rest of the job does itself."""
        if self._helpers is None or self.holder is None:
            return
        self.store.add_parts(self.task_id, parts)
        self.start(phase, len(parts))
        try:
            self._helpers(max(0, min(helpers, len(parts) - 1)))
        except Exception:  # helpers only save time: with none (the queue away), this worker does them all
            log.warning("task %s: no other worker could be asked to help; going on alone", self.task_id)
        while True:
            part = self.store.take_part(self.task_id, self.holder)
            if part is not None:
                self.check()
                do_part(do, part)
                self.store.finish_part(self.task_id, part)
                self.advance(phase)
                continue
            counts = self.store.part_counts(self.task_id)
            if not counts.get("taken"):
                break
            if not self.store.reopen_stale_parts(self.task_id, stale_after_s):
                self.check()
                time.sleep(0.2)  # another worker is doing the last parts: doing them twice saves nothing
        self.finish(phase)

    # reporting
    def progress(self, final_pct: float | None = None) -> TaskProgress:
        phases = self.phases or ([self._phase] if self._phase else [])
        if final_pct is not None:
            pct = final_pct
        elif not phases:
            pct = 0.0
        else:
            done = sum(1 for p in phases if p in self._done_phases)
            fraction = 0.0
            if self._phase is not None and self._phase not in self._done_phases and self._total:
                fraction = min(1.0, self._count / self._total)
            pct = min(99.0, 100.0 * (done + fraction) / len(phases))
        elapsed = time.monotonic() - self._began
        eta = round(elapsed * (100 - pct) / pct, 1) if 0 < pct < 100 else (0.0 if pct >= 100 else None)
        label = None
        if self._phase is not None:
            label = f"{self._phase} {self._count}/{self._total}" if self._total else self._phase
        return {
            "phase": self._phase,
            "phases": phases,
            "label": label,
            "pct": round(pct, 1),
            "eta_seconds": eta,
        }

    def steps(self, end_status: str | None = None) -> list[TaskStep]:
        if end_status is not None:
            self._close_step(end_status)
        return [s.copy() for s in self._steps]

    def _close_step(self, status: str) -> None:
        if self._steps and self._steps[-1]["status"] == "running":
            step = self._steps[-1]
            step["status"] = status
            total = self._total
            step["commentary"] = f"{step['type']}: {self._count}/{total}" if total else step["commentary"]

    def _write(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_write < PROGRESS_WRITE_INTERVAL_S:
            return
        self._last_write = now
        if self._steps and self._steps[-1]["status"] == "running" and self._total:
            self._steps[-1]["commentary"] = f"{self._phase}: {self._count}/{self._total}"
        self.store.report(self.task_id, progress=self.progress(), steps=self.steps(), worker=self.holder)


Job = Callable[[TaskHandle], Any]


def do_part(do: Callable[[str], object], part: str) -> None:
    """A part only saves later work: one that fails is logged and counted done (the rest of the job
    meets the same input and reports it properly)."""
    try:
        do(part)
    except Exception:
        log.warning("a part (%s) failed; the job will do it itself", part, exc_info=True)
