"""A sandbox host shared by the sandbox tests, and the mode they reached, printed at the end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth.sandbox import Limits, Sandbox, SandboxHost

REACHED: dict[str, object] = {}


@pytest.fixture(scope="session")
def acme_version(sample_version: Path) -> Path:
    return sample_version


@pytest.fixture(scope="session")
def host() -> Iterator[SandboxHost]:
    with SandboxHost(Limits(step_timeout_s=5, hard_kill_grace_s=2)) as h:
        yield h


def _pids_cgroup(pid: int) -> Path | None:
    """The v1 pids cgroup directory a process is in, when it is one of Sleuth's."""
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        _id, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(",") and "/sleuth/" in path:
            return Path("/sys/fs/cgroup/pids") / path.lstrip("/")
    return None


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:  # FileNotFoundError, or ProcessLookupError when it exits while being read
        return False


@pytest.fixture
def sandbox(host: SandboxHost, acme_version: Path) -> Iterator[Sandbox]:
    """A fresh sandbox; afterwards it must be gone and the next turn must work."""
    sb = host.start_turn({"acme": acme_version})
    own_cgroup = _pids_cgroup(sb.pid)
    REACHED.update(
        mode=sb.ready["mode"],
        layers=sb.ready["layers"],
        landlock_abi=sb.ready["landlock_abi"],
        disabled=sb.ready["disabled"],
    )
    yield sb
    sb.close()
    import time

    deadline = time.monotonic() + 5
    while _alive(sb.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(sb.pid), "the sandbox outlived its turn"
    while own_cgroup is not None and own_cgroup.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert own_cgroup is None or not own_cgroup.exists(), "the turn's cgroup was left behind"
    with host.start_turn({"acme": acme_version}) as after:
        assert after.exec("1 + 1").output == "2\n"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if REACHED:
        terminalreporter.write_line(
            f"sandbox mode reached: {REACHED['mode']}; layers: {', '.join(REACHED['layers'])}; "  # type: ignore[arg-type]
            f"landlock ABI {REACHED['landlock_abi']}; disabled: {REACHED['disabled'] or 'none'}"
        )
