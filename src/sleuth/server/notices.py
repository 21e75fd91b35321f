"""PostgreSQL notifications to this process: one listening connection per process, fanned out in-process.

`ServerDB` sends a NOTIFY in the transaction that stores a turn's event (`sleuth_events`) or asks a
held turn to stop (`sleuth_control`); PostgreSQL delivers it when that transaction commits. The
listener wakes this process's streams of that turn (`EventHub`) and stops the turn if it runs here.

A notification is a wake-up, never data: streams read the events from the database, and poll every
`sse.POLL_S` besides, so a notification lost while the connection was down costs a little latency,
not an event. A lost connection is retried with backoff; on reconnecting every stream is woken.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sleuth.errors import require_extra
from sleuth.server.queue import conninfo
from sleuth.store.records.server_db import CONTROL_CHANNEL, EVENTS_CHANNEL

log = logging.getLogger("sleuth.notices")
MAX_BACKOFF_S = 10.0


class Listener:
    """A daemon thread on one LISTEN connection: `on_event(query_id)`, `on_control(query_id)`."""

    def __init__(
        self,
        url: str,
        on_event: Callable[[str], None],
        on_control: Callable[[str], object],
        on_reconnect: Callable[[], None] | None = None,
    ) -> None:
        require_extra("PostgreSQL notifications", "postgres", "psycopg")
        self.url = conninfo(url)
        self.on_event, self.on_control, self.on_reconnect = on_event, on_control, on_reconnect
        self._stop = threading.Event()
        self.connected = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sleuth-listen", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        import psycopg

        backoff = 0.5
        first = True
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True) as conn:
                    conn.execute(f"LISTEN {EVENTS_CHANNEL}")
                    conn.execute(f"LISTEN {CONTROL_CHANNEL}")
                    self.connected.set()
                    if not first and self.on_reconnect is not None:
                        self.on_reconnect()
                    first, backoff = False, 0.5
                    while not self._stop.is_set():
                        for notice in conn.notifies(timeout=1.0):
                            self._dispatch(notice.channel, notice.payload)
            except psycopg.Error as exc:
                self.connected.clear()
                if self._stop.is_set():
                    return
                log.warning("lost the notification connection (%s); retrying in %.1f s", exc, backoff)
                self._stop.wait(backoff)
                backoff = min(MAX_BACKOFF_S, backoff * 2)

    def _dispatch(self, channel: str, payload: str) -> None:
        try:
            if channel == EVENTS_CHANNEL:
                self.on_event(payload)
            elif channel == CONTROL_CHANNEL:
                self.on_control(payload)
        except Exception:  # a handler's fault must not end the listening
            log.exception("handling a %s notification failed", channel)
