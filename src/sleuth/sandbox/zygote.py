"""The zygote (sandbox.md §2): started once with a scrubbed environment, it imports the SDK and the
REPL, then forks a child per turn. Child A joins new namespaces and forks B, which becomes PID 1
of the new pid namespace, locks itself down layer by layer and serves the REPL.

    python -m sleuth.sandbox.zygote CONTROL_FD

The control channel is an AF_UNIX SOCK_SEQPACKET socket: each `spawn` message arrives with the
turn's socket attached (SCM_RIGHTS), so the zygote never holds more than one turn's channel.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import selectors
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from sleuth.sandbox import layers
from sleuth.sandbox.limits import Limits
from sleuth.sandbox.protocol import send
from sleuth.sandbox.repl import serve
from sleuth.sdk.knowledge import ScopedContext

PR_SET_CHILD_SUBREAPER = 36
UID_BASE = 200_000
UID_SPAN = 50_000


def main(control_fd: int) -> None:
    # `python -m` puts the working directory first on sys.path; it is not part of the install.
    sys.path[:] = [p for p in sys.path if p not in ("", "/", os.getcwd())]
    control = socket.socket(fileno=control_fd)
    layers.remove_stale_cgroups()
    layers.preload_seccomp()  # it finds libseccomp with ldconfig, which a locked-down child cannot run
    layers.prctl(PR_SET_CHILD_SUBREAPER, 1)
    layers.prctl(layers.PR_SET_PDEATHSIG, signal.SIGKILL)  # the host went away: so do we
    mount_point = tempfile.mkdtemp(prefix="sleuth-root-")
    # Without a mount namespace a turn's scratch is a directory here, removed when the turn ends.
    scratch_root = tempfile.mkdtemp(prefix="sleuth-scratch-")
    os.chmod(scratch_root, 0o711)
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    control.send(
        json.dumps({"t": "zygote_ready", "pid": os.getpid(), "landlock_abi": layers.landlock_abi()}).encode()
    )
    counter = 0
    cgroups: dict[int, list[Path]] = {}  # child A's pid -> its turn's cgroup directories
    try:
        while True:
            for _key, _events in selector.select(timeout=0.25):
                data, fds, _flags, _addr = socket.recv_fds(control, 1 << 20, 1)
                if not data:
                    return
                message = json.loads(data)
                if message.get("t") != "spawn" or len(fds) != 1:
                    for fd in fds:
                        os.close(fd)
                    continue
                counter += 1
                limits = Limits.from_json(message["limits"])
                groups = layers.create_cgroup(
                    f"{os.getpid()}-{counter}", (limits.memory_mb + 256) << 20, limits.pids
                )
                uid = UID_BASE + (os.getpid() * 7 + counter) % UID_SPAN
                pid_a, pid = _spawn(message, fds[0], (mount_point, scratch_root), uid, groups)
                cgroups[pid_a] = groups
                os.close(fds[0])
                control.send(json.dumps({"t": "spawned", "turn": message.get("turn"), "pid": pid}).encode())
            _reap(cgroups, scratch_root)
    finally:
        shutil.rmtree(mount_point, ignore_errors=True)
        for pid_a in list(cgroups):  # the host went away: end every turn, then clean up after them
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid_a, signal.SIGKILL)
        deadline = time.monotonic() + 2
        while cgroups and time.monotonic() < deadline:
            _reap(cgroups, scratch_root)
            time.sleep(0.01)
        shutil.rmtree(scratch_root, ignore_errors=True)


def _reap(cgroups: dict[int, list[Path]], scratch_root: str) -> None:
    """Collect exited children; a turn's cgroups go once its child A (which outlives B) is gone."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        layers.remove_cgroups(cgroups.pop(pid, []))
        shutil.rmtree(f"{scratch_root}/{pid}", ignore_errors=True)


def _spawn(
    message: dict[str, Any], turn_fd: int, dirs: tuple[str, str], uid: int, groups: list[Path]
) -> tuple[int, int]:
    """Fork A → join the cgroups → unshare → fork B; returns (A's pid, B's pid) in the zygote's
    (that is, the host's) pid namespace."""
    read_end, write_end = os.pipe()
    pid_a = os.fork()
    if pid_a == 0:  # child A
        os.close(read_end)
        code = 1
        try:
            layers.prctl(layers.PR_SET_PDEATHSIG, signal.SIGKILL)
            try:
                layers.join_cgroups(groups)  # first, while still privileged
            except OSError:
                groups = []
            namespaces: list[str] = []
            for flag, name in (
                (layers.CLONE_NEWNS, "mount"),
                (layers.CLONE_NEWPID, "pid"),
                (layers.CLONE_NEWNET, "net"),
                (layers.CLONE_NEWIPC, "ipc"),
                (layers.CLONE_NEWUTS, "uts"),
            ):
                try:
                    layers.unshare(flag)
                    namespaces.append(name)
                except OSError:
                    pass
            pid_b = os.fork()
            if pid_b == 0:
                os.close(write_end)
                _child(message, turn_fd, dirs, uid, namespaces, "v1" if groups else None)
                os._exit(0)
            os.write(write_end, str(pid_b).encode())
            os.close(write_end)
            _pid, status = os.waitpid(pid_b, 0)
            code = os.waitstatus_to_exitcode(status) & 0xFF
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        data = fh.read()
    return pid_a, int(data) if data else -1


