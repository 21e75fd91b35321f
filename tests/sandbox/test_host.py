"""`SandboxHost` under concurrency: turns started at once from short-lived threads each get their own
working sandbox, and the zygote outlives the threads that happened to start it."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sleuth.sandbox import Limits, SandboxHost


def _one_turn(host: SandboxHost, version: Path, n: int) -> tuple[int, str]:
    with host.start_turn({"acme": version}) as sandbox:
        result = sandbox.exec(f"print({n} * 2)")
        return sandbox.pid, result.output.strip()


def test_turns_started_at_once_from_many_threads(acme_version: Path) -> None:
    with SandboxHost(Limits(step_timeout_s=10)) as host:
        with ThreadPoolExecutor(max_workers=6) as pool:
            results = list(pool.map(lambda n: _one_turn(host, acme_version, n), range(12)))
        assert [output for _, output in results] == [str(n * 2) for n in range(12)]
        assert len({pid for pid, _ in results}) == 12  # a fresh sandbox per turn


def test_the_zygote_outlives_the_thread_that_started_it(acme_version: Path) -> None:
    with SandboxHost(Limits(step_timeout_s=10)) as host:
        first: list[tuple[int, str]] = []
        starter = threading.Thread(target=lambda: first.append(_one_turn(host, acme_version, 1)))
        starter.start()
        starter.join()  # the thread that caused the zygote to start is gone now
        assert first[0][1] == "2"
        zygote = host.info["pid"]
        assert _one_turn(host, acme_version, 2)[1] == "4"
        assert host.info["pid"] == zygote  # the same zygote: it did not die with that thread
