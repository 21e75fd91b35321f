"""A turn run in the foreground of a terminal (`sleuth ask`): it never outlives its client.

The turn is held in the database from its admission by this process (`Holder`), and the hold is renewed
while it runs, so a server sharing the home leaves it alone, and fails it once this process is gone.
The turn runs on a thread while the main thread watches: Ctrl-C, or a reader that closed our output
(`sleuth ask … | head -1`), cancels it, and it ends `cancelled` with its steps kept. A second Ctrl-C
leaves at once, the turn ended as cancelled in the database.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from sleuth.agent.records import Query
from sleuth.agent.turn import PreparedTurn, Runtime
from sleuth.errors import Failed
from sleuth.store.records.server_db import Holder, worker_name

HEARTBEAT_S = 10.0
HOLDER = Holder(worker_name("cli"), 3 * HEARTBEAT_S)
WAKE_S = 0.2  # how often the main thread looks up from waiting (Ctrl-C is delivered between waits)


class Interrupted(Failed):
    """The person pressed Ctrl-C twice: the turn was ended as cancelled without waiting for it."""

    def __init__(self, query_id: str) -> None:
        super().__init__(f"turn {query_id} cancelled")
        self.query_id = query_id


def output_closed(exc: BaseException) -> bool:
    """Whoever read our output went away (a closed pipe)."""
    return isinstance(exc, BrokenPipeError) or (isinstance(exc, OSError) and exc.errno == errno.EPIPE)


class Foreground:
    """Runs one prepared turn, printing its events with `printer`, until it ends (`run`)."""

    def __init__(
        self, runtime: Runtime, turn: PreparedTurn, printer: Callable[[dict[str, Any]], None]
    ) -> None:
        self.runtime = runtime
        self.turn = turn
        self.printer = printer
        self.query_id = turn.query.id
        self.lost_output = threading.Event()
        self.cancel_reason: str | None = None

    def _emit(self, event: dict[str, Any]) -> None:
        if self.lost_output.is_set():
            return
        try:
            self.printer(event)
        except OSError as exc:
            if not output_closed(exc):
                raise
            self.lost_output.set()
            self.runtime.cancel(self.query_id)  # stops between steps; the sandbox's step is cut

    def run(self, on_cancelling: Callable[[str], None] | None = None) -> Query:
        """The turn's final Query. `Interrupted` after a second Ctrl-C."""
        done: Future[Query] = Future()

        def work() -> None:
            try:
                done.set_result(self.runtime.run(self.turn, self._emit))
            except BaseException as exc:  # `run` never raises for a turn's failure: a last resort
                done.set_exception(exc)

        threading.Thread(target=work, name="sleuth-ask", daemon=True).start()
        next_beat = time.monotonic() + HEARTBEAT_S
        while True:
            try:
                return done.result(timeout=WAKE_S)
            except TimeoutError:
                pass
            except KeyboardInterrupt:
                if self.cancel_reason is not None:  # the second one: do not wait
                    self.runtime.db.end_turn(self.query_id, "cancelled", "cancelled: interrupted")
                    raise Interrupted(self.query_id) from None
                self._cancel("interrupted", on_cancelling)
            if self.lost_output.is_set() and self.cancel_reason is None:
                self._cancel("output closed", None)
            if time.monotonic() >= next_beat:
                next_beat = time.monotonic() + HEARTBEAT_S
                self._beat()

    def _cancel(self, reason: str, on_cancelling: Callable[[str], None] | None) -> None:
        self.cancel_reason = reason
        self.runtime.cancel(self.query_id)
        if on_cancelling is not None:
            on_cancelling(reason)

    def _beat(self) -> None:
        """Renew the hold; a stop asked from a server (`POST …/cancel`) stops the turn here too."""
        try:
            held = self.runtime.db.renew_holds(HOLDER.worker, HOLDER.lease_s, [self.query_id])
        except Exception:  # the database is busy or away: the hold lasts three beats
            return
        if any(h.cancel_requested for h in held):
            self.runtime.cancel(self.query_id)