def _child(
    message: dict[str, Any],
    turn_fd: int,
    dirs: tuple[str, str],
    uid: int,
    namespaces: list[str],
    cgroup: str | None,
) -> None:
    """B: lock down (sandbox.md §2.1, layers 2-9), then serve the REPL. Never returns normally.

    `dirs` is (mount point for the new root, parent of scratch directories without namespaces).
    """
    mount_point, scratch_root = dirs
    sock = socket.socket(fileno=turn_fd)
    limits = Limits.from_json(message["limits"])
    contexts: dict[str, str] = message["contexts"]
    layers_on: list[str] = []
    disabled: dict[str, str] = {}
    began = time.perf_counter()
    marks: dict[str, float] = {}
    try:
        layers.prctl(layers.PR_SET_PDEATHSIG, signal.SIGKILL)
        if cgroup:
            layers_on.append("cgroup")
            marks["cgroup"] = time.perf_counter()
        if namespaces:
            layers_on.append("namespaces")
            marks["namespaces"] = time.perf_counter()
        readable = [*layers.RootPlan(mount_point, limits.scratch_mb, uid).python_paths(), "/usr", "/lib"]
        scratch = "/scratch"
        if "mount" in namespaces and "pid" in namespaces:
            readable = layers.build_root(layers.RootPlan(mount_point, limits.scratch_mb, uid, contexts))
            layers_on.append("pivot_root")
            marks["pivot_root"] = time.perf_counter()
            mounted = {slug: f"/ctx/{slug}" for slug in contexts}
        else:
            disabled["pivot_root"] = "no mount or pid namespace"
            scratch = f"{scratch_root}/{os.getppid()}"  # named after child A, which the zygote reaps
            os.mkdir(scratch, 0o700)
            if os.geteuid() == 0:
                os.chown(scratch, uid, uid)
            os.chdir(scratch)
            mounted = dict(contexts)
            readable += list(contexts.values())
        try:
            layers.drop_privileges(uid)
            layers_on.append("uid")
            marks["uid"] = time.perf_counter()
        except OSError as exc:
            disabled["uid"] = str(exc)
        budget = limits.memory_mb * 1024 * 1024
        layers.set_rlimits(
            limits.cpu_s,
            layers.current_vm_bytes() + budget,
            limits.pids,
            limits.scratch_mb * 1024 * 1024,
            limits.nofile,
        )
        layers_on.append("rlimits")
        marks["rlimits"] = time.perf_counter()
        os.environ.clear()
        os.environ.update(HOME=scratch, TMPDIR=scratch, PATH="/nonexistent", LANG="C.UTF-8")
        landlock_abi = 0
        try:
            layers.prctl(layers.PR_SET_NO_NEW_PRIVS, 1)
            devices = [d for d in ("/dev/urandom", "/dev/random", "/dev/zero", "/proc") if os.path.exists(d)]
            landlock_abi = layers.apply_landlock(readable + devices, [scratch, "/dev/null"])
            layers_on.append("landlock")
            marks["landlock"] = time.perf_counter()
        except OSError as exc:
            disabled["landlock"] = str(exc)
        try:
            layers.apply_seccomp()
            layers_on.append("seccomp")
            marks["seccomp"] = time.perf_counter()
        except Exception as exc:
            disabled["seccomp"] = f"{type(exc).__name__}: {exc}"
        random.seed(os.urandom(16))
        np.random.seed(int.from_bytes(os.urandom(4), "little"))
        ok, missing = meets_floor(limits.floor, layers_on, landlock_abi)
        ready = {
            "t": "ready",
            "ok": ok,
            "missing": missing,
            "mode": "root" if "uid" in layers_on else "nons",
            "layers": layers_on,
            "disabled": disabled,
            "landlock_abi": landlock_abi,
            "namespaces": namespaces,
            "cgroup": cgroup,
            "python": sys.version.split()[0],
            # Milliseconds from fork to each layer, to see where a turn's start-up goes.
            "setup_ms": {name: round((t - began) * 1000, 2) for name, t in marks.items()},
        }
        if not ok:
            send(sock, ready)
            return
        serve(sock, [ScopedContext(slug, Path(path)) for slug, path in mounted.items()], ready)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            send(
                sock,
                {
                    "t": "ready",
                    "ok": False,
                    "missing": ["setup"],
                    "layers": layers_on,
                    "disabled": {**disabled, "setup": f"{type(exc).__name__}: {exc}"},
                },
            )
    finally:
        os._exit(0)


def meets_floor(floor: str, active: list[str], landlock_abi: int) -> tuple[bool, list[str]]:
    """standard: seccomp, rlimits, and Landlock or a pivoted root; strict: all of them and ABI ≥ 4."""
    missing: list[str] = []
    if floor == "none":
        return True, missing
    for layer in ("seccomp", "rlimits"):
        if layer not in active:
            missing.append(layer)
    if floor == "standard" and "landlock" not in active and "pivot_root" not in active:
        missing.append("landlock or pivot_root")
    if floor == "strict":
        missing += [x for x in ("namespaces", "pivot_root", "uid", "landlock") if x not in active]
        if landlock_abi < 4:
            missing.append("landlock ABI >= 4")
    return not missing, missing


if __name__ == "__main__":
    main(int(sys.argv[1]))
